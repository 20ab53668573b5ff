// Package recovery is the fleet-wide half of the guard that keeps an
// on-time PaymentTimeoutCheck from cancelling an order whose Paid an
// outage of the order table delayed.
//
// During an outage a failing message is scheduled again as a copy with a
// backoff (package reschedule); after the table's return the copies come
// back over up to one backoff cap. A check that comes on time meanwhile
// would find its order still Created and cancel it although its Paid is
// still waiting. The process that rescheduled knows (orderfn settles every
// check until its copies are due, with a margin), but on Flex
// Consumption the OrderStatus function scales out on instances of its
// own: one that scaled out after the outage, or that had no traffic in
// it, knows nothing. So the knowledge goes where every instance looks
// anyway, the order table: a marker "recovering until T" (store's recovery
// marker, one row in a partition no order id can take) that a process
// raises when its store calls succeed again after it rescheduled, and that
// a check about to cancel reads.
//
// The marker only ever moves later, so a marker time this process has seen
// is a lower bound of the stored one for ever: while it is in the future,
// the Guard answers "recovering" without a read. Only a "not recovering"
// answer goes stale, and it is trusted for Options.TTL; after that the
// next check that would cancel reads the marker again (one round trip).
package recovery

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Marker is the recovery marker of the order store (tablestore.Store and
// memstore.Store implement it): RecoveringUntil reads it (the zero time
// when there is none); RaiseRecovering moves it to until unless it is
// later already, and returns it as it is then. Errors wrap the store
// sentinels (store.ErrTransient when a retry may succeed).
type Marker interface {
	RecoveringUntil(ctx context.Context) (time.Time, error)
	RaiseRecovering(ctx context.Context, until time.Time) (time.Time, error)
}

// Defaults of Options.
const (
	// DefaultTTL is how long a read that found the fleet not recovering
	// is trusted. It bounds how late this process learns of a marker
	// raised by another (see the package comment): well below the first
	// backoff (reschedule.DefaultBase, 10 s), and at most one read per
	// second per process for the checks that would cancel.
	DefaultTTL = time.Second
	// DefaultSlack is added to the time of a raise that must write, so
	// that the raises asking for a little later in the following
	// seconds (every copy applied after an outage asks for its
	// scheduler's horizon) cost nothing: at most one write per slack
	// per process, for a marker at most the slack later than needed. Every
	// check that settles after an outage waits the slack too, so it is
	// short: 2 s makes about 150 writes per process over a 5-minute
	// recovery (each one Table Storage transaction).
	DefaultSlack = 2 * time.Second
)

// Options tune a Guard. The zero value gives the defaults.
type Options struct {
	TTL   time.Duration
	Slack time.Duration
}

// Guard caches the recovery marker for one process. It is safe for
// concurrent use. Times are on the caller's clock (the one the backoffs
// run on: the broker's, when it has one).
type Guard struct {
	m          Marker
	ttl, slack time.Duration

	mu     sync.Mutex
	until  time.Time // the latest marker seen: a lower bound of the stored one
	readAt time.Time // the caller's now at the last read; zero: never read

	reading sync.Mutex // one read at a time: the others wait and use it
	raising sync.Mutex // one raise at a time
}

// New returns a Guard over m.
func New(m Marker, o *Options) *Guard {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Slack < 0 {
		opts.Slack = 0
	} else if opts.Slack == 0 {
		opts.Slack = DefaultSlack
	}
	return &Guard{m: m, ttl: opts.TTL, slack: opts.Slack}
}

// Until returns the latest marker time this process has seen (zero:
// none). The stored marker is at least that.
func (g *Guard) Until() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.until
}

// Cached tells from what this process knows, without any storage call,
// whether the fleet was recovering at at (no later than now: when the
// message asking came due, which a backlog may have delivered long
// after): recovering when the latest marker seen is after at (a lower
// bound, so that holds whatever another process wrote since); known false
// when it is not and the last read was more than TTL before now (or never
// made), so that only a read can tell.
func (g *Guard) Cached(now, at time.Time) (recovering, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.until.After(at) {
		return true, true
	}
	return false, !g.readAt.IsZero() && now.Sub(g.readAt) < g.ttl && !now.Before(g.readAt)
}

// Recovering reports whether the fleet was recovering at at (see
// Cached): from the cache when it can tell, else after reading the marker
// (read true: one storage round trip). Reads are serialized, so that
// calls that come together make one read. A failed read is an error and
// tells nothing.
func (g *Guard) Recovering(ctx context.Context, now, at time.Time) (recovering, read bool, err error) {
	if rec, known := g.Cached(now, at); known {
		return rec, false, nil
	}
	g.reading.Lock()
	defer g.reading.Unlock()
	if rec, known := g.Cached(now, at); known {
		return rec, false, nil
	}
	until, err := g.m.RecoveringUntil(ctx)
	if err != nil {
		return false, true, fmt.Errorf("recovery: read the marker: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if until.After(g.until) {
		g.until = until
	}
	if now.After(g.readAt) {
		g.readAt = now
	}
	return g.until.After(at), true, nil
}

// Raise makes sure the marker is at until or later, and returns the marker
// as this process then knows it. When the latest marker seen is at until
// or later, it does nothing (wrote false, no storage call); otherwise it
// raises the stored marker to until plus Options.Slack. Raises are
// serialized, and one that finds the marker raised meanwhile far enough
// does nothing either. wrote reports that this call moved the stored
// marker (as far as it can tell: another writer may have moved it as far
// at the same moment).
func (g *Guard) Raise(ctx context.Context, until time.Time) (stored time.Time, wrote bool, err error) {
	if known := g.Until(); !known.Before(until) {
		return known, false, nil
	}
	g.raising.Lock()
	defer g.raising.Unlock()
	known := g.Until()
	if !known.Before(until) {
		return known, false, nil
	}
	want := until.Add(g.slack)
	got, err := g.m.RaiseRecovering(ctx, want)
	if err != nil {
		return known, false, fmt.Errorf("recovery: raise the marker to %s: %w", want.UTC().Format(time.RFC3339), err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if got.After(g.until) {
		g.until = got
	}
	return g.until, !got.After(want.Add(time.Millisecond)), nil
}
