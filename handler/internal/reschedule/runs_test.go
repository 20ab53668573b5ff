package reschedule

import (
	"testing"
	"time"
)

func TestRuns(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	copyAt := func(at time.Time) Original {
		return Original{MessageID: "o-1:2:retry:1", ApplicationProperties: map[string]any{PropScheduledAt: at}}
	}
	var r Runs
	r.Answered(t0) // a success with no failures before it ends no run
	if r.NewRun(copyAt(t0.Add(-time.Hour)), false) {
		t.Fatal("no run has ended: a copy scheduled an hour ago starts no new run")
	}
	if !r.Failed() {
		t.Fatal("the first failure after a success is fresh")
	}
	if r.Failed() {
		t.Fatal("the second failure in a row is not fresh")
	}
	if !r.NewRun(Original{MessageID: "o-1:2"}, true) {
		t.Error("a fresh failure is a new run")
	}
	r.Answered(t0.Add(time.Minute)) // ends the run
	tests := []struct {
		name string
		o    Original
		want bool
	}{
		{"a copy scheduled before the run ended", copyAt(t0.Add(30 * time.Second)), true},
		{"a copy scheduled after it", copyAt(t0.Add(2 * time.Minute)), false},
		{"not a copy", Original{MessageID: "o-1:2"}, false},
	}
	for _, tt := range tests {
		if got := r.NewRun(tt.o, false); got != tt.want {
			t.Errorf("%s: NewRun = %v, want %v", tt.name, got, tt.want)
		}
	}
	r.Failed()
	r.Answered(t0) // an earlier end never moves the mark back
	if !r.NewRun(copyAt(t0.Add(30*time.Second)), false) {
		t.Error("the mark moved back")
	}
}
