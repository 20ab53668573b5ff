// Package storetest is the conformance suite every order-row backend
// (store.Backend) must pass, the in-memory one and Table Storage (on Azurite)
// alike: conditional insert and replace, ETags, the sentinels. It also
// provides backend wrappers that count round trips and inject faults. It
// imports the port only; the orderstate rules' suite is orderstatetest.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// ctxFor returns a context bounded well below the test timeout.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// at returns a UTC time at millisecond precision, which every backend keeps.
func at(sec int) time.Time {
	return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(sec)*time.Second + 123*time.Millisecond)
}

func state(status order.Status, seq int64, sec int) order.State {
	return order.State{Status: status, LastSequence: seq, OccurredAt: at(sec), UpdatedAt: at(sec + 1)}
}

// Run runs the suite. newBackend returns an empty backend (for a real
// service: a fresh table) and may call t.Skip or t.Fatal.
func Run(t *testing.T, newBackend func(t *testing.T) store.Backend) {
	t.Run("GetMissing", func(t *testing.T) {
		ctx, b := ctxFor(t), newBackend(t)
		_, err := b.Get(ctx, "o-missing")
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
		}
	})

	t.Run("InsertGetRoundTrip", func(t *testing.T) {
		berlin := time.FixedZone("CET", 3600)
		tests := []struct {
			name string
			in   order.State
		}{
			{"created", state(order.Created, 1, 0)},
			{"int64 sequence", state(order.Paid, 1<<40+7, 10)},
			{"non-UTC input", order.State{Status: order.Shipped, LastSequence: 3,
				OccurredAt: at(20).In(berlin), UpdatedAt: at(21).In(berlin)}},
			{"sub-millisecond input", order.State{Status: order.Delivered, LastSequence: 4,
				OccurredAt: at(30).Add(456789 * time.Nanosecond), UpdatedAt: at(31).Add(999999 * time.Nanosecond)}},
			{"zero times", order.State{Status: order.Cancelled, LastSequence: 5}},
		}
		ctx, b := ctxFor(t), newBackend(t)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id := fmt.Sprintf("o-rt-%d", i)
				etag, err := b.Insert(ctx, id, tt.in)
				if err != nil {
					t.Fatalf("Insert: %v", err)
				}
				if etag == "" {
					t.Fatalf("Insert returned an empty ETag")
				}
				got, err := b.Get(ctx, id)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if got.OrderID != id || got.ETag != etag {
					t.Errorf("Get = id %q etag %q, want id %q etag %q (from Insert)", got.OrderID, got.ETag, id, etag)
				}
				checkState(t, got.State, tt.in)
			})
		}
	})

	t.Run("KeyCharacters", func(t *testing.T) {
		// Order ids legal under order.ValidateID that need escaping in a
		// URL or an OData key literal.
		ids := []string{"o'1", "o''2", "o 3", "o%204", "o+5", "o&6=7", "o-ü-8", "o:9;", "o@10", "o\"11", "O-12"}
		ctx, b := ctxFor(t), newBackend(t)
		for _, id := range ids {
			t.Run(id, func(t *testing.T) {
				if err := order.ValidateID(id); err != nil {
					t.Fatalf("test id %q is not a legal order id: %v", id, err)
				}
				etag := mustInsert(t, b, id, state(order.Created, 1, 0))
				checkRow(t, b, id, state(order.Created, 1, 0), etag)
				if _, err := b.Insert(ctx, id, state(order.Created, 1, 0)); !errors.Is(err, store.ErrConflict) {
					t.Errorf("second Insert(%q) error = %v, want ErrConflict", id, err)
				}
				etag2, err := b.Replace(ctx, id, state(order.Paid, 2, 5), etag)
				if err != nil {
					t.Fatalf("Replace(%q): %v", id, err)
				}
				checkRow(t, b, id, state(order.Paid, 2, 5), etag2)
			})
		}
		if _, err := b.Get(ctx, "o1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(o1) error = %v, want ErrNotFound (no key was mangled into another)", err)
		}
	})

	t.Run("InsertExisting", func(t *testing.T) {
		ctx, b := ctxFor(t), newBackend(t)
		first := state(order.Created, 1, 0)
		etag := mustInsert(t, b, "o-1", first)
		_, err := b.Insert(ctx, "o-1", state(order.Paid, 2, 5))
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second Insert error = %v, want ErrConflict", err)
		}
		checkRow(t, b, "o-1", first, etag)
	})

	t.Run("ReplaceMatchingETag", func(t *testing.T) {
		ctx, b := ctxFor(t), newBackend(t)
		etag := mustInsert(t, b, "o-1", state(order.Created, 1, 0))
		next := state(order.Paid, 2, 5)
		etag2, err := b.Replace(ctx, "o-1", next, etag)
		if err != nil {
			t.Fatalf("Replace: %v", err)
		}
		if etag2 == "" || etag2 == etag {
			t.Fatalf("Replace ETag = %q, want a new non-empty ETag (old %q)", etag2, etag)
		}
		checkRow(t, b, "o-1", next, etag2)
	})

	t.Run("ReplaceStaleETag", func(t *testing.T) {
		ctx, b := ctxFor(t), newBackend(t)
		etag1 := mustInsert(t, b, "o-1", state(order.Created, 1, 0))
		paid := state(order.Paid, 2, 5)
		etag2, err := b.Replace(ctx, "o-1", paid, etag1)
		if err != nil {
			t.Fatalf("Replace: %v", err)
		}
		_, err = b.Replace(ctx, "o-1", state(order.Shipped, 3, 9), etag1)
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("Replace(stale ETag) error = %v, want ErrConflict", err)
		}
		checkRow(t, b, "o-1", paid, etag2)
	})

	t.Run("ReplaceMissing", func(t *testing.T) {
		ctx, b := ctxFor(t), newBackend(t)
		etag := mustInsert(t, b, "o-other", state(order.Created, 1, 0))
		_, err := b.Replace(ctx, "o-missing", state(order.Paid, 2, 5), etag)
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Replace(missing row) error = %v, want ErrNotFound", err)
		}
		if _, err := b.Get(ctx, "o-missing"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get after Replace(missing) error = %v, want ErrNotFound (no row created)", err)
		}
	})

	t.Run("ReplaceUnconditionalRefused", func(t *testing.T) {
		for _, etag := range []store.ETag{"", "*"} {
			t.Run(fmt.Sprintf("etag %q", etag), func(t *testing.T) {
				ctx, b := ctxFor(t), newBackend(t)
				first := state(order.Created, 1, 0)
				cur := mustInsert(t, b, "o-1", first)
				_, err := b.Replace(ctx, "o-1", state(order.Paid, 2, 5), etag)
				if err == nil {
					t.Fatalf("Replace with ETag %q succeeded, want an error", etag)
				}
				if errors.Is(err, store.ErrTransient) {
					t.Errorf("Replace with ETag %q error = %v, want a non-transient error", etag, err)
				}
				checkRow(t, b, "o-1", first, cur)
			})
		}
	})

	t.Run("ConcurrentReplaceSameETag", func(t *testing.T) {
		const writers = 8
		ctx, b := ctxFor(t), newBackend(t)
		etag := mustInsert(t, b, "o-1", state(order.Created, 1, 0))
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []int
			etags   = map[int]store.ETag{}
		)
		for i := range writers {
			wg.Go(func() {
				got, err := b.Replace(ctx, "o-1", state(order.Paid, int64(10+i), i), etag)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, i)
					etags[i] = got
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("writer %d: Replace error = %v, want nil or ErrConflict", i, err)
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%d writers won with the same ETag (%v), want exactly 1", len(winners), winners)
		}
		w := winners[0]
		checkRow(t, b, "o-1", state(order.Paid, int64(10+w), w), etags[w])
	})
}

func mustInsert(t *testing.T, b store.Backend, id string, s order.State) store.ETag {
	t.Helper()
	etag, err := b.Insert(ctxFor(t), id, s)
	if err != nil {
		t.Fatalf("Insert %s: %v", id, err)
	}
	return etag
}

// checkRow reads id and compares it with want and wantETag.
func checkRow(t *testing.T, b store.Backend, id string, want order.State, wantETag store.ETag) {
	t.Helper()
	got, err := b.Get(ctxFor(t), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	if got.ETag != wantETag {
		t.Errorf("Get %s ETag = %q, want %q", id, got.ETag, wantETag)
	}
	checkState(t, got.State, want)
}

// checkState compares states: times in UTC and equal to the millisecond
// (Table Storage keeps 100 ns, Azurite milliseconds).
func checkState(t *testing.T, got, want order.State) {
	t.Helper()
	if got.Status != want.Status || got.LastSequence != want.LastSequence {
		t.Errorf("state = %s seq %d, want %s seq %d", got.Status, got.LastSequence, want.Status, want.LastSequence)
	}
	for _, tm := range []struct {
		name      string
		got, want time.Time
	}{{"OccurredAt", got.OccurredAt, want.OccurredAt}, {"UpdatedAt", got.UpdatedAt, want.UpdatedAt}} {
		if !tm.got.IsZero() && tm.got.Location() != time.UTC {
			t.Errorf("%s location = %v, want UTC", tm.name, tm.got.Location())
		}
		if !tm.got.Truncate(time.Millisecond).Equal(tm.want.Truncate(time.Millisecond)) {
			t.Errorf("%s = %v, want %v (to the millisecond)", tm.name, tm.got, tm.want)
		}
	}
}
