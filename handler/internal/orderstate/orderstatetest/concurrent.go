package orderstatetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/storetest"
)

// RunConcurrentDelivery races two hosts (independent clients and caches of
// one storage) on one order: four copies of each of 30 sequences, locally
// shuffled. Each sequence is applied at most once, the last exactly once, and
// the writes form one ETag chain (checkChain) ending at the last sequence.
func RunConcurrentDelivery(t *testing.T, hostA, hostB store.Backend) {
	const (
		orderID = "o-race"
		n       = 30
		copies  = 4
		workers = 16
		window  = 8 // how far a delivery may move from its place in line
	)
	writes := &storetest.WriteLog{}
	hosts := []*orderstate.Service{
		orderstate.New(&storetest.Recording{Backend: hostA, Log: writes}, nil),
		orderstate.New(&storetest.Recording{Backend: hostB, Log: writes}, nil),
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("shuffle seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var deliveries []order.Update
	for seq := int64(1); seq <= n; seq++ {
		status := order.Paid
		switch {
		case seq == 1:
			status = order.Created
		case seq == n:
			status = order.Delivered
		case seq > n/2:
			status = order.Shipped
		}
		for range copies {
			deliveries = append(deliveries, order.Update{OrderID: orderID, Status: status, Sequence: seq, OccurredAt: at(int(seq))})
		}
	}
	for i := range deliveries {
		j := i + rng.IntN(min(window, len(deliveries)-i))
		deliveries[i], deliveries[j] = deliveries[j], deliveries[i]
	}

	type result struct {
		seq int64
		out orderstate.Outcome
	}
	ctx := ctxFor(t)
	var (
		wg      sync.WaitGroup
		next    = make(chan int)
		results = make(chan result, len(deliveries))
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				u := deliveries[i]
				if out, err := apply(ctx, hosts[i%len(hosts)], u); err != nil {
					t.Errorf("delivery %d (seq %d): %v", i, u.Sequence, err)
				} else {
					results <- result{u.Sequence, out}
				}
			}
		})
	}
	for i := range deliveries {
		next <- i
	}
	close(next)
	wg.Wait()
	close(results)

	applied := map[int64]int{}
	byResult := map[order.Result]int{}
	var trips, conflicts int
	for r := range results {
		byResult[r.out.Result]++
		trips += r.out.RoundTrips
		conflicts += r.out.Conflicts
		if r.out.Result == order.Applied {
			applied[r.seq]++
		}
		if r.out.Result == order.InvalidTransition {
			t.Errorf("seq %d: InvalidTransition (%v); a terminal status is only reached by the last sequence", r.seq, r.out.Poison)
		}
	}
	t.Logf("results %v, %d round trips, %d conflicts for %d deliveries", byResult, trips, conflicts, len(deliveries))
	for seq, count := range applied {
		if count > 1 {
			t.Errorf("seq %d applied %d times, want at most once", seq, count)
		}
	}
	if applied[n] != 1 {
		t.Errorf("last seq %d applied %d times, want exactly once", n, applied[n])
	}

	final := checkOrder(t, hostA, orderID, &rowWant{order.Delivered, n})
	checkChain(t, writes.Writes(), byResult[order.Applied], final.ETag)
}

// apply is a caller's Apply, retried on ErrTransient (contention) up to 50 times.
func apply(ctx context.Context, host *orderstate.Service, u order.Update) (orderstate.Outcome, error) {
	for attempt := 1; ; attempt++ {
		out, err := host.Apply(ctx, u)
		if err == nil || !errors.Is(err, store.ErrTransient) || attempt == 50 {
			return out, err
		}
	}
}

// checkChain verifies that the successful writes form one chain from the
// insert to the final version, each conditioned on its predecessor's ETag,
// with LastSequence strictly increasing: no write was lost, overwritten
// blindly, or moved the order backwards.
func checkChain(t *testing.T, writes []storetest.Write, appliedOutcomes int, finalETag store.ETag) {
	t.Helper()
	if len(writes) != appliedOutcomes {
		t.Errorf("%d successful writes, %d Applied outcomes; want one write per Applied", len(writes), appliedOutcomes)
	}
	var head *storetest.Write
	after := map[store.ETag]storetest.Write{} // IfMatch -> the write conditioned on it
	for i, w := range writes {
		if w.Op == storetest.OpInsert {
			if head != nil {
				t.Errorf("two successful inserts: %+v and %+v", *head, w)
			}
			head = &writes[i]
			continue
		}
		if prev, dup := after[w.IfMatch]; dup {
			t.Errorf("two writes succeeded on ETag %q: seq %d and seq %d", w.IfMatch, prev.State.LastSequence, w.State.LastSequence)
		}
		after[w.IfMatch] = w
	}
	if head == nil {
		t.Fatalf("no successful insert among %d writes", len(writes))
	}
	cur, visited := *head, 1
	for visited <= len(writes) {
		nxt, ok := after[cur.ETag]
		if !ok {
			break
		}
		if nxt.State.LastSequence <= cur.State.LastSequence {
			t.Errorf("write moved LastSequence from %d to %d", cur.State.LastSequence, nxt.State.LastSequence)
		}
		cur = nxt
		visited++
	}
	if visited != len(writes) {
		t.Errorf("chain from the insert covers %d of %d writes", visited, len(writes))
	}
	if cur.ETag != finalETag {
		t.Errorf("chain ends at ETag %q, stored row has %q", cur.ETag, finalETag)
	}
}

// RunLockstepDelivery delivers eight copies of each sequence at once across
// two hosts (a redelivery during a lock loss): exactly one Applied and seven
// Duplicate each, and the final row holds the last sequence.
func RunLockstepDelivery(t *testing.T, hostA, hostB store.Backend) {
	const (
		orderID = "o-lockstep"
		n       = 10
		copies  = 8
	)
	writes := &storetest.WriteLog{}
	hosts := []*orderstate.Service{
		orderstate.New(&storetest.Recording{Backend: hostA, Log: writes}, nil),
		orderstate.New(&storetest.Recording{Backend: hostB, Log: writes}, nil),
	}
	ctx := ctxFor(t)
	appliedTotal := 0
	for seq := int64(1); seq <= n; seq++ {
		status := order.Paid
		if seq == 1 {
			status = order.Created
		}
		u := order.Update{OrderID: orderID, Status: status, Sequence: seq, OccurredAt: at(int(seq))}
		results := make(chan order.Result, copies)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range copies {
			wg.Go(func() {
				<-start
				if out, err := apply(ctx, hosts[i%len(hosts)], u); err != nil {
					t.Errorf("seq %d copy %d: %v", seq, i, err)
				} else {
					results <- out.Result
				}
			})
		}
		close(start)
		wg.Wait()
		close(results)
		got := map[order.Result]int{}
		for r := range results {
			got[r]++
		}
		if got[order.Applied] != 1 || got[order.Duplicate] != copies-1 {
			t.Errorf("seq %d: results %v, want exactly 1 Applied and %d Duplicate", seq, got, copies-1)
		}
		appliedTotal += got[order.Applied]
	}
	final := checkOrder(t, hostA, orderID, &rowWant{order.Paid, n})
	checkChain(t, writes.Writes(), appliedTotal, final.ETag)
}
