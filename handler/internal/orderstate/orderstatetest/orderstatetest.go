// Package orderstatetest is the orderstate rules' suite over any order-row
// backend (store.Backend): the apply matrix, round trips, stale caches, lost
// answers, and two hosts delivering one order at once. memstore and
// tablestore (on Azurite) run it; it builds on the port's own suite,
// storetest, for the wrappers that count calls and inject faults.
package orderstatetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/storetest"
)

// ctxFor is the test's context with a deadline for one storage call.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// at returns a UTC time at millisecond precision, which every backend keeps.
func at(sec int) time.Time {
	return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(sec)*time.Second + 123*time.Millisecond)
}

// step is one message: an OrderStatusChanged update, or a
// PaymentTimeoutCheck when expire is set (of the Created with sequence
// created; 0 is the older form, which names none).
type step struct {
	expire  bool
	created int64
	status  order.Status
	seq     int64
	late    bool // occurred an hour after the usual time: past a payment deadline
}

func upd(status order.Status, seq int64) step { return step{status: status, seq: seq} }

// updLate is upd occurred an hour later, past the default payment deadline.
func updLate(status order.Status, seq int64) step { return step{status: status, seq: seq, late: true} }

var expire = step{expire: true}

// expireOf is the check of the Created with sequence created.
func expireOf(created int64) step { return step{expire: true, created: created} }

func (s step) String() string {
	if s.expire {
		return fmt.Sprintf("expire#%d", s.created)
	}
	return fmt.Sprintf("%s#%d", s.status, s.seq)
}

// rowWant is the expected stored row; nil means no row.
type rowWant struct {
	status order.Status
	seq    int64
}

// clock returns a Now function that advances one second per call, so that
// every write has a distinct UpdatedAt.
func clock() func() time.Time {
	var n atomic.Int64
	return func() time.Time { return at(int(n.Add(1)) * 60) }
}

func newService(b store.Backend) *orderstate.Service {
	return orderstate.New(b, &orderstate.Options{Now: clock()})
}

func do(t *testing.T, svc *orderstate.Service, orderID string, s step) (orderstate.Outcome, error) {
	t.Helper()
	if s.expire {
		return svc.ExpireIfUnpaid(ctxFor(t), orderID, s.created)
	}
	occurred := at(int(s.seq))
	if s.late {
		occurred = occurred.Add(time.Hour)
	}
	return svc.Apply(ctxFor(t), order.Update{OrderID: orderID, Status: s.status, Sequence: s.seq, OccurredAt: occurred})
}

func mustDo(t *testing.T, svc *orderstate.Service, orderID string, steps ...step) {
	t.Helper()
	for _, s := range steps {
		if _, err := do(t, svc, orderID, s); err != nil {
			t.Fatalf("%s on %s: %v", s, orderID, err)
		}
	}
}

func checkOrder(t *testing.T, b store.Backend, orderID string, want *rowWant) store.Row {
	t.Helper()
	row, err := b.Get(ctxFor(t), orderID)
	switch {
	case want == nil && errors.Is(err, store.ErrNotFound):
		return store.Row{}
	case want == nil:
		t.Fatalf("Get %s = %s seq %d, %v; want no row", orderID, row.State.Status, row.State.LastSequence, err)
	case err != nil:
		t.Fatalf("Get %s: %v", orderID, err)
	case row.State.Status != want.status || row.State.LastSequence != want.seq:
		t.Errorf("row %s = %s seq %d, want %s seq %d", orderID, row.State.Status, row.State.LastSequence, want.status, want.seq)
	}
	return row
}

// Run checks orderstate.Service over the backends newBackend returns.
func Run(t *testing.T, newBackend func(t *testing.T) store.Backend) {
	t.Run("ApplyMatrix", func(t *testing.T) { testApplyMatrix(t, newBackend(t)) })
	t.Run("RoundTrips", func(t *testing.T) { testRoundTrips(t, newBackend(t)) })
	t.Run("StaleCache", func(t *testing.T) { testStaleCache(t, newBackend(t)) })
	t.Run("LostAnswer", func(t *testing.T) { testLostAnswer(t, newBackend(t)) })
	t.Run("InsertFirst", func(t *testing.T) { testInsertFirst(t, newBackend(t)) })
	t.Run("Deadline", func(t *testing.T) { testDeadline(t, newBackend(t)) })
}

// testDeadline: a timeout's cancellation stores its deadline (Created's
// occurredAt plus the payment timeout), read back by a fresh service; the
// change that supersedes the cancellation clears it.
func testDeadline(t *testing.T, b store.Backend) {
	svc := orderstate.New(b, &orderstate.Options{Now: clock(), PaymentTimeout: 20 * time.Second})
	mustDo(t, svc, "o-deadline", upd(order.Created, 1), expire)
	row, err := b.Get(ctxFor(t), "o-deadline")
	want := at(1).Add(20 * time.Second)
	if err != nil || row.State.Status != order.Cancelled || !row.State.Deadline.Equal(want) || !row.State.TimedOut() {
		t.Fatalf("after the timeout: %+v, %v; want Cancelled with the deadline %s", row.State, err, want)
	}
	cold := orderstate.New(b, &orderstate.Options{Now: clock(), PaymentTimeout: 20 * time.Second})
	if out, err := cold.Apply(ctxFor(t), order.Update{OrderID: "o-deadline", Status: order.Paid, Sequence: 2, OccurredAt: want}); err != nil || out.Result != order.Applied {
		t.Fatalf("a Paid at the deadline: %+v, %v; want Applied", out, err)
	}
	if row, err := b.Get(ctxFor(t), "o-deadline"); err != nil || row.State.Status != order.Paid || !row.State.Deadline.IsZero() {
		t.Errorf("after the Paid: %+v, %v; want Paid with no deadline", row.State, err)
	}
}

func testApplyMatrix(t *testing.T, b store.Backend) {
	delivered := []step{upd(order.Created, 1), upd(order.Paid, 2), upd(order.Shipped, 3), upd(order.Delivered, 4)}
	tests := []struct {
		name       string
		before     []step
		do         step
		want       order.Result
		wantGap    int64
		wantRow    *rowWant
		wantReason string
	}{
		{name: "new order", do: upd(order.Created, 1), want: order.Applied, wantRow: &rowWant{order.Created, 1}},
		{name: "next sequence", before: []step{upd(order.Created, 1)}, do: upd(order.Paid, 2),
			want: order.Applied, wantRow: &rowWant{order.Paid, 2}},
		{name: "duplicate", before: []step{upd(order.Created, 1), upd(order.Paid, 2)}, do: upd(order.Paid, 2),
			want: order.Duplicate, wantRow: &rowWant{order.Paid, 2}},
		{name: "stale", before: []step{upd(order.Created, 1), upd(order.Paid, 2)}, do: upd(order.Created, 1),
			want: order.Stale, wantRow: &rowWant{order.Paid, 2}},
		{name: "gap counted", before: []step{upd(order.Created, 1)}, do: upd(order.Shipped, 4),
			want: order.Applied, wantGap: 2, wantRow: &rowWant{order.Shipped, 4}},
		{name: "first message with gap", do: upd(order.Paid, 3),
			want: order.Applied, wantGap: 2, wantRow: &rowWant{order.Paid, 3}},
		{name: "after terminal", before: delivered, do: upd(order.Paid, 5),
			want: order.InvalidTransition, wantRow: &rowWant{order.Delivered, 4}, wantReason: order.ReasonInvalidTransition},
		{name: "duplicate of terminal", before: delivered, do: upd(order.Delivered, 4),
			want: order.Duplicate, wantRow: &rowWant{order.Delivered, 4}},
		{name: "expire created", before: []step{upd(order.Created, 1)}, do: expire,
			want: order.Applied, wantRow: &rowWant{order.Cancelled, 1}},
		{name: "expire paid", before: []step{upd(order.Created, 1), upd(order.Paid, 2)}, do: expire,
			want: order.Stale, wantRow: &rowWant{order.Paid, 2}},
		{name: "expire unknown", do: expire, want: order.Stale},
		{name: "expire twice", before: []step{upd(order.Created, 1), expire}, do: expire,
			want: order.Stale, wantRow: &rowWant{order.Cancelled, 1}},
		{name: "expire the Created it names", before: []step{upd(order.Created, 1)}, do: expireOf(1),
			want: order.Applied, wantRow: &rowWant{order.Cancelled, 1}},
		{name: "expire an older Created", before: []step{upd(order.Created, 1), upd(order.Created, 3)}, do: expireOf(1),
			want: order.Stale, wantRow: &rowWant{order.Created, 3}},
		{name: "expire the newer Created", before: []step{upd(order.Created, 1), upd(order.Created, 3)}, do: expireOf(3),
			want: order.Applied, wantRow: &rowWant{order.Cancelled, 3}},
		{name: "paid in time after the timeout supersedes it", before: []step{upd(order.Created, 1), expire}, do: upd(order.Paid, 2),
			want: order.Applied, wantRow: &rowWant{order.Paid, 2}},
		{name: "shipped in time after the timeout supersedes it", before: []step{upd(order.Created, 1), expire}, do: upd(order.Shipped, 3),
			want: order.Applied, wantGap: 1, wantRow: &rowWant{order.Shipped, 3}},
		{name: "paid past the deadline after the timeout", before: []step{upd(order.Created, 1), expire}, do: updLate(order.Paid, 2),
			want: order.InvalidTransition, wantRow: &rowWant{order.Cancelled, 1}, wantReason: order.ReasonInvalidTransition},
		{name: "paid after a producer's cancel", before: []step{upd(order.Created, 1), upd(order.Cancelled, 2)}, do: upd(order.Paid, 3),
			want: order.InvalidTransition, wantRow: &rowWant{order.Cancelled, 2}, wantReason: order.ReasonInvalidTransition},
	}
	for i, tt := range tests {
		// warm: the service that handled the earlier messages (cache
		// filled); cold: a new service (no cache), as after a restart.
		for _, mode := range []string{"warm", "cold"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				id := fmt.Sprintf("o-m%d-%s", i, mode)
				svc := newService(b)
				mustDo(t, svc, id, tt.before...)
				if mode == "cold" {
					svc = newService(b)
				}
				got, err := do(t, svc, id, tt.do)
				if err != nil {
					t.Fatalf("%s: %v", tt.do, err)
				}
				if got.Result != tt.want || got.Gap != tt.wantGap {
					t.Errorf("%s = %s gap %d, want %s gap %d", tt.do, got.Result, got.Gap, tt.want, tt.wantGap)
				}
				switch {
				case tt.wantReason == "" && got.Poison != nil:
					t.Errorf("Poison = %v, want nil", got.Poison)
				case tt.wantReason != "" && (got.Poison == nil || got.Poison.Reason != tt.wantReason):
					t.Errorf("Poison = %v, want reason %s", got.Poison, tt.wantReason)
				}
				row := checkOrder(t, b, id, tt.wantRow)
				if tt.wantRow != nil && (got.State.Status != row.State.Status || got.State.LastSequence != row.State.LastSequence) {
					t.Errorf("Outcome.State = %s seq %d, want the stored %s seq %d",
						got.State.Status, got.State.LastSequence, row.State.Status, row.State.LastSequence)
				}
			})
		}
	}
}

func testRoundTrips(t *testing.T, b store.Backend) {
	counting := storetest.NewCounting(b)
	a, fresh := newService(counting), newService(counting)
	tests := []struct {
		name      string
		svc       *orderstate.Service
		do        step
		want      order.Result
		wantTrips int
		wantHit   bool
	}{
		{"first message: insert at once", a, upd(order.Created, 1), order.Applied, 1, false},
		{"steady state: one write", a, upd(order.Paid, 2), order.Applied, 1, true},
		{"steady state with gap: one write", a, upd(order.Shipped, 4), order.Applied, 1, true},
		{"duplicate from cache", a, upd(order.Shipped, 4), order.Duplicate, 0, true},
		{"stale from cache", a, upd(order.Paid, 2), order.Stale, 0, true},
		{"another instance: read and write", fresh, upd(order.Shipped, 5), order.Applied, 2, false},
		{"first message already stored: insert, 409, read", newService(counting), upd(order.Created, 1), order.Stale, 2, false},
		{"stale cache: write, 412, read", a, upd(order.Shipped, 6), order.Applied, 3, true},
		{"expiry always reads", a, expire, order.Stale, 1, true},
		{"terminal: one write", a, upd(order.Delivered, 7), order.Applied, 1, true},
		{"poison from cache is confirmed by a read", a, upd(order.Paid, 8), order.InvalidTransition, 1, true},
	}
	const id = "o-rt"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := counting.Total()
			got, err := do(t, tt.svc, id, tt.do)
			if err != nil {
				t.Fatalf("%s: %v", tt.do, err)
			}
			calls := counting.Total() - before
			if got.Result != tt.want || got.RoundTrips != tt.wantTrips || got.CacheHit != tt.wantHit {
				t.Errorf("%s = %s, %d round trips, cache hit %t; want %s, %d, %t",
					tt.do, got.Result, got.RoundTrips, got.CacheHit, tt.want, tt.wantTrips, tt.wantHit)
			}
			if calls != int64(got.RoundTrips) {
				t.Errorf("backend saw %d calls, Outcome.RoundTrips = %d", calls, got.RoundTrips)
			}
		})
	}

	t.Run("one round trip per applied message", func(t *testing.T) {
		const n = 20
		counting := storetest.NewCounting(b)
		svc := newService(counting)
		mustDo(t, svc, "o-steady", upd(order.Created, 1))
		before := counting.Total()
		for seq := int64(2); seq <= n; seq++ {
			mustDo(t, svc, "o-steady", upd(order.Paid, seq), upd(order.Paid, seq)) // each delivered twice
		}
		if trips, applied := counting.Total()-before, int64(n-1); trips != applied {
			t.Errorf("%d round trips for %d applied messages (each delivered twice), want %d", trips, applied, applied)
		}
		if gets, inserts := counting.Calls(storetest.OpGet), counting.Calls(storetest.OpInsert); gets != 0 || inserts != 1 {
			t.Errorf("%d reads and %d inserts, want 0 and 1 (the first message is inserted without a read)", gets, inserts)
		}
	})
}

func testStaleCache(t *testing.T, b store.Backend) {
	tests := []struct {
		name          string
		byA, byB      []step // A runs first and caches; B then moves the row on
		do            step   // then A handles this, with its stale cache
		want          order.Result
		wantRow       rowWant
		wantConflicts int
	}{
		{"B applied the same sequence",
			[]step{upd(order.Created, 1), upd(order.Paid, 2)}, []step{upd(order.Shipped, 3)},
			upd(order.Shipped, 3), order.Duplicate, rowWant{order.Shipped, 3}, 1},
		{"B applied a later sequence",
			[]step{upd(order.Created, 1), upd(order.Paid, 2)}, []step{upd(order.Shipped, 4)},
			upd(order.Shipped, 3), order.Stale, rowWant{order.Shipped, 4}, 1},
		{"B applied the predecessor",
			[]step{upd(order.Created, 1), upd(order.Paid, 2)}, []step{upd(order.Shipped, 3)},
			upd(order.Delivered, 4), order.Applied, rowWant{order.Delivered, 4}, 1},
		{"B delivered",
			[]step{upd(order.Created, 1), upd(order.Paid, 2)}, []step{upd(order.Delivered, 3)},
			upd(order.Shipped, 4), order.InvalidTransition, rowWant{order.Delivered, 3}, 1},
		{"B expired the order, A applies its Paid, in time",
			[]step{upd(order.Created, 1)}, []step{expire},
			upd(order.Paid, 2), order.Applied, rowWant{order.Paid, 2}, 1},
		{"B expired the order, A applies its Paid, too late",
			[]step{upd(order.Created, 1)}, []step{expire},
			updLate(order.Paid, 2), order.InvalidTransition, rowWant{order.Cancelled, 1}, 1},
		{"B expired, A expires too",
			[]step{upd(order.Created, 1)}, []step{expire},
			expire, order.Stale, rowWant{order.Cancelled, 1}, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("o-sc%d", i)
			a, bsvc := newService(b), newService(b)
			mustDo(t, a, id, tt.byA...)
			mustDo(t, bsvc, id, tt.byB...)
			got, err := do(t, a, id, tt.do)
			if err != nil {
				t.Fatalf("A %s: %v", tt.do, err)
			}
			if got.Result != tt.want || got.Conflicts != tt.wantConflicts {
				t.Errorf("A %s = %s with %d conflicts, want %s with %d", tt.do, got.Result, got.Conflicts, tt.want, tt.wantConflicts)
			}
			checkOrder(t, b, id, &tt.wantRow)
		})
	}
}

func testLostAnswer(t *testing.T, b store.Backend) {
	tests := []struct {
		name      string
		before    []step
		cold      bool // a new service (empty cache) handles do
		op        storetest.Op
		fault     storetest.Fault
		do        step
		wantRetry order.Result
		wantTrips int // of the retry: the failed write dropped the cache entry
		wantRow   rowWant
	}{
		{"insert took effect", nil, false, storetest.OpInsert, storetest.FailAfter,
			upd(order.Created, 1), order.Duplicate, 1, rowWant{order.Created, 1}},
		{"insert never arrived", nil, false, storetest.OpInsert, storetest.FailBefore,
			upd(order.Created, 1), order.Applied, 2, rowWant{order.Created, 1}},
		{"replace took effect", []step{upd(order.Created, 1)}, false, storetest.OpReplace, storetest.FailAfter,
			upd(order.Paid, 2), order.Duplicate, 1, rowWant{order.Paid, 2}},
		{"replace never arrived", []step{upd(order.Created, 1)}, false, storetest.OpReplace, storetest.FailBefore,
			upd(order.Paid, 2), order.Applied, 2, rowWant{order.Paid, 2}},
		{"expiry took effect", []step{upd(order.Created, 1)}, false, storetest.OpReplace, storetest.FailAfter,
			expire, order.Stale, 1, rowWant{order.Cancelled, 1}},
		{"read failed", []step{upd(order.Created, 1)}, true, storetest.OpGet, storetest.FailBefore,
			upd(order.Paid, 2), order.Applied, 2, rowWant{order.Paid, 2}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("o-la%d", i)
			faulty := storetest.NewFaulty(b)
			svc := newService(faulty)
			mustDo(t, svc, id, tt.before...)
			if tt.cold {
				svc = newService(faulty)
			}
			faulty.Arm(tt.op, tt.fault)
			_, err := do(t, svc, id, tt.do)
			if !errors.Is(err, store.ErrTransient) {
				t.Fatalf("%s with %s on %s: error = %v, want ErrTransient", tt.do, tt.fault, tt.op, err)
			}
			if n := faulty.Pending(tt.op); n != 0 {
				t.Fatalf("%d armed faults did not fire", n)
			}
			var afterFault store.Row
			if tt.fault == storetest.FailAfter {
				afterFault = checkOrder(t, b, id, &tt.wantRow)
			}
			got, err := do(t, svc, id, tt.do) // the caller's retry
			if err != nil {
				t.Fatalf("retry %s: %v", tt.do, err)
			}
			if got.Result != tt.wantRetry || got.RoundTrips != tt.wantTrips {
				t.Errorf("retry %s = %s in %d round trips, want %s in %d", tt.do, got.Result, got.RoundTrips, tt.wantRetry, tt.wantTrips)
			}
			row := checkOrder(t, b, id, &tt.wantRow)
			if tt.fault == storetest.FailAfter && row.ETag != afterFault.ETag {
				t.Errorf("row ETag changed by the retry (%q -> %q): the message took effect twice", afterFault.ETag, row.ETag)
			}
		})
	}
}

// testInsertFirst: with nothing cached, a sequence-1 update is inserted
// without a read; when the row exists, the 409 falls back to a read, writing
// nothing twice.
func testInsertFirst(t *testing.T, b store.Backend) {
	tests := []struct {
		name          string
		before        []step // by another service (its own cache)
		do            step   // by a new service: nothing cached
		want          order.Result
		wantTrips     int
		wantConflicts int
		wantRow       rowWant
	}{
		{"new order: insert only", nil, upd(order.Created, 1), order.Applied, 1, 0, rowWant{order.Created, 1}},
		{"new order, first status not Created", nil, upd(order.Paid, 1), order.Applied, 1, 0, rowWant{order.Paid, 1}},
		{"409, same sequence stored: Duplicate", []step{upd(order.Created, 1)}, upd(order.Created, 1),
			order.Duplicate, 2, 1, rowWant{order.Created, 1}},
		{"409, later sequence stored: Stale", []step{upd(order.Created, 1), upd(order.Paid, 2)}, upd(order.Created, 1),
			order.Stale, 2, 1, rowWant{order.Paid, 2}},
		{"409, cancelled at sequence 1: Duplicate", []step{upd(order.Created, 1), expire}, upd(order.Created, 1),
			order.Duplicate, 2, 1, rowWant{order.Cancelled, 1}},
		{"no insert-first past sequence 1", []step{upd(order.Created, 1)}, upd(order.Paid, 2),
			order.Applied, 2, 0, rowWant{order.Paid, 2}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("o-if%d", i)
			mustDo(t, newService(b), id, tt.before...)
			var before store.Row
			if len(tt.before) > 0 {
				before = checkOrder(t, b, id, rowAfter(tt.before))
			}
			counting := storetest.NewCounting(b)
			got, err := do(t, newService(counting), id, tt.do)
			if err != nil {
				t.Fatalf("%s: %v", tt.do, err)
			}
			if got.Result != tt.want || got.RoundTrips != tt.wantTrips || got.Conflicts != tt.wantConflicts {
				t.Errorf("%s = %s, %d round trips, %d conflicts; want %s, %d, %d",
					tt.do, got.Result, got.RoundTrips, got.Conflicts, tt.want, tt.wantTrips, tt.wantConflicts)
			}
			if tt.wantConflicts > 0 {
				if ins, gets := counting.Calls(storetest.OpInsert), counting.Calls(storetest.OpGet); ins != 1 || gets != 1 {
					t.Errorf("%d inserts and %d reads, want 1 and 1 (insert, 409, read)", ins, gets)
				}
			}
			row := checkOrder(t, b, id, &tt.wantRow)
			if got.Result != order.Applied && row.ETag != before.ETag {
				t.Errorf("row ETag changed (%q -> %q) by a message settled as %s", before.ETag, row.ETag, got.Result)
			}
		})
	}
}

// rowAfter is the row the steps leave behind (they are in order here).
func rowAfter(steps []step) *rowWant {
	w := &rowWant{}
	for _, s := range steps {
		if s.expire {
			w.status = order.Cancelled
			continue
		}
		w.status, w.seq = s.status, s.seq
	}
	return w
}
