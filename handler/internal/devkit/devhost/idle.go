package devhost

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// idleTracker follows, for fast-forwarding, the sessions held and which of
// their receivers wait idle, until when.
type idleTracker struct {
	mu    sync.Mutex
	held  map[string]int          // queue -> sessions held by the dispatchers
	busy  map[string]int          // queue -> receivers of held sessions not waiting idle
	waits map[*receiver]time.Time // receivers waiting idle -> when their wait ends
}

// receiver identifies one receiving goroutine of a held session.
type receiver struct{ queue string }

func newIdleTracker() *idleTracker {
	return &idleTracker{held: map[string]int{}, busy: map[string]int{}, waits: map[*receiver]time.Time{}}
}

// hold records sessions accepted (n > 0) or closed (n < 0) on queue, and
// receivers busy until they wait.
func (t *idleTracker) hold(queue string, n, receivers int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held[queue] += n
	t.busy[queue] += receivers
}

// wait records that r waits idle until until.
func (t *idleTracker) wait(r *receiver, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy[r.queue]--
	t.waits[r] = until
}

// woke records that r's wait ended.
func (t *idleTracker) woke(r *receiver) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy[r.queue]++
	delete(t.waits, r)
}

// exited records that r stopped receiving.
func (t *idleTracker) exited(r *receiver) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy[r.queue]--
}

// state returns queue's sessions held and whether all their receivers wait idle.
func (t *idleTracker) state(queue string) (held int, allWaiting bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held[queue], t.busy[queue] == 0
}

// firstWaitEnd returns the earliest end of an idle wait.
func (t *idleTracker) firstWaitEnd() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waits) == 0 {
		return time.Time{}, false
	}
	return slices.MinFunc(slices.Collect(maps.Values(t.waits)), time.Time.Compare), true
}
