package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"orderstatus/handler/internal/clock"
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
