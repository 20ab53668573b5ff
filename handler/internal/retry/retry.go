// Package retry retries an operation with exponential backoff and jitter within
// a time budget; the caller decides which failures are transient.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy bounds the retries of one logical operation.
type Policy struct {
	// Budget: no attempt starts after it; keep it well below the message lock.
	Budget time.Duration
	// Initial (default 100 ms) grows by Multiplier (default 2) up to Max (default 2 s).
	Initial, Max time.Duration
	Multiplier   float64
}

func (p Policy) withDefaults() Policy {
	if p.Initial <= 0 {
		p.Initial = 100 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 2 * time.Second
	}
	if p.Multiplier < 1 {
		p.Multiplier = 2
	}
	return p
}

// Backoff returns the wait before retry attempt (1-based): half to all of the exponential value.
func (p Policy) Backoff(attempt int) time.Duration {
	p = p.withDefaults()
	d := float64(p.Initial)
	for i := 1; i < attempt && d < float64(p.Max); i++ {
		d *= p.Multiplier
	}
	d = min(d, float64(p.Max))
	half := d / 2
	return time.Duration(half + rand.Float64()*half)
}

// ErrBudgetExhausted is joined to the last error when the budget ran out.
var ErrBudgetExhausted = errors.New("retry: budget exhausted")

// Attempt describes a failed attempt that will be retried.
type Attempt struct {
	Number int           // 1 for the first attempt
	Err    error         // why it failed
	Wait   time.Duration // backoff before the next attempt
}

// Do calls op until it succeeds, fails with an error retryable rejects, or the next wait
// would pass p.Budget or ctx's deadline. ctx or stop ends a wait (op gets ctx only); onRetry,
// if set, is called before each. Giving up, it wraps the last error (not that of an attempt
// ctx cut short) and ErrBudgetExhausted or the context's cause.
func Do(ctx, stop context.Context, p Policy, retryable func(error) bool, op func(context.Context) error, onRetry func(Attempt)) error {
	p = p.withDefaults()
	deadline := time.Now().Add(p.Budget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var prev error // the last attempt's error that was retried
	for n := 1; ; n++ {
		err := op(ctx)
		if err != nil && prev != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return fmt.Errorf("%w (attempt %d cut short: %w)", prev, n, context.Cause(ctx))
		}
		if err == nil || !retryable(err) {
			return err
		}
		prev = err
		wait := p.Backoff(n)
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w (%w)", err, ErrBudgetExhausted)
		}
		if onRetry != nil {
			onRetry(Attempt{Number: n, Err: err, Wait: wait})
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		case <-stop.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, context.Cause(stop))
		}
	}
}

// Op is one try at an operation that yields a T.
type Op[T any] func(context.Context) (T, error)

// Wrap is Do as middleware around next; a ctx marked by Once gets one attempt.
func Wrap[T any](stop context.Context, p Policy, retryable func(error) bool, onRetry func(Attempt)) func(next Op[T]) Op[T] {
	return func(next Op[T]) Op[T] {
		return func(ctx context.Context) (T, error) {
			q := p
			if ctx.Value(onceKey{}) != nil {
				q.Budget = time.Nanosecond
			}
			var v T
			err := Do(ctx, stop, q, retryable, func(ctx context.Context) error {
				var err error
				v, err = next(ctx)
				return err
			}, onRetry)
			return v, err
		}
	}
}

type onceKey struct{}

// Once marks ctx so an op Wrap returned makes one attempt (a breaker's probe).
func Once(ctx context.Context) context.Context { return context.WithValue(ctx, onceKey{}, true) }
