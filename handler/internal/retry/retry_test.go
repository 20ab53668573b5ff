package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var errTransient = errors.New("transient")

func isTransient(err error) bool { return errors.Is(err, errTransient) }

func TestDo(t *testing.T) {
	permanent := errors.New("permanent")
	fast := Policy{Budget: time.Second, Initial: time.Millisecond, Max: 2 * time.Millisecond}
	tests := []struct {
		name      string
		results   []error // what each attempt returns; the last repeats
		policy    Policy
		wantCalls int
		wantErr   []error // errors.Is targets; nil means success
	}{
		{"first try", []error{nil}, fast, 1, nil},
		{"transient then ok", []error{errTransient, errTransient, nil}, fast, 3, nil},
		{"permanent stops at once", []error{permanent}, fast, 1, []error{permanent}},
		{"transient then permanent", []error{errTransient, permanent}, fast, 2, []error{permanent}},
		{"budget smaller than first wait", []error{errTransient}, Policy{Budget: time.Millisecond, Initial: 50 * time.Millisecond}, 1,
			[]error{errTransient, ErrBudgetExhausted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, retries := 0, 0
			err := Do(context.Background(), context.Background(), tt.policy, isTransient, func(context.Context) error {
				r := tt.results[min(calls, len(tt.results)-1)]
				calls++
				return r
			}, func(Attempt) { retries++ })
			if calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if tt.wantErr == nil && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			for _, target := range tt.wantErr {
				if !errors.Is(err, target) {
					t.Errorf("err = %v, want it to wrap %v", err, target)
				}
			}
			if tt.wantErr == nil && retries != calls-1 {
				t.Errorf("onRetry called %d times, want %d", retries, calls-1)
			}
		})
	}
}

func TestDoGivesUpWithinBudget(t *testing.T) {
	p := Policy{Budget: 30 * time.Millisecond, Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond}
	calls := 0
	err := Do(context.Background(), context.Background(), p, isTransient, func(context.Context) error { calls++; return errTransient }, nil)
	if !errors.Is(err, ErrBudgetExhausted) || !errors.Is(err, errTransient) {
		t.Fatalf("err = %v, want budget exhausted wrapping the transient error", err)
	}
	// Waits are at least half of 5, 10, 10... ms: at most ~12 attempts fit.
	if calls < 2 || calls > 13 {
		t.Errorf("calls = %d, want between 2 and 13 within a 30 ms budget", calls)
	}
}

func TestDoStopEndsWaitButNotAttempt(t *testing.T) {
	stop, cancel := context.WithCancel(context.Background())
	p := Policy{Budget: time.Minute, Initial: time.Minute, Max: time.Minute}
	var opCtxErr error
	err := Do(context.Background(), stop, p, isTransient, func(ctx context.Context) error {
		cancel() // shutdown begins during the attempt
		opCtxErr = ctx.Err()
		return errTransient
	}, nil)
	if opCtxErr != nil {
		t.Errorf("attempt context was cancelled by stop: %v", opCtxErr)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errTransient) {
		t.Errorf("err = %v, want context.Canceled joined with the last error", err)
	}
}

func TestBackoffGrowsAndCaps(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	for attempt, wantMax := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 10: time.Second} {
		for range 20 {
			got := p.Backoff(attempt)
			if got < wantMax/2 || got > wantMax {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", attempt, got, wantMax/2, wantMax)
			}
		}
	}
}

func TestDoHonoursTheContextDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	p := Policy{Budget: time.Hour, Initial: 50 * time.Millisecond, Max: 50 * time.Millisecond}
	calls := 0
	err := Do(ctx, context.Background(), p, isTransient, func(context.Context) error { calls++; return errTransient }, nil)
	if calls != 1 || !errors.Is(err, ErrBudgetExhausted) {
		t.Errorf("calls %d err %v, want 1 call then ErrBudgetExhausted: the next wait passes the context deadline", calls, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans lines: %q", err)
	}
}

// TestDoKeepsTheCauseWhenTheDeadlineCutsAnAttempt: the attempts fail with
// a transient error until the call's context ends during one; that one
// reports only the context's error, so the result must lead with the
// transient error before it.
func TestDoKeepsTheCauseWhenTheDeadlineCutsAnAttempt(t *testing.T) {
	refused := fmt.Errorf("store: apply o-1 seq 2: dial tcp 127.0.0.1:1: connect: connection refused: %w", errTransient)
	for _, tt := range []struct {
		name  string
		cause error
	}{{"deadline", context.DeadlineExceeded}, {"cancelled", context.Canceled}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			p := Policy{Budget: time.Minute, Initial: time.Millisecond, Max: time.Millisecond}
			calls := 0
			err := Do(ctx, context.Background(), p, isTransient, func(ctx context.Context) error {
				calls++
				if calls < 3 {
					return refused
				}
				cancel(tt.cause) // the call's deadline ends during attempt 3
				return fmt.Errorf("store: apply o-1 seq 2: %w (%w)", ctx.Err(), ctx.Err())
			}, nil)
			if calls != 3 {
				t.Fatalf("calls = %d, want 3", calls)
			}
			want := refused.Error() + " (attempt 3 cut short: " + tt.cause.Error() + ")"
			if err == nil || err.Error() != want {
				t.Errorf("err = %v\nwant %s", err, want)
			}
			if !errors.Is(err, errTransient) || !errors.Is(err, tt.cause) {
				t.Errorf("err = %v: errors.Is must find both the transient sentinel and %v", err, tt.cause)
			}
		})
	}
}

// TestDoFirstAttemptCutShortIsReturnedAsIs: with no earlier cause, the
// context's error is the cause.
func TestDoFirstAttemptCutShortIsReturnedAsIs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	want := fmt.Errorf("store: apply o-1 seq 2: %w", context.Canceled)
	err := Do(ctx, context.Background(), Policy{Budget: time.Minute}, isTransient, func(context.Context) error {
		cancel()
		return want
	}, nil)
	if err != want {
		t.Errorf("err = %v, want %v unchanged", err, want)
	}
}

func TestWrap(t *testing.T) {
	fail := errors.New("blip")
	retryable := func(err error) bool { return errors.Is(err, fail) }
	p := Policy{Budget: time.Second, Initial: time.Millisecond, Max: time.Millisecond}
	tests := []struct {
		name      string
		once      bool
		failFirst int // attempts that fail before one succeeds
		wantCalls int
		wantErr   bool
	}{
		{"succeeds at once", false, 0, 1, false},
		{"retries a transient failure", false, 2, 3, false},
		{"once: a single attempt", true, 2, 1, true},
		{"once: a success is a success", true, 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, retries := 0, 0
			op := Wrap[int](context.Background(), p, retryable, func(Attempt) { retries++ })(func(context.Context) (int, error) {
				calls++
				if calls <= tt.failFirst {
					return 0, fail
				}
				return 42, nil
			})
			ctx := context.Background()
			if tt.once {
				ctx = Once(ctx)
			}
			v, err := op(ctx)
			if calls != tt.wantCalls || (err != nil) != tt.wantErr || retries != calls-1 {
				t.Fatalf("calls %d retries %d err %v; want %d calls, err %v", calls, retries, err, tt.wantCalls, tt.wantErr)
			}
			if err == nil && v != 42 {
				t.Errorf("value %d, want 42", v)
			}
		})
	}
}
