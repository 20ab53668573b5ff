package reschedule

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// Runs tells whether a failure starts a new run (Restart); concurrency-safe, zero value ready.
type Runs struct {
	streak  atomic.Int64 // store calls failed in a row here (each after its in-call retries)
	endedAt atomic.Int64 // UnixNano at which a success last ended a run of failures
}

// Answered records a store call the store answered, at now.
func (r *Runs) Answered(now time.Time) {
	if r.streak.Load() == 0 || r.streak.Swap(0) == 0 {
		return
	}
	n := now.UnixNano()
	for {
		if o := r.endedAt.Load(); n <= o || r.endedAt.CompareAndSwap(o, n) {
			return
		}
	}
}

// Failed records a store failure; fresh: the first since the store answered.
func (r *Runs) Failed() (fresh bool) { return r.streak.Add(1) == 1 }

// NewRun reports if o's failure starts a new run: fresh, or o scheduled before the last run ended.
func (r *Runs) NewRun(o Original, fresh bool) bool {
	if fresh {
		return true
	}
	at := StateOf(o).ScheduledAt
	return !at.IsZero() && at.UnixNano() < r.endedAt.Load()
}

// Reschedule schedules o's next copy (Decide, then Restart when restart), or
// past the window returns a Decision with Park set. Errors wrap the broker's.
func (r *Rescheduler) Reschedule(ctx context.Context, o Original, restart bool, lastError string) (Decision, broker.Message, error) {
	d, err := r.Decide(o)
	if err != nil || d.Park {
		return d, broker.Message{}, err
	}
	if restart {
		d = r.Restart(d)
	}
	m, err := r.Schedule(ctx, o, d, lastError)
	return d, m, err
}
