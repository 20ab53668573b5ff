package reschedule

import (
	"context"
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

func TestReschedule(t *testing.T) {
	p := Policy{Base: 10 * time.Second, Cap: time.Minute, Window: time.Hour}
	tests := []struct {
		name      string
		o         Original
		restart   bool
		wantPark  bool
		wantCopy  string
		wantUntil time.Duration // the copy is due by t0 plus this
	}{
		{"a first failure: its first copy", original(), false, false, "o-1:2:retry:1", 10 * time.Second},
		{"a copy past its window: park, nothing scheduled", pastWindow(), false, true, "", 0},
		{"a fourth copy restarted: the first backoff again", fourthCopy(), true, false, "o-1:2:retry:4", 10 * time.Second},
		{"a fourth copy not restarted: its backoff grown", fourthCopy(), false, false, "o-1:2:retry:4", time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &dedupScheduler{seen: map[string]bool{}}
			d, m, err := New(s, "order-status", p, at(t0)).Reschedule(context.Background(), tt.o, tt.restart, "boom")
			if err != nil {
				t.Fatal(err)
			}
			if d.Park != tt.wantPark || m.MessageID != tt.wantCopy || len(s.kept) != map[bool]int{true: 0, false: 1}[tt.wantPark] {
				t.Fatalf("park %v, copy %q, %d scheduled; want park %v, copy %q", d.Park, m.MessageID, len(s.kept), tt.wantPark, tt.wantCopy)
			}
			if !tt.wantPark && s.at[0].After(t0.Add(tt.wantUntil)) {
				t.Errorf("due %s, want by %s", s.at[0], t0.Add(tt.wantUntil))
			}
		})
	}
}

// pastWindow is a copy whose first failure is more than the window ago.
func pastWindow() Original {
	o := original()
	o.MessageID = "o-1:2:retry:3"
	o.ApplicationProperties = map[string]any{PropRetryAttempt: int64(3), PropOriginalMessageID: "o-1:2", PropFirstFailureTime: t0.Add(-2 * time.Hour)}
	return o
}

// fourthCopy is the third copy of a message, failing again.
func fourthCopy() Original {
	o := original()
	o.MessageID = "o-1:2:retry:3"
	o.ApplicationProperties = map[string]any{PropRetryAttempt: int64(3), PropEpisodeAttempt: int64(3), PropOriginalMessageID: "o-1:2", PropFirstFailureTime: t0.Add(-time.Minute)}
	return o
}
