package orderstate_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate/orderstatetest"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
	"github.com/orderstatus/orderstatus/handler/internal/store/storetest"
)

// TestOrderState runs the backend-independent suite over the in-memory
// store (storetest runs it over Table Storage too).
func TestOrderState(t *testing.T) {
	orderstatetest.Run(t, func(*testing.T) store.Backend { return memstore.New() })
}

func upd(id string, status order.Status, seq int64) order.Update {
	return order.Update{OrderID: id, Status: status, Sequence: seq, OccurredAt: time.Date(2026, 11, 29, 10, 0, int(seq), 0, time.UTC)}
}

func mustApply(t *testing.T, svc *orderstate.Service, u order.Update) orderstate.Outcome {
	t.Helper()
	out, err := svc.Apply(t.Context(), u)
	if err != nil {
		t.Fatalf("Apply %s seq %d: %v", u.OrderID, u.Sequence, err)
	}
	return out
}

func TestCacheBound(t *testing.T) {
	svc := orderstate.New(memstore.New(), &orderstate.Options{CacheSize: 2})
	for _, id := range []string{"o-1", "o-2", "o-3"} { // o-1 is evicted
		mustApply(t, svc, upd(id, order.Created, 1))
		mustApply(t, svc, upd(id, order.Paid, 2))
	}
	tests := []struct {
		id        string
		wantTrips int
		wantHit   bool
	}{
		{"o-3", 0, true},
		{"o-2", 0, true},
		{"o-1", 1, false}, // read again; now o-3 is the least recently used
		{"o-3", 1, false},
	}
	for _, tt := range tests {
		got := mustApply(t, svc, upd(tt.id, order.Paid, 2))
		if got.Result != order.Duplicate || got.RoundTrips != tt.wantTrips || got.CacheHit != tt.wantHit {
			t.Errorf("duplicate on %s = %s, %d round trips, hit %t; want Duplicate, %d, %t",
				tt.id, got.Result, got.RoundTrips, got.CacheHit, tt.wantTrips, tt.wantHit)
		}
	}
}

func TestCacheDisabled(t *testing.T) {
	svc := orderstate.New(memstore.New(), &orderstate.Options{CacheSize: -1})
	mustApply(t, svc, upd("o-1", order.Created, 1))
	for seq := int64(2); seq <= 4; seq++ {
		got := mustApply(t, svc, upd("o-1", order.Paid, seq))
		if got.Result != order.Applied || got.RoundTrips != 2 || got.CacheHit {
			t.Errorf("seq %d = %s, %d round trips, hit %t; want Applied, 2 (read and write), false",
				seq, got.Result, got.RoundTrips, got.CacheHit)
		}
	}
}

// TestGetRefreshesCache checks that a GetOrder read lets the next message
// be written without a conflict even after another host moved the row.
func TestGetRefreshesCache(t *testing.T) {
	m := memstore.New()
	a, b := orderstate.New(m, nil), orderstate.New(m, nil)
	mustApply(t, a, upd("o-1", order.Created, 1))
	mustApply(t, b, upd("o-1", order.Paid, 2))
	row, err := a.Get(t.Context(), "o-1")
	if err != nil || row.State.LastSequence != 2 {
		t.Fatalf("Get = seq %d, %v; want seq 2", row.State.LastSequence, err)
	}
	got := mustApply(t, a, upd("o-1", order.Shipped, 3))
	if got.Result != order.Applied || got.RoundTrips != 1 || got.Conflicts != 0 {
		t.Errorf("Apply after Get = %s, %d round trips, %d conflicts; want Applied, 1, 0", got.Result, got.RoundTrips, got.Conflicts)
	}
	if _, err := a.Get(t.Context(), "o-missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
}

// swappable delegates to a backend that a test can replace, to simulate a
// row deleted behind the service's back.
type swappable struct {
	atomic.Pointer[memstore.Store]
}

func (s *swappable) Get(ctx context.Context, id string) (store.Row, error) {
	return s.Load().Get(ctx, id)
}

func (s *swappable) Insert(ctx context.Context, id string, st order.State) (store.ETag, error) {
	return s.Load().Insert(ctx, id, st)
}

func (s *swappable) Replace(ctx context.Context, id string, st order.State, etag store.ETag) (store.ETag, error) {
	return s.Load().Replace(ctx, id, st, etag)
}

func TestRowVanished(t *testing.T) {
	var b swappable
	b.Store(memstore.New())
	svc := orderstate.New(&b, nil)
	mustApply(t, svc, upd("o-1", order.Created, 1))
	b.Store(memstore.New()) // the row is gone
	got := mustApply(t, svc, upd("o-1", order.Paid, 2))
	// Replace (404), Get (404), Insert.
	if got.Result != order.Applied || got.RoundTrips != 3 || got.Gap != 1 {
		t.Errorf("Apply = %s, %d round trips, gap %d; want Applied, 3, gap 1", got.Result, got.RoundTrips, got.Gap)
	}
}

// scripted is a Backend whose answers a test chooses.
type scripted struct {
	get     func() (store.Row, error)
	insert  func() (store.ETag, error)
	replace func() (store.ETag, error)
}

var _ store.Backend = (*scripted)(nil)

func (s *scripted) Get(context.Context, string) (store.Row, error) { return s.get() }
func (s *scripted) Insert(context.Context, string, order.State) (store.ETag, error) {
	return s.insert()
}
func (s *scripted) Replace(context.Context, string, order.State, store.ETag) (store.ETag, error) {
	return s.replace()
}

func TestContention(t *testing.T) {
	const maxConflicts = 3
	created := store.Row{OrderID: "o-1", State: order.State{Status: order.Created, LastSequence: 1}, ETag: "e1"}
	alwaysLose := &scripted{
		get:     func() (store.Row, error) { return created, nil },
		replace: func() (store.ETag, error) { return "", fmt.Errorf("412: %w", store.ErrConflict) },
	}
	svc := orderstate.New(alwaysLose, &orderstate.Options{MaxConflicts: maxConflicts})
	tests := []struct {
		name string
		call func() (orderstate.Outcome, error)
	}{
		{"apply", func() (orderstate.Outcome, error) { return svc.Apply(t.Context(), upd("o-1", order.Paid, 2)) }},
		{"expire", func() (orderstate.Outcome, error) { return svc.ExpireIfUnpaid(t.Context(), "o-1", 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call()
			for _, want := range []error{orderstate.ErrContention, store.ErrConflict, store.ErrTransient} {
				if !errors.Is(err, want) {
					t.Errorf("error = %v, want it to match %v", err, want)
				}
			}
			// Each attempt reads and writes.
			if got.Conflicts != maxConflicts+1 || got.RoundTrips != 2*(maxConflicts+1) {
				t.Errorf("Outcome = %d conflicts, %d round trips; want %d, %d", got.Conflicts, got.RoundTrips, maxConflicts+1, 2*(maxConflicts+1))
			}
		})
	}
}

func TestErrors(t *testing.T) {
	forbidden := errors.New("HTTP 403")
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	paid, created := upd("o-1", order.Paid, 2), upd("o-1", order.Created, 1)
	tests := []struct {
		name          string
		ctx           context.Context
		backend       store.Backend
		u             order.Update
		want          error
		wantTransient bool
	}{
		{"read forbidden", t.Context(), &scripted{get: func() (store.Row, error) { return store.Row{}, forbidden }}, paid, forbidden, false},
		{"read transient", t.Context(), &scripted{get: func() (store.Row, error) { return store.Row{}, fmt.Errorf("503: %w", store.ErrTransient) }},
			paid, store.ErrTransient, true},
		{"insert forbidden", t.Context(), &scripted{
			get:    func() (store.Row, error) { return store.Row{}, store.ErrNotFound },
			insert: func() (store.ETag, error) { return "", forbidden },
		}, paid, forbidden, false},
		{"insert-first forbidden", t.Context(), &scripted{insert: func() (store.ETag, error) { return "", forbidden }},
			created, forbidden, false},
		{"insert-first transient", t.Context(), &scripted{insert: func() (store.ETag, error) { return "", fmt.Errorf("503: %w", store.ErrTransient) }},
			created, store.ErrTransient, true},
		{"context canceled", canceled, memstore.New(), created, context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := orderstate.New(tt.backend, nil)
			_, err := svc.Apply(tt.ctx, tt.u)
			if !errors.Is(err, tt.want) {
				t.Errorf("Apply error = %v, want %v", err, tt.want)
			}
			if got := errors.Is(err, store.ErrTransient); got != tt.wantTransient {
				t.Errorf("errors.Is(%v, ErrTransient) = %t, want %t", err, got, tt.wantTransient)
			}
		})
	}
}

// BenchmarkApply measures Apply over the in-memory store: each op is one
// applied message (orders of 10 messages each); roundtrips/applied counts
// storage calls per applied message, the first message of each order
// (read + insert) included.
func BenchmarkApply(b *testing.B) {
	counting := storetest.NewCounting(memstore.New())
	svc := orderstate.New(counting, nil)
	ctx := context.Background()
	const perOrder = 10
	applied := 0
	for i := 0; b.Loop(); i++ {
		out, err := svc.Apply(ctx, upd(fmt.Sprintf("o-%d", i/perOrder), order.Paid, int64(i%perOrder+1)))
		if err != nil {
			b.Fatal(err)
		}
		if out.Result == order.Applied {
			applied++
		}
	}
	b.ReportMetric(float64(counting.Total())/float64(applied), "roundtrips/applied")
}
