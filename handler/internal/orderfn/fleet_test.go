package orderfn

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/recovery"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// flakyMarker is the recovery marker of a process's view of the store: it
// fails while that process's store is down, and counts reads.
type flakyMarker struct {
	m     recovery.Marker
	down  *atomic.Bool
	reads atomic.Int64
}

func (f *flakyMarker) RecoveringUntil(ctx context.Context) (time.Time, error) {
	f.reads.Add(1)
	if f.down.Load() {
		return time.Time{}, fmt.Errorf("flaky: connection refused: %w", store.ErrTransient)
	}
	return f.m.RecoveringUntil(ctx)
}

func (f *flakyMarker) RaiseRecovering(ctx context.Context, until time.Time) (time.Time, error) {
	if f.down.Load() {
		return time.Time{}, fmt.Errorf("flaky: connection refused: %w", store.ErrTransient)
	}
	return f.m.RaiseRecovering(ctx, until)
}

// process is one instance's worth of state on a shared table and queue:
// its own handler, order cache, breaker-free rescheduler and marker cache.
type process struct {
	h       *Handler
	backend *flakyBackend
	marker  *flakyMarker
	m       *metrics.Metrics
	stdout  *bytes.Buffer
}

const (
	fleetTTL   = time.Second
	fleetSlack = 10 * time.Second
)

// firstDue is when the first copy of a message rescheduled at now0 is
// due: the jitter is fixed at a half, so half the first backoff's bound.
var firstDue = now0.Add(policy.Ceiling(1) / 2)

// sharedStore is the order table every process of a test shares: memstore,
// or Table Storage on Azurite.
type sharedStore interface {
	orderstate.Backend
	recovery.Marker
}

func newProcess(mem sharedStore, bus *fakeBus) *process {
	return newProcessBudget(mem, bus, 20*time.Millisecond)
}

// newProcessBudget is newProcess with an in-call and schedule budget of
// budget (a real table's calls need more than memstore's).
func newProcessBudget(mem sharedStore, bus *fakeBus, budget time.Duration) *process {
	m := metrics.New(prometheus.NewRegistry(), "test")
	var out bytes.Buffer
	back := &flakyBackend{Backend: mem}
	p := &process{backend: back, marker: &flakyMarker{m: mem, down: &back.down}, m: m, stdout: &out}
	p.h = New(orderstate.New(back, nil), &fakeParker{}, m, logging.New(&out, nil, slog.LevelInfo), Options{
		Retry:          retry.Policy{Budget: budget, Initial: time.Millisecond, Max: 2 * time.Millisecond},
		Reschedule:     reschedule.New(bus, "order-status", policy, &reschedule.Options{Rand: func() float64 { return 0.5 }}),
		ScheduleBudget: budget,
		Fleet:          recovery.New(p.marker, &recovery.Options{TTL: fleetTTL, Slack: fleetSlack}),
	})
	return p
}

// post delivers m to p, with the time m came due when given
// (EnqueuedTimeUtc; none: the handler takes its now).
func (p *process) post(t *testing.T, m broker.Message, enqueued ...time.Time) map[string]any {
	t.Helper()
	var at time.Time
	if len(enqueued) > 0 {
		at = enqueued[0]
	}
	_, a := (&rig{h: p.h}).post(t, hostInvocationAt(m, 1, at))
	return a.ReturnValue
}

// roundTrips is what the process's storage work for checks came to so far.
func (p *process) roundTrips(result string) float64 {
	return testutil.ToFloat64(p.m.MessageRoundTrips.WithLabelValues(order.SubjectPaymentTimeout, result))
}

func (b *fakeBus) advance(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = b.now.Add(d)
}

// The settle guard after an outage holds across the fleet: A rescheduled
// an order's Paid during an outage of the table and then succeeded; B
// never failed (it scaled out after the outage, or had no traffic in it).
// B's on-time check of the still Created order settles instead of
// cancelling; once the marker's time has passed, B cancels.
func TestOnTimeCheckOnAnotherInstanceSettles(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { testOnTimeCheckOnAnotherInstance(t, memstore.New(), 20*time.Millisecond) })
	t.Run("Azurite", func(t *testing.T) {
		s, err := tablestore.NewFromConnectionString(testenv.Azurite(t), "t"+rand.Text(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.EnsureTable(t.Context()); err != nil {
			t.Fatal(err)
		}
		testOnTimeCheckOnAnotherInstance(t, s, time.Second)
	})
}

func testOnTimeCheckOnAnotherInstance(t *testing.T, mem sharedStore, budget time.Duration) {
	bus := newFakeBus(now0)
	a, b := newProcessBudget(mem, bus, budget), newProcessBudget(mem, bus, budget)
	if rv := a.post(t, statusMsg("o-1", 1, order.Created)); rv["result"] != "Applied" {
		t.Fatalf("A: Created: %v", rv)
	}
	a.backend.down.Store(true)
	if rv := a.post(t, statusMsg("o-1", 2, order.Paid)); rv["result"] != ResultRescheduled {
		t.Fatalf("A: Paid during the outage: %v, want Rescheduled", rv)
	}
	a.backend.down.Store(false)
	// A's first successful store call after the outage raises the marker.
	if rv := a.post(t, statusMsg("o-2", 1, order.Created)); rv["result"] != "Applied" {
		t.Fatalf("A: Created after the outage: %v", rv)
	}
	until := firstDue.Add(policy.Margin() + fleetSlack)
	if got, err := mem.RecoveringUntil(t.Context()); err != nil || !got.Equal(until) {
		t.Fatalf("marker after A's recovery = %v, %v; want when A's copies are due + the margin + the slack, %v", got, err, until)
	}
	if !strings.Contains(a.stdout.String(), "outage recovery recorded for the fleet") {
		t.Errorf("A logged no recovery line:\n%s", a.stdout)
	}

	// B: the producer's check, on time, before the Paid's copy is due.
	rv := b.post(t, timeoutMsg("o-1"))
	if due := settledAt(policy, until); rv["result"] != ResultRescheduled || rv["rescheduled"] == nil || rv["due"] != due.Format(time.RFC3339) {
		t.Fatalf("B: the on-time check after the outage: %v, want it settled (Rescheduled) until the marker, %s, and the jitter: %s", rv, until.Format(time.RFC3339), due.Format(time.RFC3339))
	}
	if row, _ := mem.Get(t.Context(), "o-1"); row.State.Status != order.Created {
		t.Fatalf("row %+v, want still Created (B settled, it did not cancel)", row.State)
	}
	if !strings.Contains(b.stdout.String(), settleFleet) {
		t.Errorf("B's line does not say the fleet's marker settled it:\n%s", b.stdout)
	}
	if n := b.marker.reads.Load(); n != 1 {
		t.Errorf("B read the marker %d times, want 1", n)
	}
	// B's next check while the marker is in the future needs no read of it.
	b.post(t, timeoutMsg("o-2"))
	if n := b.marker.reads.Load(); n != 1 {
		t.Errorf("B read the marker %d times after a second check, want still 1 (a future marker is a lower bound)", n)
	}

	// Once the marker's time has passed, B's check (the settle copy, or
	// any other) cancels the unpaid order.
	bus.advance(until.Sub(now0) + time.Millisecond)
	if rv := b.post(t, timeoutMsg("o-1")); rv["result"] != "Applied" || rv["status"] != string(order.Cancelled) {
		t.Fatalf("B: a check after the marker's time: %v, want Applied Cancelled", rv)
	}
	if n := b.marker.reads.Load(); n != 2 {
		t.Errorf("B read the marker %d times, want 2 (the past marker read once more)", n)
	}
	waitRaised(t, a)
}

// Before A's first successful store call after the table's return there is
// no marker: B cancels. This is the window the fleet guard cannot cover
// (docs/outage.md), shown so that the test above cannot pass without the
// marker.
func TestOnTimeCheckBeforeTheMarkerCancels(t *testing.T) {
	mem, bus := memstore.New(), newFakeBus(now0)
	a, b := newProcess(mem, bus), newProcess(mem, bus)
	a.post(t, statusMsg("o-1", 1, order.Created))
	a.backend.down.Store(true)
	// A's marker calls fail until B's check is done: A's background
	// raise has not got through yet.
	a.marker.down = new(atomic.Bool)
	a.marker.down.Store(true)
	if rv := a.post(t, statusMsg("o-1", 2, order.Paid)); rv["result"] != ResultRescheduled {
		t.Fatalf("A: Paid during the outage: %v, want Rescheduled", rv)
	}
	a.backend.down.Store(false)
	if rv := b.post(t, timeoutMsg("o-1")); rv["result"] != "Applied" {
		t.Fatalf("B before any marker: %v, want Applied (cancelled: nothing told B)", rv)
	}
	a.marker.down.Store(false)
	waitRaised(t, a)
}

// waitRaised waits (bounded) until p's background raise has ended.
func waitRaised(t *testing.T, p *process) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); p.h.raising.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the background raise still runs after 10 s")
		}
	}
}

// A process that rescheduled for the store raises the marker in the
// background once the table is back, without a message of its own: in a
// quiet fleet its next store call may come long after the table's return,
// and B's on-time check with it. It stops once it got through.
func TestBackgroundRaiseWithoutTraffic(t *testing.T) {
	mem, bus := memstore.New(), newFakeBus(now0)
	a, b := newProcess(mem, bus), newProcess(mem, bus)
	a.post(t, statusMsg("o-1", 1, order.Created))
	a.backend.down.Store(true)
	if rv := a.post(t, statusMsg("o-1", 2, order.Paid)); rv["result"] != ResultRescheduled {
		t.Fatalf("A: Paid during the outage: %v, want Rescheduled", rv)
	}
	if !a.h.raising.Load() {
		t.Fatal("no background raise after a reschedule for the store")
	}
	a.backend.down.Store(false)
	waitRaised(t, a)
	until := firstDue.Add(policy.Margin() + fleetSlack)
	if got, err := mem.RecoveringUntil(t.Context()); err != nil || !got.Equal(until) {
		t.Fatalf("marker after A's background raise = %v, %v; want %v", got, err, until)
	}
	if rv := b.post(t, timeoutMsg("o-1")); rv["result"] != ResultRescheduled {
		t.Fatalf("B: the on-time check: %v, want it settled (Rescheduled)", rv)
	}
}

// An instance that applies a rescheduled copy of a status change raises the
// marker too, so the guard holds when the instance that rescheduled is gone
// (scaled in, restarted) before its store calls succeeded again: C, added
// after the outage, settles.
func TestAppliedCopyRaisesTheMarker(t *testing.T) {
	mem, bus := memstore.New(), newFakeBus(now0)
	a, b, c := newProcess(mem, bus), newProcess(mem, bus), newProcess(mem, bus)
	a.post(t, statusMsg("o-1", 1, order.Created))
	a.post(t, statusMsg("o-2", 1, order.Created))
	a.backend.down.Store(true)
	a.post(t, statusMsg("o-1", 2, order.Paid))
	if rv := a.post(t, statusMsg("o-2", 2, order.Paid)); rv["result"] != ResultRescheduled {
		t.Fatalf("A: Paid of o-2 during the outage: %v", rv)
	}
	// A is gone. The copy of o-2's Paid comes back to B.
	copyOfO2 := bus.last(ofSession("o-2", order.SubjectStatusChanged))
	bus.advance(firstDue.Sub(now0))
	if rv := b.post(t, copyOfO2); rv["result"] != "Applied" {
		t.Fatalf("B: the copy of o-2's Paid: %v, want Applied", rv)
	}
	// The copy carries when every copy A had scheduled for the store is
	// due (its RetryHorizon), o-1's Paid among them.
	if h := reschedule.StateOf(reschedule.Original{ApplicationProperties: copyOfO2.ApplicationProperties}).Horizon; !h.Equal(firstDue) {
		t.Fatalf("the copy's RetryHorizon = %v, want %v", h, firstDue)
	}
	want := firstDue.Add(policy.Margin() + fleetSlack)
	if got, _ := mem.RecoveringUntil(t.Context()); !got.Equal(want) {
		t.Fatalf("marker after B applied a copy = %v, want its RetryHorizon + the margin + the slack, %v", got, want)
	}
	if rv := c.post(t, timeoutMsg("o-1")); rv["result"] != ResultRescheduled {
		t.Fatalf("C: the on-time check of o-1: %v, want it settled (Rescheduled)", rv)
	}
	if row, _ := mem.Get(t.Context(), "o-1"); row.State.Status != order.Created {
		t.Fatalf("o-1 %+v, want still Created", row.State)
	}
	a.backend.down.Store(false) // ends A's background raise
	waitRaised(t, a)
}

// A copy that carries no RetryHorizon (scheduled by a version before it)
// raises the marker to the Horizon (the cap and the margin) after its
// RetryScheduledAt; one that carries neither, to the Horizon after now:
// the copy was scheduled at most one cap before, and every process that
// rescheduled then was failing no later than now.
func TestAppliedCopyWithoutItsHorizonRaisesByTheCap(t *testing.T) {
	mem, bus := memstore.New(), newFakeBus(now0)
	a, b := newProcess(mem, bus), newProcess(mem, bus)
	copies := map[string]broker.Message{}
	for _, id := range []string{"o-2", "o-3"} {
		a.post(t, statusMsg(id, 1, order.Created))
	}
	a.backend.down.Store(true)
	for _, id := range []string{"o-2", "o-3"} {
		a.post(t, statusMsg(id, 2, order.Paid))
	}
	for _, id := range []string{"o-2", "o-3"} {
		copies[id] = bus.last(ofSession(id, order.SubjectStatusChanged))
	}
	old := copies["o-2"]
	delete(old.ApplicationProperties, reschedule.PropHorizon)
	bus.advance(30 * time.Second)
	if rv := b.post(t, old); rv["result"] != "Applied" {
		t.Fatalf("B: the copy: %v, want Applied", rv)
	}
	want := now0.Add(policy.Horizon() + fleetSlack)
	if got, _ := mem.RecoveringUntil(t.Context()); !got.Equal(want) {
		t.Fatalf("marker = %v, want its RetryScheduledAt + the Horizon + the slack, %v", got, want)
	}
	older := copies["o-3"]
	delete(older.ApplicationProperties, reschedule.PropHorizon)
	delete(older.ApplicationProperties, reschedule.PropScheduledAt)
	bus.advance(time.Minute)
	if rv := b.post(t, older); rv["result"] != "Applied" {
		t.Fatalf("B: the second copy: %v, want Applied", rv)
	}
	want = now0.Add(90*time.Second + policy.Horizon() + fleetSlack)
	if got, _ := mem.RecoveringUntil(t.Context()); !got.Equal(want) {
		t.Fatalf("marker = %v, want B's now + the Horizon + the slack, %v", got, want)
	}
	a.backend.down.Store(false)
	waitRaised(t, a)
}

// A check an outage delayed, come back to an instance that knows of no
// outage, reads the fleet's marker to learn until when to settle: the
// Horizon after the outage, not the settle delay after now.
func TestDelayedCheckSettlesUntilTheMarker(t *testing.T) {
	mem, bus := memstore.New(), newFakeBus(now0)
	a, b := newProcess(mem, bus), newProcess(mem, bus)
	a.post(t, statusMsg("o-1", 1, order.Created))
	a.backend.down.Store(true)
	// Another order's status change rescheduled for the store raises the
	// marker (a check's own copy does not: no check waits for another).
	if rv := a.post(t, statusMsg("o-2", 1, order.Created)); rv["result"] != ResultRescheduled {
		t.Fatalf("A: o-2's Created during the outage: %v, want Rescheduled", rv)
	}
	if rv := a.post(t, timeoutMsg("o-1")); rv["result"] != ResultRescheduled {
		t.Fatalf("A: the check during the outage: %v, want Rescheduled", rv)
	}
	check := bus.last(ofSession("o-1", order.SubjectPaymentTimeout))
	a.backend.down.Store(false)
	waitRaised(t, a)
	until := firstDue.Add(policy.Margin() + fleetSlack)
	bus.advance(firstDue.Sub(now0))
	rv := b.post(t, check)
	if due := settledAt(policy, until); rv["result"] != ResultRescheduled || rv["due"] != due.Format(time.RFC3339) {
		t.Fatalf("B: the delayed check: %v, want it settled until the marker, %s, and the jitter: %s", rv, until.Format(time.RFC3339), due.Format(time.RFC3339))
	}
	if n := b.marker.reads.Load(); n != 1 {
		t.Errorf("B read the marker %d times, want 1", n)
	}
	// Past the marker, on a process that knows nothing else, the check
	// the store delayed settles due now: every copy for the store is due
	// already (the marker and the copy's horizon say so), so its settle
	// copy is due, and activated, after them (reschedule.Policy.Margin
	// says what that order rests on). A wave that drains slower than the
	// Margin delivers such checks just past the horizon.
	c := newProcess(mem, bus)
	bus.advance(until.Sub(now0))
	later := bus.now
	if rv := c.post(t, check); rv["result"] != ResultRescheduled || rv["due"] != later.Format(time.RFC3339) {
		t.Fatalf("C: the delayed check after the marker: %v, want it settled due now (%s)", rv, later.Format(time.RFC3339))
	}
	// A dead-letter replay of it settles the settle delay from now: its
	// Paid may still be in the dead-letter queue.
	replay := check
	replay.ApplicationProperties = maps.Clone(check.ApplicationProperties)
	replay.ApplicationProperties[reschedule.PropReplayedFromDeadLetter] = true
	if rv := newProcess(mem, bus).post(t, replay); rv["result"] != ResultRescheduled || rv["due"] != later.Add(policy.Settle()).Format(time.RFC3339) {
		t.Fatalf("a replay of the delayed check after the marker: %v, want it settled the settle delay from now", rv)
	}
	// So does a check delayed for another reason (its order had no row:
	// its Created was late, and so may its Paid be).
	late := check
	late.ApplicationProperties = maps.Clone(check.ApplicationProperties)
	delete(late.ApplicationProperties, reschedule.PropHorizon)
	if rv := newProcess(mem, bus).post(t, late); rv["result"] != ResultRescheduled || rv["due"] != later.Add(policy.Settle()).Format(time.RFC3339) {
		t.Fatalf("a check delayed but not by the store, after the marker: %v, want it settled the settle delay from now", rv)
	}
}

// What the fleet guard costs a check: nothing for a paid order's check,
// and for one that would cancel at most the marker's read, once per TTL
// while the marker is past.
func TestFleetGuardCost(t *testing.T) {
	mem, bus := memstore.New(), newFakeBus(now0)
	b := newProcess(mem, bus)
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		b.post(t, statusMsg(id, 1, order.Created))
	}
	b.post(t, statusMsg("o-1", 2, order.Paid))
	if rv := b.post(t, timeoutMsg("o-1")); rv["result"] != "Stale" {
		t.Fatalf("check of the paid o-1: %v, want Stale", rv)
	}
	if n, rt := b.marker.reads.Load(), b.roundTrips("Stale"); n != 0 || rt != 1 {
		t.Fatalf("a paid order's check: %d marker reads and %v round trips, want 0 and 1 (the row's read)", n, rt)
	}
	if rv := b.post(t, timeoutMsg("o-2")); rv["result"] != "Applied" {
		t.Fatalf("check of o-2: %v, want Applied (cancelled)", rv)
	}
	// The row's read, the marker's, then ExpireIfUnpaid's read and write.
	if n, rt := b.marker.reads.Load(), b.roundTrips("Applied"); n != 1 || rt != 4 {
		t.Fatalf("the first cancelling check: %d marker reads and %v round trips, want 1 and 4", n, rt)
	}
	// Within the TTL: the row's read (the check names its Created, which
	// must still be in effect), then ExpireIfUnpaid's read and write.
	bus.advance(fleetTTL / 2)
	b.post(t, timeoutMsg("o-3"))
	if n, rt := b.marker.reads.Load(), b.roundTrips("Applied"); n != 1 || rt != 4+3 {
		t.Fatalf("a cancelling check within the TTL: %d marker reads and %v round trips in all, want still 1, and 3 more (the row's read, ExpireIfUnpaid's read and write)", n, rt)
	}
}

// A check that would cancel while the marker cannot be read is not
// cancelled: the failure is transient, and the check is rescheduled.
func TestMarkerReadFailureIsTransient(t *testing.T) {
	mem, bus := memstore.New(), newFakeBus(now0)
	b := newProcess(mem, bus)
	b.post(t, statusMsg("o-1", 1, order.Created))
	b.marker.down = new(atomic.Bool)
	b.marker.down.Store(true)
	if rv := b.post(t, timeoutMsg("o-1")); rv["result"] != ResultRescheduled {
		t.Fatalf("check with the marker unreadable: %v, want Rescheduled", rv)
	}
	if row, _ := mem.Get(t.Context(), "o-1"); row.State.Status != order.Created {
		t.Fatalf("o-1 %+v, want still Created", row.State)
	}
	b.marker.down.Store(false) // ends B's background raise
	waitRaised(t, b)
}

// A check that came due before the outage's horizon but is delivered after
// it (a backlog: the returning wave runs behind) may have its order's
// Paid, due later, still queued behind it in the session. It settles due
// now, behind every copy already due, and does not cancel; its settle
// copy, come due after the horizon, cancels. On the process that
// rescheduled the Paid, and on another that knows of it only by the
// marker. The bench's 30-minute outage cancelled two paid orders this way
// before the guard took the check's EnqueuedTimeUtc.
func TestACheckDueBeforeTheHorizonAndDeliveredAfterItSettles(t *testing.T) {
	for _, other := range []bool{false, true} {
		t.Run(map[bool]string{false: "the process that rescheduled", true: "another instance"}[other], func(t *testing.T) {
			mem, bus := memstore.New(), newFakeBus(now0)
			a := newProcess(mem, bus)
			a.post(t, statusMsg("o-1", 1, order.Created))
			a.backend.down.Store(true)
			if rv := a.post(t, statusMsg("o-1", 2, order.Paid)); rv["result"] != ResultRescheduled {
				t.Fatalf("the Paid during the outage: %v, want Rescheduled", rv)
			}
			a.backend.down.Store(false)
			a.post(t, statusMsg("o-2", 1, order.Created)) // the store answers again: the marker is raised
			waitRaised(t, a)
			p := a
			if other {
				p = newProcess(mem, bus)
			}
			// The check came due at now0, before the Paid's copy; it is
			// delivered a minute after every horizon.
			bus.advance(firstDue.Sub(now0) + policy.Margin() + fleetSlack + time.Minute)
			later := bus.now
			rv := p.post(t, timeoutMsg("o-1"), now0)
			if rv["result"] != ResultRescheduled || rv["due"] != later.Format(time.RFC3339) {
				t.Fatalf("the check due before the horizon: %v, want it settled due now (%s)", rv, later.Format(time.RFC3339))
			}
			if row, _ := mem.Get(t.Context(), "o-1"); row.State.Status != order.Created {
				t.Fatalf("row %+v, want still Created", row.State)
			}
			settle := bus.last(ofSession("o-1", order.SubjectPaymentTimeout))
			// The Paid's copy, queued ahead of the settle copy, comes first.
			if rv := p.post(t, bus.last(ofSession("o-1", order.SubjectStatusChanged)), later); rv["result"] != "Applied" {
				t.Fatalf("the Paid's copy: %v, want Applied", rv)
			}
			if rv := p.post(t, settle, later); rv["result"] != "Stale" {
				t.Fatalf("the settle copy after the Paid: %v, want Stale", rv)
			}
			// An unpaid order's check that came due after the horizon
			// cancels at once.
			if rv := p.post(t, timeoutMsg("o-2"), later); rv["result"] != "Applied" || rv["status"] != string(order.Cancelled) {
				t.Fatalf("a check due after the horizon: %v, want Applied Cancelled", rv)
			}
		})
	}
}

// settledAt is when a settle copy until until comes due in the rigs, whose
// jitter is always a half: half a Margin after it (ScheduleSettle).
func settledAt(p reschedule.Policy, until time.Time) time.Time {
	return until.Add(p.WithDefaults().Margin() / 2)
}
