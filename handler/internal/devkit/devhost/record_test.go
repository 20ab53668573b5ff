package devhost

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
)

// recorderRig is a recorder over a membroker with a session queue whose
// messages are dead-lettered at their first failed delivery, served by the
// loopback server as the development host serves it, and a loopback client
// of it.
type recorderRig struct {
	clock  *clock.ScaledClock
	broker *membroker.Broker
	rec    *recorder
	client *loopback.Client
}

const (
	rigQueue  = "order-status"
	rigPoison = "order-status-poison"
	rigLock   = time.Minute
)

func newRecorderRig(t *testing.T) *recorderRig {
	t.Helper()
	clk := clock.Scaled(1)
	b := membroker.New(&membroker.Options{Clock: clk})
	o := membroker.DefaultQueueOptions()
	o.RequiresSession, o.MaxDeliveryCount, o.LockDuration = true, 1, rigLock
	if err := b.CreateQueue(rigQueue, o); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateQueue(rigPoison, membroker.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(b, rigPoison)
	srv := httptest.NewServer(loopback.NewServer(rec))
	t.Cleanup(srv.Close)
	cl, err := loopback.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	return &recorderRig{clock: clk, broker: b, rec: rec, client: cl}
}

// deadLetter sends a message in session and fails its one delivery, as
// the host does when the handler fails it: the broker dead-letters it with
// MaxDeliveryCountExceeded.
func (g *recorderRig) deadLetter(t *testing.T, ctx context.Context, session, id string) {
	t.Helper()
	if err := g.broker.Send(ctx, rigQueue, broker.Message{MessageID: id, SessionID: session, Subject: "OrderStatusChanged", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	s, err := g.broker.AcceptNextSession(ctx, rigQueue)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Receive(ctx, 0)
	if err != nil || m == nil {
		t.Fatalf("receive %s: got %v, %v", id, m, err)
	}
	if err := s.Abandon(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// receiveDLQ receives exactly one message from the dead-letter subqueue
// through the loopback client.
func (g *recorderRig) receiveDLQ(t *testing.T, ctx context.Context) broker.Received {
	t.Helper()
	got, err := g.client.Receive(ctx, broker.Source{Queue: rigQueue, DeadLetter: true}, 10, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive from the dead-letter queue: got %d messages, %v; want 1", len(got), err)
	}
	return got[0]
}

// TestRecorderDeadLetterCompletedThroughLoopback: the loopback settle
// request carries only the lock token and sequence number, yet the
// message taken out of the dead-letter queue is recorded with its
// MessageId, session and reason.
func TestRecorderDeadLetterCompletedThroughLoopback(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	g := newRecorderRig(t)
	g.deadLetter(t, ctx, "o-2", "o-2:1")
	dlq := broker.Source{Queue: rigQueue, DeadLetter: true}

	// A first receiver loses its lock; the second completes.
	first := g.receiveDLQ(t, ctx)
	g.clock.Advance(rigLock + time.Second)
	second := g.receiveDLQ(t, ctx)
	if second.LockToken == first.LockToken {
		t.Fatalf("the message was handed out again under the same lock token %q", first.LockToken)
	}
	if err := g.client.Complete(ctx, dlq, first); !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("complete under the expired lock: got %v, want ErrLockLost", err)
	}
	if err := g.client.Complete(ctx, dlq, second); err != nil {
		t.Fatalf("complete: %v", err)
	}

	_, removed := g.rec.snapshot()
	want := Entry{MessageID: "o-2:1", Reason: broker.ReasonMaxDeliveryCountExceeded, Queue: rigQueue, SessionID: "o-2", DeliveryCount: second.DeliveryCount}
	if len(removed) != 1 || removed[0] != want {
		t.Errorf("recorded as taken out of the dead-letter queue: got %+v, want [%+v]", removed, want)
	}
	g.rec.mu.Lock()
	left := len(g.rec.dlqLocked)
	g.rec.mu.Unlock()
	if left != 0 {
		t.Errorf("the recorder still holds %d handed-out dead-lettered messages, want 0 once all are settled", left)
	}
}

// TestRecorderAbandonedDeadLetterNotRecorded: a dead-lettered message
// abandoned through the loopback client stays in the dead-letter queue and
// is not recorded as taken out; completed afterwards, it is, once.
func TestRecorderAbandonedDeadLetterNotRecorded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	g := newRecorderRig(t)
	g.deadLetter(t, ctx, "o-3", "o-3:1")
	dlq := broker.Source{Queue: rigQueue, DeadLetter: true}

	if err := g.client.Abandon(ctx, dlq, g.receiveDLQ(t, ctx)); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	if _, removed := g.rec.snapshot(); len(removed) != 0 {
		t.Fatalf("after an abandon: got %+v recorded as taken out, want none", removed)
	}
	if err := g.client.Complete(ctx, dlq, g.receiveDLQ(t, ctx)); err != nil {
		t.Fatalf("complete: %v", err)
	}
	_, removed := g.rec.snapshot()
	if len(removed) != 1 || removed[0].MessageID != "o-3:1" || removed[0].SessionID != "o-3" || removed[0].Reason != broker.ReasonMaxDeliveryCountExceeded {
		t.Errorf("recorded as taken out: got %+v, want o-3:1 of session o-3, MaxDeliveryCountExceeded", removed)
	}
}
