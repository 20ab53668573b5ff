package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// RecoveryMarker is the recovery marker of a backend (see package store):
// a time that only moves later.
type RecoveryMarker interface {
	RecoveringUntil(ctx context.Context) (time.Time, error)
	RaiseRecovering(ctx context.Context, until time.Time) (time.Time, error)
}

// RunRecoveryMarker checks the recovery marker of the backends newBackend
// returns (empty ones). Each backend must be a Backend too: the marker
// shares the order table and must never be taken for an order.
func RunRecoveryMarker(t *testing.T, newBackend func(t *testing.T) Backend) {
	marker := func(t *testing.T) (Backend, RecoveryMarker) {
		b := newBackend(t)
		m, ok := b.(RecoveryMarker)
		if !ok {
			t.Fatalf("backend %T has no recovery marker (RecoveringUntil, RaiseRecovering)", b)
		}
		return b, m
	}
	t0 := at(0).Add(30 * time.Minute)

	t.Run("NoneYet", func(t *testing.T) {
		_, m := marker(t)
		got, err := m.RecoveringUntil(ctxFor(t))
		if err != nil || !got.IsZero() {
			t.Fatalf("RecoveringUntil on an empty table = %v, %v; want the zero time, nil", got, err)
		}
	})

	t.Run("RaiseMovesOnlyLater", func(t *testing.T) {
		ctx := ctxFor(t)
		_, m := marker(t)
		steps := []struct {
			name  string
			raise time.Time
			want  time.Time
		}{
			{"first", t0, t0},
			{"later", t0.Add(time.Minute), t0.Add(time.Minute)},
			{"earlier stays later", t0.Add(-time.Hour), t0.Add(time.Minute)},
			{"the same", t0.Add(time.Minute), t0.Add(time.Minute)},
			{"sub-millisecond rounds up", t0.Add(time.Minute + time.Microsecond), t0.Add(time.Minute + time.Millisecond)},
		}
		for _, st := range steps {
			got, err := m.RaiseRecovering(ctx, st.raise)
			if err != nil {
				t.Fatalf("%s: RaiseRecovering(%v): %v", st.name, st.raise, err)
			}
			if !got.Equal(st.want) {
				t.Errorf("%s: RaiseRecovering(%v) = %v, want %v", st.name, st.raise, got, st.want)
			}
			read, err := m.RecoveringUntil(ctx)
			if err != nil || !read.Equal(st.want) || read.Location() != time.UTC {
				t.Errorf("%s: RecoveringUntil = %v, %v; want %v in UTC", st.name, read, err, st.want)
			}
		}
	})

	t.Run("IsNoOrder", func(t *testing.T) {
		ctx := ctxFor(t)
		b, m := marker(t)
		if _, err := m.RaiseRecovering(ctx, t0); err != nil {
			t.Fatalf("RaiseRecovering: %v", err)
		}
		for _, id := range []string{store.RecoveryPartitionKey, store.RecoveryRowKey} {
			if _, err := b.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%.40q) after a raise: error = %v, want ErrNotFound (the marker is no order row)", id, err)
			}
		}
		// An order row next to it leaves it as it is.
		mustInsert(t, b, "o-1", state("Created", 1, 0))
		if got, err := m.RecoveringUntil(ctx); err != nil || !got.Equal(t0) {
			t.Errorf("RecoveringUntil after an order's insert = %v, %v; want %v", got, err, t0)
		}
	})

	t.Run("TwoWritersKeepTheLater", func(t *testing.T) {
		_, m := marker(t)
		RunRecoveryRace(t, m, m)
	})
}

// RunRecoveryRace races two writers of one recovery marker (two clients
// of one table, or one backend twice), each raising it to its own times in
// turn, while a reader watches through a: whatever the interleaving, no
// raise answers earlier than it asked, the reader never sees the marker
// move earlier, and the latest time asked for is what stays. The marker
// must be empty or earlier than the times asked for (from at(0) + 30 min
// on).
func RunRecoveryRace(t *testing.T, a, b RecoveryMarker) {
	ctx := ctxFor(t)
	t0 := at(0).Add(30 * time.Minute)
	const raises = 8
	writers := []RecoveryMarker{a, b}
	var wg sync.WaitGroup
	errs := make(chan error, len(writers)*raises+1)
	stop := make(chan struct{})
	var readerDone sync.WaitGroup
	readerDone.Add(1)
	go func() {
		defer readerDone.Done()
		var last time.Time
		for reads := 0; reads < 200; reads++ {
			select {
			case <-stop:
				return
			default:
			}
			got, err := a.RecoveringUntil(ctx)
			if err != nil {
				errs <- fmt.Errorf("RecoveringUntil: %w", err)
				return
			}
			if got.Before(last) {
				errs <- fmt.Errorf("the marker moved earlier: %v after %v", got, last)
				return
			}
			last = got
		}
	}()
	for w, m := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range raises {
				// Writer 0 asks for even minutes, upwards; writer 1 for
				// odd ones, downwards.
				k := i
				if w == 1 {
					k = raises - 1 - i
				}
				want := t0.Add(time.Duration(2*k+w) * time.Minute)
				got, err := m.RaiseRecovering(ctx, want)
				switch {
				case err != nil:
					errs <- fmt.Errorf("writer %d: RaiseRecovering(%v): %w", w, want, err)
					return
				case got.Before(want):
					errs <- fmt.Errorf("writer %d: RaiseRecovering(%v) = %v, earlier than asked", w, want, got)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readerDone.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	latest := t0.Add(time.Duration(2*(raises-1)+1) * time.Minute)
	for name, m := range map[string]RecoveryMarker{"a": a, "b": b} {
		if got, err := m.RecoveringUntil(ctx); err != nil || !got.Equal(latest) {
			t.Fatalf("RecoveringUntil through %s after the race = %v, %v; want the latest time asked for, %v", name, got, err, latest)
		}
	}
}
