// Package circuit is a per-process circuit breaker in front of the order store:
// after Threshold failures in a row it opens and refuses calls but one probe at a
// time, at most one per ProbeInterval; a probe that succeeds closes it.
package circuit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// State is the breaker's state.
type State int

// The states; String gives the state label of orderstatus_circuit_state and _changes_total.
const (
	Closed   State = 0
	Open     State = 1
	HalfOpen State = 2 // open, with a probe under way
)

// States lists every state.
var States = []State{Closed, Open, HalfOpen}

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "unknown"
}

// Defaults of Options.
const (
	// DefaultThreshold: five failed calls in a row (each retried) are not a blip.
	DefaultThreshold = 5
	// DefaultProbeInterval: a failing store sees a trickle from each instance.
	DefaultProbeInterval = 5 * time.Second
)

// Options tune a Breaker. The zero value gives the defaults.
type Options struct {
	Threshold     int
	ProbeInterval time.Duration
	// Now is the clock (nil: time.Now), never read under the breaker's lock.
	Now func() time.Time
	// OnChange, if set, is called after each state change, outside the lock.
	OnChange func(from, to State)
}

// Breaker is safe for concurrent use.
type Breaker struct {
	mu        sync.Mutex
	o         Options
	state     State
	failures  int
	lastProbe time.Time
	probing   bool
}

// New returns a closed Breaker.
func New(o Options) *Breaker {
	if o.Threshold <= 0 {
		o.Threshold = DefaultThreshold
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Breaker{o: o}
}

// Ticket is the permission Allow gives; report its outcome once with Done.
type Ticket struct {
	b     *Breaker
	probe bool
}

// Probe reports whether the call is the breaker's probe.
func (t Ticket) Probe() bool { return t.probe }

// Allow reports whether a call may go to the store: always when closed, else one probe at a time.
func (b *Breaker) Allow() (t Ticket, ok bool) {
	b.mu.Lock()
	closed := b.state == Closed
	b.mu.Unlock()
	if closed {
		return Ticket{b: b}, true
	}
	now := b.o.Now()
	b.mu.Lock()
	if b.state == Closed {
		b.mu.Unlock()
		return Ticket{b: b}, true
	}
	if b.probing || now.Sub(b.lastProbe) < b.o.ProbeInterval {
		b.mu.Unlock()
		return Ticket{}, false
	}
	b.probing, b.lastProbe = true, now
	from := b.state
	b.state = HalfOpen
	b.mu.Unlock()
	b.notify(from, HalfOpen)
	return Ticket{b: b, probe: true}, true
}

// Done reports an allowed call's outcome: failed if the store failed, else it
// answered (closing the breaker). A nil Ticket's Done does nothing.
func (t Ticket) Done(failed bool) {
	if t.b == nil {
		return
	}
	b := t.b
	var now time.Time
	if failed {
		now = b.o.Now()
	}
	b.mu.Lock()
	from := b.state
	if t.probe {
		b.probing = false
	}
	switch {
	case !failed:
		b.failures, b.state = 0, Closed
	case t.probe:
		b.state, b.lastProbe = Open, now
	case b.state == Closed:
		if b.failures++; b.failures >= b.o.Threshold {
			b.state, b.lastProbe = Open, now
		}
	}
	to := b.state
	b.mu.Unlock()
	b.notify(from, to)
}

// Abort ends an allowed call whose outcome says nothing about the store (cut
// short): a probe's slot is freed at once. A nil Ticket's Abort does nothing.
func (t Ticket) Abort() {
	if t.b == nil || !t.probe {
		return
	}
	b := t.b
	b.mu.Lock()
	from := b.state
	b.probing, b.lastProbe = false, time.Time{} // the next call may probe at once
	if b.state == HalfOpen {
		b.state = Open
	}
	to := b.state
	b.mu.Unlock()
	b.notify(from, to)
}

// State returns the current state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// notify calls OnChange for a change; the caller holds no lock.
func (b *Breaker) notify(from, to State) {
	if f := b.o.OnChange; f != nil && from != to {
		f(from, to)
	}
}

// ErrOpen is the error of a call Guard refused: the breaker is open.
var ErrOpen = errors.New("circuit open: the order store is failing")

// Guard wraps next in b (nil: no-op): a refused call fails with ErrOpen, a probe makes one
// attempt (single); failed tells a store failure, aborted an error saying nothing of the store.
func Guard[T any](b *Breaker, failed, aborted func(error) bool, single func(context.Context) context.Context) func(next func(context.Context) (T, error)) func(context.Context) (T, error) {
	return func(next func(context.Context) (T, error)) func(context.Context) (T, error) {
		if b == nil {
			return next
		}
		return func(ctx context.Context) (T, error) {
			t, ok := b.Allow()
			switch {
			case !ok && ctx.Value(forceKey{}) != nil:
				return next(single(ctx)) // one attempt, and no word to the breaker
			case !ok:
				var zero T
				return zero, ErrOpen
			case t.Probe():
				ctx = single(ctx)
			}
			v, err := next(ctx)
			if err != nil && !failed(err) && aborted(err) {
				t.Abort()
			} else {
				t.Done(err != nil && failed(err))
			}
			return v, err
		}
	}
}

type forceKey struct{}

// Force marks ctx so that Guard lets one attempt through while open, not as a probe.
func Force(ctx context.Context) context.Context { return context.WithValue(ctx, forceKey{}, true) }
