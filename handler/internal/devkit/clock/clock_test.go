package clock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
)

func TestScaledRunsFaster(t *testing.T) {
	c := clock.Scaled(3600) // one hour per real second
	before := c.Now()
	if err := clock.Sleep(context.Background(), c, 30*time.Minute); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if got := c.Now().Sub(before); got < 30*time.Minute {
		t.Errorf("clock advanced %v across a 30m Sleep, want at least 30m", got)
	}
}

func TestScaledTimerDeliversClockTime(t *testing.T) {
	c := clock.Scaled(1000)
	start := c.Now()
	tm := c.NewTimer(time.Minute)
	got := <-tm.C()
	if got.Sub(start) < time.Minute {
		t.Errorf("timer delivered %v, want at least %v", got, start.Add(time.Minute))
	}
	if tm.Stop() {
		t.Error("Stop after firing = true, want false")
	}
}

func TestScaledTimerStop(t *testing.T) {
	c := clock.Scaled(1)
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer = false, want true")
	}
	select {
	case v := <-tm.C():
		t.Fatalf("stopped timer fired with %v", v)
	default:
	}
}

func TestSleepHonoursContext(t *testing.T) {
	for _, c := range []clock.Clock{clock.Real(), clock.Scaled(2)} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := clock.Sleep(ctx, c, time.Hour); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep on a cancelled ctx = %v, want context.Canceled", err)
		}
	}
}

func TestScaledRejectsNonPositiveFactor(t *testing.T) {
	for _, f := range []float64{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Scaled(%v) did not panic", f)
				}
			}()
			clock.Scaled(f)
		}()
	}
}

// within fails the test if tm does not fire within a generous bound (a
// guard against hanging, not a timing assertion) and returns what it
// delivered.
func within(t *testing.T, tm clock.Timer, what string) time.Time {
	t.Helper()
	select {
	case v := <-tm.C():
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not fire", what)
		return time.Time{}
	}
}

func notFired(t *testing.T, tm clock.Timer, what string) {
	t.Helper()
	select {
	case v := <-tm.C():
		t.Fatalf("%s fired with %v, want it pending", what, v)
	default:
	}
}

func TestScaledAdvance(t *testing.T) {
	c := clock.Scaled(1) // real time: only Advance can fire an hour's timer
	before := c.Now()
	due := c.NewTimer(time.Hour)
	later := c.NewTimer(3 * time.Hour)
	stopped := c.NewTimer(time.Hour)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer = false, want true")
	}

	c.Advance(2 * time.Hour)
	if got := c.Now().Sub(before); got < 2*time.Hour {
		t.Errorf("Now moved %v across Advance(2h), want at least 2h", got)
	}
	if v := within(t, due, "the 1h timer after Advance(2h)"); v.Sub(before) < 2*time.Hour {
		t.Errorf("the 1h timer delivered %v, want the advanced time (at least %v)", v, before.Add(2*time.Hour))
	}
	if due.Stop() {
		t.Error("Stop after firing = true, want false")
	}
	notFired(t, later, "the 3h timer after Advance(2h)")
	notFired(t, stopped, "a stopped timer")

	// A pending timer is re-armed for what is left of it: 3h - 2h - (1h
	// - 30ms) leaves 30 ms of real time.
	c.Advance(time.Hour - 30*time.Millisecond)
	notFired(t, later, "the 3h timer 30 ms before its time")
	within(t, later, "the 3h timer after its remaining 30 ms")
	notFired(t, stopped, "a stopped timer")
}

func TestScaledAdvanceTo(t *testing.T) {
	c := clock.Scaled(1)
	target := c.Now().Add(30 * time.Minute)
	tm := c.NewTimer(30 * time.Minute)
	if d := c.AdvanceTo(target); d <= 0 || d > 30*time.Minute {
		t.Errorf("AdvanceTo(now+30m) = %v, want (0, 30m]", d)
	}
	if now := c.Now(); now.Before(target) || now.Sub(target) > time.Minute {
		t.Errorf("Now after AdvanceTo = %v, want %v or a moment later", now, target)
	}
	within(t, tm, "a 30m timer after AdvanceTo(now+30m)")
	if d := c.AdvanceTo(target.Add(-time.Minute)); d != 0 {
		t.Errorf("AdvanceTo(a past time) = %v, want 0", d)
	}
	c.Advance(-time.Hour)
	if now := c.Now(); now.Before(target) {
		t.Errorf("Advance(-1h) moved the clock back to %v", now)
	}
}

// TestScaledTimerNeverEarly checks that a timer delivers a time at or past
// its deadline, whatever the rounding of the conversion to wall time.
func TestScaledTimerNeverEarly(t *testing.T) {
	c := clock.Scaled(3)
	for i := range 20 {
		d := time.Duration(i+1) * 333333 * time.Nanosecond
		start := c.Now()
		if got := within(t, c.NewTimer(d), "a short timer"); got.Sub(start) < d {
			t.Fatalf("timer of %v delivered %v after its start", d, got.Sub(start))
		}
	}
}

// TestScaledSetFactor: a new speed re-arms the pending timers for what is
// left of them (an hour's timer at real speed fires within the guard once
// the clock runs a million times faster), keeps the time it shows, and is
// what Factor and Real report.
func TestScaledSetFactor(t *testing.T) {
	c := clock.Scaled(1)
	start := c.Now()
	tm := c.NewTimer(time.Hour)
	notFired(t, tm, "an hour's timer at real speed")
	before := c.Now()
	c.SetFactor(1e6) // an hour in 3.6 ms
	if after := c.Now(); after.Before(before) || after.Sub(before) > time.Hour {
		t.Errorf("Now went from %v to %v across SetFactor, want no jump", before, after)
	}
	if c.Factor() != 1e6 || c.Real(time.Hour) != 3600*time.Microsecond {
		t.Errorf("Factor %v, Real(1h) %v; want 1e6 and 3.6ms", c.Factor(), c.Real(time.Hour))
	}
	if v := within(t, tm, "an hour's timer after SetFactor(1e6)"); v.Sub(start) < time.Hour {
		t.Errorf("the timer delivered %v after its start, want at least 1h", v.Sub(start))
	}

	// Slowed down, a timer waits; Advance still fires it.
	c.SetFactor(1e-3)
	slow := c.NewTimer(time.Minute)
	notFired(t, slow, "a minute's timer at a thousandth of real speed")
	c.Advance(time.Minute)
	within(t, slow, "a minute's timer after Advance(1m)")

	for _, f := range []float64{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetFactor(%v) did not panic", f)
				}
			}()
			c.SetFactor(f)
		}()
	}
}

// TestScaledSetFactorNeverGoesBack reads the clock from several goroutines
// while its speed keeps changing: no reader ever sees it go backwards.
func TestScaledSetFactorNeverGoesBack(t *testing.T) {
	c := clock.Scaled(1000)
	done := make(chan struct{})
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			last := c.Now()
			for {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				if now := c.Now(); now.Before(last) {
					errs <- fmt.Sprintf("Now went back from %v to %v", last, now)
					return
				} else {
					last = now
				}
			}
		}()
	}
	for i := range 2000 {
		c.SetFactor([]float64{1000, 0.5, 60, 3}[i%4])
	}
	close(done)
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
