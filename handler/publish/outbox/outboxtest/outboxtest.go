// Package outboxtest is the conformance suite of outbox.Store, which every
// implementation (memoutbox, outbox.Table, a producer's own) must pass. It
// drives the real relay against an in-memory Service Bus: atomic commits, no
// loss at any crash, sequence order, cross-process cancels.
package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokerpub"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/publish"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
)

// Backend is one client of the storage under test: one producer process.
type Backend struct {
	// Store is the relay's port.
	Store outbox.Store
	// Commit commits intents with one new own row in one transaction; with
	// failOwn that write fails, and Commit must fail, writing nothing.
	Commit func(ctx context.Context, partition string, failOwn bool, intents ...outbox.Intent) error
	// Own counts the producer's own rows that Commit wrote in partition.
	Own func(ctx context.Context, partition string) (int, error)
}

// Factory returns two clients (processes) of one new, empty storage.
type Factory func(t *testing.T) (a, b Backend)

// Run runs the suite.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"CommitThenPending", testCommitThenPending},
		{"FailedCommitWritesAndSendsNothing", testFailedCommit},
		{"InvalidIntentWritesNothing", testInvalidIntent},
		{"SecondScheduleOfACheckConflicts", testSecondSchedule},
		{"OrderCreatedAgainHasACheckPerCreated", testCheckPerCreated},
		{"CrashAfterCommitBeforeSend", testCrashAfterCommit},
		{"CrashAfterSendBeforeMark", testCrashAfterSend},
		{"CrashAfterScheduleBeforeMark", testCrashAfterSchedule},
		{"OrderOfAnOrdersMessages", testOrdering},
		{"ScheduleThenCancelAcrossTwoProducers", testScheduleCancelTwoProducers},
		{"OrderIDOf128Characters", testLongestOrderID},
		{"TimeoutNamesItsCreated", testTimeoutNamesItsCreated},
		{"CancelWaitsForItsSchedule", testCancelWaits},
		{"CancelWithoutSchedule", testCancelWithoutSchedule},
		{"RelayKilledMidBatch", testKilledMidBatch},
		{"RefusedMessageIsParked", testParked},
		{"PurgeAfterRetention", testPurge},
		{"MarkConditions", testMark},
		{"ConcurrentCommitsInOnePartition", testConcurrentCommits},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, f) })
	}
}

const queue = "order-status"

// bus is the in-memory Service Bus the relays send to.
type bus struct {
	mb  *membroker.Broker
	pub publish.Sender // mb, as the publisher's Sender
}

func newBus(t *testing.T) *bus {
	t.Helper()
	mb := membroker.New(nil)
	// Without sessions: a session queue refuses the suite's Peek.
	if err := mb.CreateQueue(queue, membroker.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	return &bus{mb: mb, pub: brokerpub.Sender(mb)}
}

// messages returns the queue's messages, scheduled ones too, in accept order.
func (b *bus) messages(t *testing.T) []broker.Received {
	t.Helper()
	got, err := broker.PeekAll(ctx(t), b.mb, broker.Source{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (b *bus) ids(t *testing.T) []string {
	var out []string
	for _, m := range b.messages(t) {
		out = append(out, m.MessageID)
	}
	return out
}

// byOrder is each order's MessageIds, in accept order.
func (b *bus) byOrder(t *testing.T) map[string][]string {
	out := map[string][]string{}
	for _, m := range b.messages(t) {
		out[m.SessionID] = append(out[m.SessionID], m.MessageID)
	}
	return out
}

func (b *bus) scheduled(t *testing.T) []broker.Received {
	var out []broker.Received
	for _, m := range b.messages(t) {
		if m.Scheduled {
			out = append(out, m)
		}
	}
	return out
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func relay(s outbox.Store, sender publish.Sender, opts *outbox.RelayOptions) *outbox.Relay {
	return outbox.NewRelay(s, publish.New(sender, &publish.Options{Queue: queue, BatchSize: 10}), opts)
}

func status(order string, st contract.Status, seq int64) outbox.Intent {
	return outbox.Status(contract.StatusChanged{OrderID: order, Status: st, Sequence: seq,
		OccurredAt: time.Date(2026, 11, 29, 10, 0, int(seq), 0, time.UTC)})
}

func commit(t *testing.T, b Backend, partition string, intents ...outbox.Intent) {
	t.Helper()
	if err := b.Commit(ctx(t), partition, false, intents...); err != nil {
		t.Fatalf("commit in %s: %v", partition, err)
	}
}

func pending(t *testing.T, s outbox.Store) []outbox.Record {
	t.Helper()
	got, err := s.Pending(ctx(t), 1000)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	return got
}

// timeout is the order's one schedule record, or ErrNotFound; more fails t.
func timeout(t *testing.T, s outbox.Store, partition, orderID string) (outbox.Record, error) {
	t.Helper()
	ts, err := s.Timeouts(ctx(t), partition, orderID)
	switch {
	case err != nil:
		return outbox.Record{}, err
	case len(ts) == 0:
		return outbox.Record{}, outbox.ErrNotFound
	case len(ts) > 1:
		t.Fatalf("Timeouts(%s) = %d records, want one", orderID, len(ts))
	}
	return ts[0], nil
}

func pass(t *testing.T, r *outbox.Relay) outbox.PassResult {
	t.Helper()
	res, err := r.Pass(ctx(t))
	if err != nil {
		t.Fatalf("relay pass: %v (%+v)", err, res)
	}
	return res
}

// drain runs passes until nothing is pending (at most 50).
func drain(t *testing.T, r *outbox.Relay, s outbox.Store) {
	t.Helper()
	for range 50 {
		pass(t, r)
		if len(pending(t, s)) == 0 {
			return
		}
	}
	t.Fatalf("still pending after 50 passes: %v", pending(t, s))
}

func testCommitThenPending(t *testing.T, f Factory) {
	a, _ := f(t)
	before := time.Now().Add(-time.Minute)
	commit(t, a, "o-1", status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	commit(t, a, "o-1", status("o-1", contract.Paid, 2), outbox.CancelTimeout("o-1"))
	got := pending(t, a.Store)
	if len(got) != 4 {
		t.Fatalf("pending %d records, want 4: %+v", len(got), got)
	}
	wantKinds := []outbox.Kind{outbox.KindStatus, outbox.KindSchedule, outbox.KindStatus, outbox.KindCancel}
	wantIDs := []string{"o-1:1", "o-1:payment-timeout-1", "o-1:2", ""} // the check of the Created committed with it
	for i, r := range got {
		if r.Partition != "o-1" || r.Kind != wantKinds[i] || r.Message.MessageID != wantIDs[i] || r.OrderID != "o-1" || r.State != outbox.Pending {
			t.Errorf("record %d: %+v, want partition o-1, kind %s, message %q, order o-1, pending", i, r, wantKinds[i], wantIDs[i])
		}
		if i > 0 && r.Seq <= got[i-1].Seq {
			t.Errorf("record %d: Seq %d after %d, want increasing in commit order", i, r.Seq, got[i-1].Seq)
		}
		if r.CommittedAt.Before(before) || r.CommittedAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("record %d: CommittedAt %v, want about now", i, r.CommittedAt)
		}
		if r.ID == "" {
			t.Errorf("record %d has no ID", i)
		}
	}
	want, _ := publish.StatusMessage(contract.StatusChanged{OrderID: "o-1", Status: contract.Created, Sequence: 1,
		OccurredAt: time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)})
	if m := got[0].Message; m.SessionID != want.SessionID || m.Subject != want.Subject || m.ContentType != want.ContentType || string(m.Body) != string(want.Body) {
		t.Errorf("status record's message %+v, want the encoder's %+v", m, want)
	}
	if got[1].After != 30*time.Minute || got[1].Message.Subject != contract.SubjectPaymentTimeout {
		t.Errorf("schedule record: After %s subject %q, want 30m and %s", got[1].After, got[1].Message.Subject, contract.SubjectPaymentTimeout)
	}
	if n, err := a.Own(ctx(t), "o-1"); err != nil || n != 2 {
		t.Errorf("own rows after two commits: %d, %v; want 2", n, err)
	}
	tm, err := timeout(t, a.Store, "o-1", "o-1")
	if err != nil || tm.ID != got[1].ID || tm.Kind != outbox.KindSchedule {
		t.Errorf("Timeout(o-1) = %+v, %v; want the schedule record %s", tm, err, got[1].ID)
	}
	if _, err := timeout(t, a.Store, "o-1", "o-2"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Timeout of an order never scheduled: %v, want ErrNotFound", err)
	}
}

func testFailedCommit(t *testing.T, f Factory) {
	a, _ := f(t)
	b := newBus(t)
	err := a.Commit(ctx(t), "o-1", true, status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	if err == nil {
		t.Fatal("a commit whose own write fails succeeded")
	}
	if got := pending(t, a.Store); len(got) != 0 {
		t.Errorf("after a failed commit, pending %+v, want none", got)
	}
	if n, err := a.Own(ctx(t), "o-1"); err != nil || n != 0 {
		t.Errorf("own rows after a failed commit: %d, %v; want 0", n, err)
	}
	res := pass(t, relay(a.Store, b.pub, nil))
	if res.Read != 0 || len(b.messages(t)) != 0 {
		t.Errorf("relay after a failed commit: %+v, broker %v; want nothing read or sent", res, b.ids(t))
	}
	if _, err := timeout(t, a.Store, "o-1", "o-1"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("the failed commit's timeout: %v, want ErrNotFound", err)
	}
	// The same intents commit afterwards: the failed commit left no trace.
	commit(t, a, "o-1", status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	pass(t, relay(a.Store, b.pub, nil))
	if got := b.ids(t); !slices.Equal(got, []string{"o-1:1", "o-1:payment-timeout-1"}) {
		t.Errorf("broker %v, want o-1:1 and o-1:payment-timeout-1", got)
	}
}

func testInvalidIntent(t *testing.T, f Factory) {
	a, _ := f(t)
	for name, in := range map[string]outbox.Intent{
		"status sequence 0":  status("o-1", contract.Paid, 0),
		"status bad order":   status("a/b", contract.Paid, 2),
		"timeout after 0":    outbox.ScheduleTimeout("o-1", 0),
		"cancel empty order": outbox.CancelTimeout(""),
		"zero intent":        {},
	} {
		err := a.Commit(ctx(t), "o-1", false, status("o-1", contract.Created, 1), in)
		if !errors.Is(err, contract.ErrInvalid) {
			t.Errorf("%s: commit error %v, want contract.ErrInvalid", name, err)
		}
	}
	if got := pending(t, a.Store); len(got) != 0 {
		t.Errorf("pending after invalid commits: %+v, want none", got)
	}
	if n, _ := a.Own(ctx(t), "o-1"); n != 0 {
		t.Errorf("own rows after invalid commits: %d, want 0", n)
	}
}

func testSecondSchedule(t *testing.T, f Factory) {
	a, b := f(t)
	commit(t, a, "o-1", status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	err := b.Commit(ctx(t), "o-1", false, status("o-1", contract.Paid, 2), outbox.ScheduleTimeoutFor("o-1", 1, 30*time.Minute))
	if !errors.Is(err, outbox.ErrConflict) {
		t.Fatalf("second schedule of o-1's check of Created 1: %v, want ErrConflict", err)
	}
	if got := pending(t, a.Store); len(got) != 2 {
		t.Errorf("pending %d records, want the first commit's 2 (the second wrote nothing)", len(got))
	}
	if n, _ := a.Own(ctx(t), "o-1"); n != 1 {
		t.Errorf("own rows %d, want 1", n)
	}
}

// testCheckPerCreated: each Created has a check; a cancel cancels both.
func testCheckPerCreated(t *testing.T, f Factory) {
	a, b := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	commit(t, b, "o-1", status("o-1", contract.Created, 3), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	if err := b.Commit(ctx(t), "o-1", false, outbox.ScheduleTimeoutFor("o-1", 3, 30*time.Minute)); !errors.Is(err, outbox.ErrConflict) {
		t.Errorf("the second Created's check again: %v, want ErrConflict", err)
	}
	pass(t, relay(a.Store, bus.pub, nil))
	s := bus.scheduled(t)
	if len(s) != 2 || s[0].MessageID != contract.TimeoutMessageID("o-1", 1) || s[1].MessageID != contract.TimeoutMessageID("o-1", 3) {
		t.Fatalf("scheduled %v, want a check per Created", s)
	}
	ts, err := a.Store.Timeouts(ctx(t), "o-1", "o-1")
	if err != nil || len(ts) != 2 || ts[0].Seq > ts[1].Seq {
		t.Fatalf("Timeouts = %+v, %v; want both checks in Seq order", ts, err)
	}
	if ts, _ := a.Store.Timeouts(ctx(t), "o-1", "o"); len(ts) != 0 {
		t.Errorf("Timeouts of an order whose ID is a prefix: %+v, want none", ts)
	}
	commit(t, a, "o-1", status("o-1", contract.Paid, 4), outbox.CancelTimeout("o-1"))
	if res := pass(t, relay(b.Store, bus.pub, nil)); res.Cancelled != 1 {
		t.Errorf("cancel pass %+v, want the cancel done", res)
	}
	if s := bus.scheduled(t); len(s) != 0 {
		t.Errorf("scheduled after the cancel: %v, want both checks cancelled", s)
	}
}

func testCrashAfterCommit(t *testing.T, f Factory) {
	a, b := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	// The producer dies here; another client's relay sends the records.
	res := pass(t, relay(b.Store, bus.pub, nil))
	if res.Sent != 1 || res.Scheduled != 1 {
		t.Errorf("pass %+v, want 1 sent and 1 scheduled", res)
	}
	if got := bus.ids(t); !slices.Equal(got, []string{"o-1:1", "o-1:payment-timeout-1"}) {
		t.Errorf("broker %v, want o-1:1 then o-1:payment-timeout-1", got)
	}
	if s := bus.scheduled(t); len(s) != 1 {
		t.Fatalf("scheduled %v, want the timeout", s)
	}
	tm, err := timeout(t, a.Store, "o-1", "o-1")
	if err != nil || tm.State != outbox.Sent || tm.SequenceNumber != bus.scheduled(t)[0].SequenceNumber {
		t.Errorf("timeout record %+v, %v; want sent with the scheduled message's sequence number %d", tm, err, bus.scheduled(t)[0].SequenceNumber)
	}
	if got := pending(t, a.Store); len(got) != 0 {
		t.Errorf("pending after the pass: %+v", got)
	}
}

// failingMarks is a Store whose Mark fails: the relay dies before marking.
type failingMarks struct{ outbox.Store }

var errCrash = errors.New("outboxtest: the relay's process died")

func (failingMarks) Mark(context.Context, string, []outbox.Mark) error { return errCrash }

// crashBeforeMarks runs a pass of a relay that dies before marking.
func crashBeforeMarks(t *testing.T, s outbox.Store, bus *bus) {
	t.Helper()
	if _, err := relay(failingMarks{s}, bus.pub, nil).Pass(ctx(t)); !errors.Is(err, errCrash) {
		t.Fatalf("pass with failing marks: %v, want the crash", err)
	}
}

func testCrashAfterSend(t *testing.T, f Factory) {
	a, _ := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", status("o-1", contract.Created, 1))
	commit(t, a, "o-2", status("o-2", contract.Created, 1), status("o-2", contract.Paid, 2))
	crashBeforeMarks(t, a.Store, bus)
	sent := bus.ids(t)
	if len(sent) != 3 {
		t.Fatalf("broker after the crash %v, want the 3 messages sent", sent)
	}
	if got := pending(t, a.Store); len(got) != 3 {
		t.Fatalf("pending after the crash: %d records, want all 3 (none marked)", len(got))
	}
	// A new relay resends them: duplicate detection drops every one.
	res := pass(t, relay(a.Store, bus.pub, nil))
	if res.Sent != 3 {
		t.Errorf("second pass %+v, want 3 sent again", res)
	}
	if got := bus.ids(t); !slices.Equal(got, sent) {
		t.Errorf("broker after the resend %v, want %v (duplicates dropped)", got, sent)
	}
	if d := bus.mb.Totals(queue).DuplicatesDropped; d != 3 {
		t.Errorf("duplicates dropped %d, want 3", d)
	}
	if got := pending(t, a.Store); len(got) != 0 {
		t.Errorf("pending after the second pass: %+v", got)
	}
}

func testCrashAfterSchedule(t *testing.T, f Factory) {
	a, b := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", outbox.ScheduleTimeout("o-1", 30*time.Minute))
	crashBeforeMarks(t, a.Store, bus)
	pass(t, relay(a.Store, bus.pub, nil))
	// One live scheduled check: the second schedule was a duplicate.
	if s := bus.scheduled(t); len(s) != 1 || s[0].MessageID != "o-1:payment-timeout" {
		t.Fatalf("scheduled %v, want one o-1:payment-timeout", s)
	}
	tm, err := timeout(t, a.Store, "o-1", "o-1")
	if err != nil || tm.State != outbox.Sent || tm.SequenceNumber == 0 {
		t.Fatalf("timeout record %+v, %v; want sent with a sequence number", tm, err)
	}
	// The number is the dropped copy's: the cancel is done, the check stays.
	commit(t, b, "o-1", status("o-1", contract.Paid, 2), outbox.CancelTimeout("o-1"))
	res := pass(t, relay(b.Store, bus.pub, nil))
	if res.Cancelled != 1 || len(pending(t, a.Store)) != 0 {
		t.Errorf("cancel pass %+v, pending %v; want the cancel done", res, pending(t, a.Store))
	}
}

func testOrdering(t *testing.T, f Factory) {
	a, _ := f(t)
	bus := newBus(t)
	// One order over three commits, one out of order; small passes, batches.
	commit(t, a, "o-1", status("o-1", contract.Created, 1))
	commit(t, a, "o-2", status("o-2", contract.Created, 1))
	commit(t, a, "o-1", status("o-1", contract.Shipped, 3), status("o-1", contract.Paid, 2))
	commit(t, a, "o-2", status("o-2", contract.Paid, 2), status("o-2", contract.Shipped, 3), status("o-2", contract.Delivered, 4))
	commit(t, a, "o-1", status("o-1", contract.Delivered, 4))
	r := outbox.NewRelay(a.Store, publish.New(bus.pub, &publish.Options{Queue: queue, BatchSize: 3}), &outbox.RelayOptions{BatchSize: 2})
	drain(t, r, a.Store)
	byOrder := bus.byOrder(t)
	for _, o := range []string{"o-1", "o-2"} {
		want := []string{o + ":1", o + ":2", o + ":3", o + ":4"}
		if !slices.Equal(byOrder[o], want) {
			t.Errorf("%s's messages in broker order %v, want %v", o, byOrder[o], want)
		}
	}
}

func testScheduleCancelTwoProducers(t *testing.T, f Factory) {
	checkout, payments := f(t)
	bus := newBus(t)
	commit(t, checkout, "o-1", status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	pass(t, relay(checkout.Store, bus.pub, nil))
	if s := bus.scheduled(t); len(s) != 1 {
		t.Fatalf("scheduled %v, want the timeout", s)
	}
	// Payments, another process, finds the number Checkout's relay recorded.
	commit(t, payments, "o-1", status("o-1", contract.Paid, 2), outbox.CancelTimeout("o-1"))
	res := pass(t, relay(payments.Store, bus.pub, nil))
	if res.Sent != 1 || res.Cancelled != 1 {
		t.Errorf("payments' pass %+v, want 1 sent and 1 cancelled", res)
	}
	if s := bus.scheduled(t); len(s) != 0 {
		t.Errorf("scheduled after the cancel: %v, want none", s)
	}
	if got := bus.ids(t); !slices.Equal(got, []string{"o-1:1", "o-1:2"}) {
		t.Errorf("broker %v, want o-1:1 and o-1:2", got)
	}
}

// testTimeoutNamesItsCreated: checks name the Created committed or given.
func testTimeoutNamesItsCreated(t *testing.T, f Factory) {
	a, _ := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", status("o-1", contract.Created, 3), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	commit(t, a, "o-2", outbox.ScheduleTimeoutFor("o-2", 2, 30*time.Minute))
	commit(t, a, "o-3", outbox.ScheduleTimeout("o-3", 30*time.Minute))
	pass(t, relay(a.Store, bus.pub, nil))
	want := map[string]int64{"o-1": 3, "o-2": 2, "o-3": 0}
	s := bus.scheduled(t)
	if len(s) != len(want) {
		t.Fatalf("scheduled %v, want %d checks", s, len(want))
	}
	for _, m := range s {
		seq, ok := want[m.SessionID]
		w, err := publish.TimeoutMessageFor(m.SessionID, seq)
		if !ok || err != nil || m.MessageID != w.MessageID || string(m.Body) != string(w.Body) {
			t.Errorf("scheduled %s %s, want %s %s", m.MessageID, m.Body, w.MessageID, w.Body)
		}
	}
}

// testLongestOrderID: 128-character order ids keep MessageIds within 128.
func testLongestOrderID(t *testing.T, f Factory) {
	order := strings.Repeat("o", contract.MaxIDLength)
	checkout, payments := f(t)
	bus := newBus(t)
	commit(t, checkout, order, status(order, contract.Created, 1), outbox.ScheduleTimeout(order, 30*time.Minute))
	pass(t, relay(checkout.Store, bus.pub, nil))
	s := bus.scheduled(t)
	if len(s) != 1 || s[0].MessageID != contract.TimeoutMessageID(order, 1) {
		t.Fatalf("scheduled %v, want the timeout, MessageId %s", s, contract.TimeoutMessageID(order, 1))
	}
	commit(t, payments, order, status(order, contract.Paid, 2), outbox.CancelTimeout(order))
	if res := pass(t, relay(payments.Store, bus.pub, nil)); res.Sent != 1 || res.Cancelled != 1 {
		t.Errorf("payments' pass %+v, want 1 sent and 1 cancelled", res)
	}
	want := []string{contract.StatusMessageID(order, 1), contract.StatusMessageID(order, 2)}
	if got := bus.ids(t); !slices.Equal(got, want) {
		t.Errorf("broker %v, want %v", got, want)
	}
	for _, m := range bus.messages(t) {
		if m.SessionID != order || len(m.MessageID) > contract.MaxServiceBusIDLength {
			t.Errorf("MessageId %q (%d characters), SessionId %q: want within %d, in the order's session",
				m.MessageID, len(m.MessageID), m.SessionID, contract.MaxServiceBusIDLength)
		}
	}
}

func testCancelWaits(t *testing.T, f Factory) {
	a, b := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	commit(t, b, "o-1", status("o-1", contract.Paid, 2), outbox.CancelTimeout("o-1"))
	// A relay meeting the cancel before its schedule leaves it pending.
	res := pass(t, relay(&pendingTimeout{Store: b.Store}, bus.pub, nil))
	if res.Waiting != 1 || res.Cancelled != 0 || res.Sent != 2 {
		t.Errorf("pass before the schedule is sent: %+v, want 2 sent and the cancel waiting", res)
	}
	if got := len(pending(t, a.Store)); got != 2 {
		t.Errorf("pending %d, want the schedule and the cancel", got)
	}
	drain(t, relay(b.Store, bus.pub, nil), b.Store)
	if s := bus.scheduled(t); len(s) != 0 {
		t.Errorf("scheduled after the cancel: %v, want none", s)
	}
}

// pendingTimeout hides schedule records from Pending.
type pendingTimeout struct{ outbox.Store }

func (s *pendingTimeout) Pending(ctx context.Context, max int) ([]outbox.Record, error) {
	all, err := s.Store.Pending(ctx, max)
	var out []outbox.Record
	for _, r := range all {
		if r.Kind != outbox.KindSchedule {
			out = append(out, r)
		}
	}
	return out, err
}

func testCancelWithoutSchedule(t *testing.T, f Factory) {
	a, _ := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", outbox.CancelTimeout("o-1"))
	res := pass(t, relay(a.Store, bus.pub, nil))
	if res.Cancelled != 1 || len(pending(t, a.Store)) != 0 || len(bus.messages(t)) != 0 {
		t.Errorf("cancel of a timeout never scheduled: %+v, pending %v, broker %v; want it done, nothing sent",
			res, pending(t, a.Store), bus.ids(t))
	}
}

// killer kills the relay after the kill-th send or batch: sent, not marked.
type killer struct {
	publish.Sender
	kill   int
	calls  int
	mu     sync.Mutex
	cancel context.CancelFunc
}

func (k *killer) after(err error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	if k.calls == k.kill {
		k.cancel()
	}
	return err
}

func (k *killer) Send(ctx context.Context, q string, m publish.Message) error {
	return k.after(k.Sender.Send(ctx, q, m))
}

func (k *killer) SendBatch(ctx context.Context, q string, ms []publish.Message) error {
	return k.after(k.Sender.(publish.BatchSender).SendBatch(ctx, q, ms))
}

func testKilledMidBatch(t *testing.T, f Factory) {
	a, _ := f(t)
	bus := newBus(t)
	const orders = 12
	var want []string
	for i := range orders {
		o := fmt.Sprintf("o-%02d", i)
		commit(t, a, o, status(o, contract.Created, 1), status(o, contract.Paid, 2), status(o, contract.Shipped, 3))
		want = append(want, o+":1", o+":2", o+":3")
	}
	kctx, cancel := context.WithCancel(ctx(t))
	k := &killer{Sender: bus.pub, kill: 2, cancel: cancel}
	// Batches of 10 messages: the kill comes after 20 of 36 were sent.
	_, err := relay(a.Store, k, nil).Pass(kctx)
	if err == nil {
		t.Fatal("the killed pass reported no error")
	}
	if n := len(bus.ids(t)); n != 20 {
		t.Fatalf("sent before the kill: %d, want 20 (two batches)", n)
	}
	// Killed before marking: everything is still pending.
	if left := len(pending(t, a.Store)); left != 3*orders {
		t.Errorf("pending after the kill: %d, want all %d (the dead relay marked nothing)", left, 3*orders)
	}
	drain(t, relay(a.Store, bus.pub, nil), a.Store)
	got := bus.ids(t)
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("broker after the restart has %d messages %v, want each of the %d once", len(got), got, len(want))
	}
	byOrder := bus.byOrder(t)
	for o, ids := range byOrder {
		if !slices.Equal(ids, []string{o + ":1", o + ":2", o + ":3"}) {
			t.Errorf("%s in broker order %v, want sequence order", o, ids)
		}
	}
}

// refusing refuses one MessageId for good, as for a too-large message.
type refusing struct {
	publish.Sender
	id string
}

func (r *refusing) Send(ctx context.Context, q string, m publish.Message) error {
	if m.MessageID == r.id {
		return fmt.Errorf("outboxtest: message %s refused: %w", m.MessageID, publish.ErrRefused)
	}
	return r.Sender.Send(ctx, q, m)
}

func testParked(t *testing.T, f Factory) {
	a, _ := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", status("o-1", contract.Created, 1), status("o-1", contract.Paid, 2))
	commit(t, a, "o-2", status("o-2", contract.Created, 1))
	res := pass(t, relay(a.Store, &refusing{Sender: bus.pub, id: "o-1:2"}, nil))
	if res.Parked != 1 || res.Sent != 2 {
		t.Errorf("pass %+v, want 2 sent, 1 parked", res)
	}
	if got := bus.ids(t); !slices.Equal(got, []string{"o-1:1", "o-2:1"}) {
		t.Errorf("broker %v, want o-1:1 and o-2:1", got)
	}
	if got := pending(t, a.Store); len(got) != 0 {
		t.Errorf("pending %+v, want none (the refused one parked)", got)
	}
	if res := pass(t, relay(a.Store, bus.pub, nil)); res.Read != 0 {
		t.Errorf("a later pass read %d records, want the parked one left alone", res.Read)
	}
}

func testPurge(t *testing.T, f Factory) {
	a, _ := f(t)
	bus := newBus(t)
	commit(t, a, "o-1", status("o-1", contract.Created, 1), outbox.ScheduleTimeout("o-1", 30*time.Minute))
	commit(t, a, "o-2", status("o-2", contract.Created, 1))
	commit(t, a, "o-3", status("o-3", contract.Created, 1))
	pass(t, relay(a.Store, bus.pub, nil))                // sends all three partitions
	commit(t, a, "o-2", status("o-2", contract.Paid, 2)) // pending: must stay
	if got, err := a.Store.Purge(ctx(t), time.Now().Add(-time.Hour), 100); err != nil || got != 0 {
		t.Errorf("purge of records sent before an hour ago: %d, %v; want 0 (all are newer)", got, err)
	}
	now := time.Now()
	r := outbox.NewRelay(a.Store, publish.New(bus.pub, &publish.Options{Queue: queue}),
		&outbox.RelayOptions{Retention: time.Hour, BatchSize: 2, Now: func() time.Time { return now.Add(2 * time.Hour) }})
	n, err := r.Purge(ctx(t))
	if err != nil || n != 4 {
		t.Errorf("purge two hours later: %d, %v; want the 4 sent records", n, err)
	}
	if got := pending(t, a.Store); len(got) != 1 || got[0].Message.MessageID != "o-2:2" {
		t.Errorf("pending after the purge %+v, want o-2:2 alone", got)
	}
	if _, err := timeout(t, a.Store, "o-1", "o-1"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("the purged timeout: %v, want ErrNotFound", err)
	}
	// The index row went with its record: the order can be scheduled again.
	commit(t, a, "o-1", outbox.ScheduleTimeout("o-1", 30*time.Minute))
}

func testMark(t *testing.T, f Factory) {
	a, b := f(t)
	commit(t, a, "o-1", outbox.ScheduleTimeout("o-1", 30*time.Minute), status("o-1", contract.Created, 1))
	recs := pending(t, a.Store)
	if len(recs) != 2 {
		t.Fatalf("pending %d, want 2", len(recs))
	}
	sched := recs[0]
	now := time.Now().UTC()
	// Another relay marks it first; a mark on the stale version fails.
	if err := b.Store.Mark(ctx(t), "o-1", []outbox.Mark{{ID: sched.ID, Version: sched.Version, State: outbox.Sent, DoneAt: now, SequenceNumber: 7}}); err != nil {
		t.Fatalf("first mark: %v", err)
	}
	err := a.Store.Mark(ctx(t), "o-1", []outbox.Mark{{ID: sched.ID, Version: sched.Version, State: outbox.Sent, DoneAt: now, SequenceNumber: 8}})
	if !errors.Is(err, outbox.ErrConflict) {
		t.Errorf("mark on a stale version: %v, want ErrConflict", err)
	}
	if tm, err := timeout(t, a.Store, "o-1", "o-1"); err != nil || tm.SequenceNumber != 7 || tm.State != outbox.Sent {
		t.Errorf("timeout %+v, %v; want sent with the first mark's 7", tm, err)
	}
	// All or none: a batch with a stale version changes nothing.
	err = a.Store.Mark(ctx(t), "o-1", []outbox.Mark{{ID: recs[1].ID, State: outbox.Sent, DoneAt: now}, {ID: sched.ID, Version: sched.Version, State: outbox.Sent, DoneAt: now}})
	if !errors.Is(err, outbox.ErrConflict) {
		t.Errorf("batch with a stale mark: %v, want ErrConflict", err)
	}
	if got := pending(t, a.Store); len(got) != 1 || got[0].ID != recs[1].ID {
		t.Errorf("pending %+v after a failed batch, want the status record still pending", got)
	}
	if err := a.Store.Mark(ctx(t), "o-1", []outbox.Mark{{ID: "no-such-record", State: outbox.Sent, DoneAt: now}}); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("mark of an unknown record: %v, want ErrNotFound", err)
	}
	if err := a.Store.Mark(ctx(t), "o-1", []outbox.Mark{{ID: recs[1].ID, State: outbox.Failed, DoneAt: now, Error: "refused"}}); err != nil {
		t.Fatalf("mark failed: %v", err)
	}
	if got := pending(t, a.Store); len(got) != 0 {
		t.Errorf("pending %+v after marking failed, want none", got)
	}
}

func testConcurrentCommits(t *testing.T, f Factory) {
	a, b := f(t)
	bus := newBus(t)
	const each = 6
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for w, be := range []Backend{a, b} {
		wg.Go(func() {
			for i := range each {
				seq := int64(1 + w*each + i)
				if err := be.Commit(ctx(t), "o-1", false, status("o-1", contract.Paid, seq)); err != nil {
					errs <- fmt.Errorf("producer %d seq %d: %w", w, seq, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	recs := pending(t, a.Store)
	if len(recs) != 2*each {
		t.Fatalf("pending %d records, want %d", len(recs), 2*each)
	}
	seqs := map[int64]bool{}
	for _, r := range recs {
		if seqs[r.Seq] {
			t.Errorf("Seq %d twice in one partition", r.Seq)
		}
		seqs[r.Seq] = true
	}
	if n, _ := a.Own(ctx(t), "o-1"); n != 2*each {
		t.Errorf("own rows %d, want %d", n, 2*each)
	}
	drain(t, relay(a.Store, bus.pub, nil), a.Store)
	if n := len(bus.ids(t)); n != 2*each {
		t.Errorf("broker has %d messages, want %d", n, 2*each)
	}
}
