// Package clock owns the notion of "now" for code that must run on a time
// other than the wall clock, so tests can let a 30-minute payment timeout
// pass in a fraction of a second. Real is the wall clock; Scaled runs a
// factor faster, monotonically, and can be advanced or re-speeded.
package clock

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time and makes timers; safe for concurrent use.
type Clock interface {
	// Now returns the current time on this clock.
	Now() time.Time
	// NewTimer returns a timer that fires once d of this clock's time passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C delivers the clock's time once when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing and reports whether it stopped it.
	Stop() bool
}

// Sleep waits until d of c's time has passed or ctx is done (ctx.Err()).
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
// and runs Factor times faster; Advance, AdvanceTo and SetFactor re-evaluate
// pending timers. Its methods are safe for concurrent use.
type ScaledClock struct {
	// rate guards the speed, so that no Now sees the old speed after another saw the new.
	rate      sync.RWMutex
	factor    float64
	realStart time.Time    // carries the monotonic reading
	start     time.Time    // clock time at realStart without Advance's offset, wall reading only
	offset    atomic.Int64 // nanoseconds added by Advance; only grows

	mu      sync.Mutex // serialises Advance and SetFactor and guards pending
	pending map[*scaledTimer]struct{}
}

// Scaled returns a clock running factor times faster; it panics if factor is not positive.
func Scaled(factor float64) *ScaledClock {
	checkFactor("Scaled", factor)
	now := time.Now()
	return &ScaledClock{factor: factor, realStart: now, start: now.Round(0), pending: map[*scaledTimer]struct{}{}}
}

func checkFactor(what string, factor float64) {
	if !(factor > 0) || math.IsInf(factor, 1) {
		panic(fmt.Sprintf("clock: %s factor must be positive and finite, got %v", what, factor))
	}
}

// Factor returns how many times faster than the wall clock c runs now.
func (c *ScaledClock) Factor() float64 {
	c.rate.RLock()
	defer c.rate.RUnlock()
	return c.factor
}

// SetFactor makes c run factor times faster from now on, without a jump;
// it panics if factor is not positive.
func (c *ScaledClock) SetFactor(factor float64) {
	checkFactor("SetFactor", factor)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rate.Lock()
	now := time.Now()
	c.start = c.start.Add(time.Duration(float64(now.Sub(c.realStart)) * c.factor))
	c.realStart, c.factor = now, factor
	c.rate.Unlock()
	c.recheckLocked()
}

// Now returns the scaled time. It never goes backwards.
func (c *ScaledClock) Now() time.Time {
	c.rate.RLock()
	defer c.rate.RUnlock()
	elapsed := time.Since(c.realStart) // monotonic
	return c.start.Add(time.Duration(float64(elapsed)*c.factor) + time.Duration(c.offset.Load()))
}

// Real converts a duration on this clock into wall-clock time at its present speed.
func (c *ScaledClock) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.Factor())
}

// Advance moves c forward by d at once (nothing for d <= 0); due timers fire.
func (c *ScaledClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset.Add(int64(d))
	c.recheckLocked()
}

// AdvanceTo moves c forward to t if it is earlier, as Advance does, and
// returns by how much; unlike Advance it cannot overshoot t.
func (c *ScaledClock) AdvanceTo(t time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := t.Sub(c.Now())
	if d <= 0 {
		return 0
	}
	c.offset.Add(int64(d))
	c.recheckLocked()
	return d
}

// recheckLocked fires the due pending timers and re-arms the others; c.mu held.
func (c *ScaledClock) recheckLocked() {
	now := c.Now()
	for t := range c.pending {
		if left := t.deadline.Sub(now); left > 0 {
			t.t.Reset(c.Real(left))
			continue
		}
		t.t.Stop()
		delete(c.pending, t)
		t.ch <- now
	}
}

// NewTimer returns a timer that fires once d of this clock's time passed.
func (c *ScaledClock) NewTimer(d time.Duration) Timer {
	t := &scaledTimer{c: c, ch: make(chan time.Time, 1)} // sent to at most once
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	if d <= 0 {
		t.ch <- now
		return t
	}
	t.deadline = now.Add(d)
	c.pending[t] = struct{}{}
	t.t = time.AfterFunc(c.Real(d), t.expire)
	return t
}

type scaledTimer struct {
	c        *ScaledClock
	deadline time.Time // on the clock
	t        *time.Timer
	ch       chan time.Time
}

// expire re-arms the timer until the clock really reached the deadline.
func (t *scaledTimer) expire() {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[t]; !ok {
		return // stopped, or fired by an Advance
	}
	now := c.Now()
	if left := t.deadline.Sub(now); left > 0 {
		t.t.Reset(max(c.Real(left), time.Microsecond))
		return
	}
	delete(c.pending, t)
	t.ch <- now
}

func (t *scaledTimer) C() <-chan time.Time { return t.ch }

func (t *scaledTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[t]; !ok {
		return false
	}
	delete(c.pending, t)
	t.t.Stop()
	return true
}

var (
	_ Clock = realClock{}
	_ Clock = (*ScaledClock)(nil)
)

// View maps times between a clock and the real one, as of one instant.
type View struct {
	at, real time.Time
	factor   float64
}

// ToClock is the time on the clock of t, a real time; zero stays zero.
func (v View) ToClock(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return v.at.Add(time.Duration(float64(t.Sub(v.real)) * v.factor))
}

// ToReal is the real time of t, a time on the clock; zero stays zero.
func (v View) ToReal(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return v.real.Add(time.Duration(float64(t.Sub(v.at)) / v.factor))
}

// Identity is the View that maps nothing: a clock that is the real one.
func Identity() View {
	n := time.Now()
	return View{at: n, real: n, factor: 1}
}

// OffsetOf is the View of c at the real instant real, unscaled.
func OffsetOf(c Clock, real time.Time) View { return View{at: c.Now(), real: real, factor: 1} }
