// Package clock owns the notion of "now" for code that must run on a time
// other than the wall clock: the in-memory broker and the development host
// measure lock durations, schedules and time-to-live on a Clock, so tests can
// let a 30-minute payment timeout pass in a fraction of a second.
//
// Real is the wall clock. Scaled runs a fixed factor faster than the wall
// clock, continuously and monotonically, so code that waits on it behaves
// exactly as it would in production, only sooner.
package clock

import (
	"context"
	"fmt"
	"time"
)

// Clock tells the time and makes timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time on this clock.
	Now() time.Time
	// NewTimer returns a timer that fires once d of this clock's time has
	// passed. A d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C delivers the clock's time once when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped
	// the timer (false if it had fired or been stopped already).
	Stop() bool
}

// Sleep waits until d of c's time has passed or ctx is done, whichever is
// first, and returns ctx.Err() in the second case.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// ScaledClock is a clock that starts at the wall-clock time of its creation
// and then runs Factor times faster than the wall clock.
type ScaledClock struct {
	factor    float64
	realStart time.Time // carries the monotonic reading
	start     time.Time // clock time at realStart, wall reading only
}

// Scaled returns a clock running factor times faster than the wall clock
// (factor 60 makes one minute pass per real second). It panics if factor is
// not positive, a programming error.
func Scaled(factor float64) *ScaledClock {
	if !(factor > 0) {
		panic(fmt.Sprintf("clock: Scaled factor must be positive, got %v", factor))
	}
	now := time.Now()
	return &ScaledClock{factor: factor, realStart: now, start: now.Round(0)}
}

// Factor returns how many times faster than the wall clock c runs.
func (c *ScaledClock) Factor() float64 { return c.factor }

// Now returns the scaled time. It never goes backwards.
func (c *ScaledClock) Now() time.Time {
	elapsed := time.Since(c.realStart) // monotonic
	return c.start.Add(time.Duration(float64(elapsed) * c.factor))
}

// Real converts a duration on this clock into wall-clock time.
func (c *ScaledClock) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.factor)
}

// NewTimer returns a timer that fires after d of scaled time, that is d /
// Factor of wall-clock time.
func (c *ScaledClock) NewTimer(d time.Duration) Timer {
	ch := make(chan time.Time, 1) // the callback runs at most once
	t := time.AfterFunc(c.Real(d), func() { ch <- c.Now() })
	return scaledTimer{t: t, ch: ch}
}

type scaledTimer struct {
	t  *time.Timer
	ch chan time.Time
}

func (s scaledTimer) C() <-chan time.Time { return s.ch }
func (s scaledTimer) Stop() bool          { return s.t.Stop() }

var (
	_ Clock = realClock{}
	_ Clock = (*ScaledClock)(nil)
)
