package orderstate_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
)

// delivery is one message handed to one instance under one session lock.
type delivery struct {
	order    string
	seq      int64
	instance int
	lock     orderstate.Lock
}

// placement is how sessions land on instances: it returns the deliveries
// of orders orders of four events each (Created, Paid, Shipped,
// Delivered), interleaved across orders, in sequence within each.
type placement struct {
	name      string
	instances int
	// sameLock: all of an order's events come in one session hold (a
	// backlog drained at once); otherwise each event is a new pick-up.
	sameLock bool
}

func (p placement) deliveries(orders int, rng *rand.Rand) []delivery {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	locks := 0
	newLock := func() orderstate.Lock {
		locks++
		return orderstate.Lock{Until: base.Add(time.Duration(locks) * time.Millisecond)}
	}
	home := make([]int, orders)
	held := make([]orderstate.Lock, orders)
	for i := range home {
		home[i] = rng.IntN(p.instances)
		held[i] = newLock()
	}
	var out []delivery
	for seq := int64(1); seq <= 4; seq++ {
		for _, i := range rng.Perm(orders) {
			d := delivery{order: fmt.Sprintf("o-%d", i), seq: seq, instance: home[i], lock: held[i]}
			if !p.sameLock {
				d.instance, d.lock = rng.IntN(p.instances), newLock()
			}
			out = append(out, d)
		}
	}
	return out
}

// cost is what one policy paid for one placement.
type cost struct {
	applied, roundTrips, conflicts, staleConflicts int
}

func (c cost) perApplied() float64 { return float64(c.roundTrips) / float64(c.applied) }
func (c cost) stalePerApplied() float64 {
	return 2 * float64(c.staleConflicts) / float64(c.applied)
}

func run(t *testing.T, p placement) cost {
	t.Helper()
	backend := memstore.New()
	services := make([]*orderstate.Service, p.instances)
	for i := range services {
		services[i] = orderstate.New(backend, nil)
	}
	statuses := []order.Status{order.Created, order.Paid, order.Shipped, order.Delivered}
	var c cost
	for _, d := range p.deliveries(2000, rand.New(rand.NewPCG(7, 12))) {
		u := upd(d.order, statuses[d.seq-1], d.seq)
		out, err := services[d.instance].ApplyUnder(t.Context(), u, d.lock)
		if err != nil {
			t.Fatalf("%s: apply %s seq %d: %v", p.name, d.order, d.seq, err)
		}
		if out.Result != order.Applied {
			t.Fatalf("%s: %s seq %d: %s, want Applied", p.name, d.order, d.seq, out.Result)
		}
		c.applied++
		c.roundTrips += out.RoundTrips
		c.conflicts += out.Conflicts
		if out.CacheHit {
			c.staleConflicts += out.Conflicts
		}
	}
	return c
}

// TestCacheTrustCost measures, with the in-memory store, the storage round
// trips per applied message and the ETag conflicts of the cache's bets
// when sessions land on instances as Flex Consumption spreads them, and
// prints the table (go test -v -run TestCacheTrustCost). Counts, not
// timings: the same seed gives the same figures. With one instance, or
// every order drained in one hold, no bet is lost; elsewhere the bets never
// cost more than reading first would (an insert, then a read and a write
// for each later event).
func TestCacheTrustCost(t *testing.T) {
	placements := []placement{
		{name: "1 instance, each event a new pick-up", instances: 1},
		{name: "4 instances, each order drained in one hold", instances: 4, sameLock: true},
		{name: "4 instances, each event a new pick-up", instances: 4},
		{name: "2 instances, each event a new pick-up", instances: 2},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-46s %8s %10s %12s\n", "placement", "rt/appl", "conf/1000", "stale rt/ap")
	for _, p := range placements {
		c := run(t, p)
		fmt.Fprintf(&table, "%-46s %8.3f %10.1f %12.3f\n", p.name, c.perApplied(),
			1000*float64(c.conflicts)/float64(c.applied), c.stalePerApplied())
		orders := c.applied / 4
		if readFirst := orders + 2*(c.applied-orders); c.roundTrips > readFirst {
			t.Errorf("%s: %d round trips, more than reading first (%d)", p.name, c.roundTrips, readFirst)
		}
		if (p.instances == 1 || p.sameLock) && c.conflicts != 0 {
			t.Errorf("%s: %d conflicts, want 0", p.name, c.conflicts)
		}
	}
	t.Logf("stale caches, 2000 orders of 4 events:\n%s", table.String())
}

// TestCacheTrustAcrossLocks: instance A caches an order, B advances it
// under another lock, and A gets the next event under a third lock. A
// settles from the cache within its own lock; across locks, with no bet
// lost yet, it bets on the stale ETag (a conflict, then a reread).
func TestCacheTrustAcrossLocks(t *testing.T) {
	lock := func(n int) orderstate.Lock {
		return orderstate.Lock{Until: time.Date(2026, 11, 29, 10, 0, n, 0, time.UTC)}
	}
	tests := []struct{ wantTrips, wantConflicts int }{{3, 1}}
	for _, tt := range tests {
		t.Run("no bet lost yet", func(t *testing.T) {
			backend := memstore.New()
			a := orderstate.New(backend, nil)
			b := orderstate.New(backend, nil)
			apply := func(svc *orderstate.Service, st order.Status, seq int64, l orderstate.Lock) orderstate.Outcome {
				out, err := svc.ApplyUnder(t.Context(), upd("o-1", st, seq), l)
				if err != nil || out.Result != order.Applied {
					t.Fatalf("seq %d: %v %v, want Applied", seq, out.Result, err)
				}
				return out
			}
			apply(a, order.Created, 1, lock(1))
			if out := apply(a, order.Paid, 2, lock(1)); out.RoundTrips != 1 {
				t.Errorf("within the lock: %d round trips, want 1", out.RoundTrips)
			}
			apply(b, order.Shipped, 3, lock(2))
			out := apply(a, order.Delivered, 4, lock(3))
			if out.RoundTrips != tt.wantTrips || out.Conflicts != tt.wantConflicts || !out.CacheHit {
				t.Errorf("across locks: %d round trips, %d conflicts, hit %v; want %d, %d, true",
					out.RoundTrips, out.Conflicts, out.CacheHit, tt.wantTrips, tt.wantConflicts)
			}
		})
	}
}

// TestCacheTrustAdaptiveStopsBetting: after a run of lost bets across
// locks, ApplyUnder reads first (two round trips, no conflict), except
// for one bet in 16 that checks whether betting pays again.
func TestCacheTrustAdaptiveStopsBetting(t *testing.T) {
	backend := memstore.New()
	a := orderstate.New(backend, nil)
	b := orderstate.New(backend, nil)
	lock := 0
	next := func() orderstate.Lock {
		lock++
		return orderstate.Lock{Until: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(lock) * time.Second)}
	}
	bets := 0
	for i := range 80 {
		id := fmt.Sprintf("o-%d", i)
		for _, step := range []struct {
			svc *orderstate.Service
			st  order.Status
			seq int64
		}{{a, order.Created, 1}, {b, order.Paid, 2}, {a, order.Shipped, 3}} {
			out, err := step.svc.ApplyUnder(t.Context(), upd(id, step.st, step.seq), next())
			if err != nil || out.Result != order.Applied {
				t.Fatalf("%s seq %d: %v %v", id, step.seq, out.Result, err)
			}
			if step.seq == 3 && out.Conflicts > 0 {
				bets++
			}
		}
	}
	// Every bet loses here; the rate passes one half after 22 losses, and
	// then one bet in 16 is made.
	if bets < 22 || bets > 22+(80-22)/16+1 {
		t.Errorf("lost bets = %d of 80, want 22 and then about one in 16", bets)
	}
}
