package order

import (
	"testing"
	"time"
)

// A check that names a Created cancels only while that Created is the
// order's last change; one that names none checks whichever is in effect.
func TestDecideExpireOf(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	recreated := &State{Status: Created, LastSequence: 3}
	for _, tc := range []struct {
		name string
		seq  int64
		want Result
	}{
		{"the Created in effect", 3, Applied},
		{"an older Created", 1, Stale},
		{"a later Created not applied yet", 4, Stale},
		{"no Created named", 0, Applied},
	} {
		if got := DecideExpireOf(recreated, TimeoutCheck{OrderID: "o-1", CreatedSequence: tc.seq}, 30*time.Minute, now).Result; got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if got := DecideExpireOf(nil, TimeoutCheck{OrderID: "o-1", CreatedSequence: 1}, 30*time.Minute, now).Result; got != Stale {
		t.Errorf("unknown order: %s, want Stale", got)
	}
}
