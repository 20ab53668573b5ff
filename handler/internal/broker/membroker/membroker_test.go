package membroker_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokertest"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
)

const (
	orders = "order-status"
	poison = "order-status-poison"
)

// newBroker returns a broker on clk with the two product queues using o
// (sessions on orders).
func newBroker(t *testing.T, clk clock.Clock, o membroker.QueueOptions) *membroker.Broker {
	t.Helper()
	b := membroker.New(&membroker.Options{Clock: clk})
	so := o
	so.RequiresSession = true
	if err := b.CreateQueue(orders, so); err != nil {
		t.Fatalf("CreateQueue %s: %v", orders, err)
	}
	if err := b.CreateQueue(poison, o); err != nil {
		t.Fatalf("CreateQueue %s: %v", poison, err)
	}
	return b
}

func TestConformance(t *testing.T) {
	clk := clock.Scaled(1000) // one broker minute is 60 ms
	o := membroker.DefaultQueueOptions()
	o.LockDuration = 10 * time.Minute
	brokertest.Run(t, brokertest.Harness{
		New:              func(t *testing.T) broker.Broker { return newBroker(t, clk, o) },
		Queue:            poison,
		SessionQueue:     orders,
		FreshQueues:      true,
		FastClock:        true,
		Clock:            clk,
		LockDuration:     o.LockDuration,
		MaxDeliveryCount: int(o.MaxDeliveryCount),
		Wait:             time.Minute,
		ShortWait:        10 * time.Second,
		ScheduleDelay:    5 * time.Minute,
		// A dropped duplicate's number names nothing stored.
		DuplicateCancelNotFound: true,
	})
}

// fixture is a broker with helpers that fail the test on error.
type fixture struct {
	t   *testing.T
	b   *membroker.Broker
	clk clock.Clock
	ctx context.Context
}

// newFixture makes a broker whose clock runs factor times faster than real
// time; lock is the queues' lock duration.
func newFixture(t *testing.T, factor float64, lock time.Duration) *fixture {
	t.Helper()
	clk := clock.Scaled(factor)
	o := membroker.DefaultQueueOptions()
	o.LockDuration = lock
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &fixture{t: t, b: newBroker(t, clk, o), clk: clk, ctx: ctx}
}

func (f *fixture) send(session, id string) {
	f.t.Helper()
	if err := f.b.Send(f.ctx, orders, broker.Message{MessageID: id, SessionID: session, Body: []byte(id)}); err != nil {
		f.t.Fatalf("Send %s/%s: %v", session, id, err)
	}
}

func (f *fixture) accept() *membroker.Session {
	f.t.Helper()
	s, err := f.b.AcceptNextSession(f.ctx, orders)
	if err != nil {
		f.t.Fatalf("AcceptNextSession: %v", err)
	}
	return s
}

// receive returns the session's next message, failing if none comes within
// an hour of broker time.
func (f *fixture) receive(s *membroker.Session) *broker.Received {
	f.t.Helper()
	m, err := s.Receive(f.ctx, time.Hour)
	if err != nil {
		f.t.Fatalf("Receive session %s: %v", s.ID(), err)
	}
	if m == nil {
		f.t.Fatalf("Receive session %s: nothing, want a message", s.ID())
	}
	return m
}

func (f *fixture) complete(s *membroker.Session, m *broker.Received) {
	f.t.Helper()
	if err := s.Complete(f.ctx, m); err != nil {
		f.t.Fatalf("Complete %s: %v", m.MessageID, err)
	}
}

func (f *fixture) sleep(d time.Duration) {
	f.t.Helper()
	if err := clock.Sleep(f.ctx, f.clk, d); err != nil {
		f.t.Fatal(err)
	}
}

func TestSessionFIFOAndOldestFirst(t *testing.T) {
	f := newFixture(t, 1000, 24*time.Hour)
	for _, m := range [][2]string{{"b", "b1"}, {"a", "a1"}, {"b", "b2"}, {"a", "a2"}, {"b", "b3"}} {
		f.send(m[0], m[1])
	}
	for _, want := range []struct {
		session string
		ids     []string
	}{{"b", []string{"b1", "b2", "b3"}}, {"a", []string{"a1", "a2"}}} {
		s := f.accept()
		if s.ID() != want.session {
			t.Fatalf("accepted session %q, want %q (oldest first message)", s.ID(), want.session)
		}
		for _, id := range want.ids {
			m := f.receive(s)
			if m.MessageID != id || m.SessionID != want.session || m.DeliveryCount != 1 {
				t.Errorf("got %s (session %s, delivery %d), want %s (session %s, delivery 1)",
					m.MessageID, m.SessionID, m.DeliveryCount, id, want.session)
			}
			f.complete(s, m)
		}
		if m, err := s.Receive(f.ctx, time.Minute); m != nil || err != nil {
			t.Errorf("Receive on a drained session = %v, %v; want nil, nil", m, err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if st := f.b.Stats(orders); st.Active+st.Locked != 0 {
		t.Errorf("queue not idle after everything was completed: %+v", st)
	}
}

func TestSessionOneHolder(t *testing.T) {
	f := newFixture(t, 1000, 24*time.Hour)
	f.send("o-1", "o-1:1")
	s1 := f.accept()
	m := f.receive(s1)
	f.send("o-1", "o-1:2")

	// While s1 holds the session, nobody else gets it.
	ctx, cancel := context.WithTimeout(f.ctx, 50*time.Millisecond)
	defer cancel()
	if s, err := f.b.AcceptNextSession(ctx, orders); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second AcceptNextSession while held = %v, %v; want context.DeadlineExceeded", s, err)
	}

	type result struct {
		s   *membroker.Session
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := f.b.AcceptNextSession(f.ctx, orders)
		got <- result{s, err}
	}()
	f.complete(s1, m)
	if err := s1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("AcceptNextSession after Close: %v", r.err)
	}
	if r.s.ID() != "o-1" {
		t.Errorf("accepted %q, want o-1", r.s.ID())
	}
	if m := f.receive(r.s); m.MessageID != "o-1:2" || m.DeliveryCount != 1 {
		t.Errorf("got %s delivery %d, want o-1:2 delivery 1", m.MessageID, m.DeliveryCount)
	}
	if _, err := s1.Receive(f.ctx, 0); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("Receive on a closed session = %v, want ErrLockLost", err)
	}
}

func TestSessionLockExpiryRedelivers(t *testing.T) {
	f := newFixture(t, 1000, time.Minute) // the session lock lasts 60 ms
	f.send("o-1", "o-1:1")
	f.send("o-1", "o-1:2")
	s1 := f.accept()
	m := f.receive(s1)
	if m.MessageID != "o-1:1" || m.DeliveryCount != 1 {
		t.Fatalf("got %s delivery %d, want o-1:1 delivery 1", m.MessageID, m.DeliveryCount)
	}
	until := s1.LockedUntil()

	// The handler is "still running"; the lock expires and another
	// acceptor gets the session and the in-flight message again.
	s2 := f.accept()
	if s2.ID() != "o-1" {
		t.Fatalf("accepted %q, want o-1", s2.ID())
	}
	if now := f.clk.Now(); now.Before(until) {
		t.Errorf("session re-accepted at %v, before the first lock's expiry %v", now, until)
	}
	again := f.receive(s2)
	if again.MessageID != "o-1:1" || again.DeliveryCount != 2 {
		t.Errorf("redelivered %s delivery %d, want o-1:1 delivery 2", again.MessageID, again.DeliveryCount)
	}
	if err := s1.Complete(f.ctx, m); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("late Complete by the first holder = %v, want ErrLockLost", err)
	}
	if err := s1.Abandon(f.ctx, m); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("late Abandon by the first holder = %v, want ErrLockLost", err)
	}
	if err := s1.RenewLock(f.ctx); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("RenewLock after expiry = %v, want ErrLockLost", err)
	}
	if err := s2.RenewLock(f.ctx); err != nil {
		t.Fatalf("RenewLock by the new holder: %v", err)
	}
	f.complete(s2, again) // the late Complete above changed nothing
	if next := f.receive(s2); next.MessageID != "o-1:2" {
		t.Errorf("next message %s, want o-1:2", next.MessageID)
	}
}

func TestSessionReceiveSkipsInFlight(t *testing.T) {
	f := newFixture(t, 1000, 24*time.Hour)
	f.send("o-1", "o-1:1")
	f.send("o-1", "o-1:2")
	s := f.accept()
	first, second := f.receive(s), f.receive(s)
	if first.MessageID != "o-1:1" || second.MessageID != "o-1:2" {
		t.Errorf("two receives without settling = %s, %s; want o-1:1, o-1:2", first.MessageID, second.MessageID)
	}
	if m, err := s.Receive(f.ctx, time.Minute); m != nil || err != nil {
		t.Errorf("third receive = %v, %v; want nil, nil", m, err)
	}
}

func TestSessionAbandonRedeliversInOrder(t *testing.T) {
	f := newFixture(t, 1000, 24*time.Hour)
	f.send("o-1", "o-1:1")
	f.send("o-1", "o-1:2")
	s := f.accept()
	for want := int32(1); want <= 4; want++ {
		m := f.receive(s)
		if m.MessageID != "o-1:1" || m.DeliveryCount != want {
			t.Fatalf("got %s delivery %d, want o-1:1 delivery %d", m.MessageID, m.DeliveryCount, want)
		}
		if err := s.Abandon(f.ctx, m); err != nil {
			t.Fatalf("Abandon: %v", err)
		}
	}
	// The fifth failure dead-letters it and the session moves on.
	m := f.receive(s)
	if err := s.Abandon(f.ctx, m); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	if next := f.receive(s); next.MessageID != "o-1:2" || next.DeliveryCount != 1 {
		t.Errorf("after dead-lettering got %s delivery %d, want o-1:2 delivery 1", next.MessageID, next.DeliveryCount)
	}
	dlq := broker.Source{Queue: orders, DeadLetter: true}
	got, err := f.b.Receive(f.ctx, dlq, 10, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("Receive %s = %d messages, %v; want 1", dlq, len(got), err)
	}
	if d := got[0]; d.MessageID != "o-1:1" || d.SessionID != "o-1" || d.DeadLetterReason != broker.ReasonMaxDeliveryCountExceeded {
		t.Errorf("dead-lettered %s session %s reason %q, want o-1:1 session o-1 reason %s",
			d.MessageID, d.SessionID, d.DeadLetterReason, broker.ReasonMaxDeliveryCountExceeded)
	}
}

func TestSessionCloseRedeliversUnsettled(t *testing.T) {
	f := newFixture(t, 1000, 24*time.Hour)
	f.send("o-1", "o-1:1")
	s := f.accept()
	m := f.receive(s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Complete(f.ctx, m); !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("Complete after Close = %v, want ErrLockLost", err)
	}
	s2 := f.accept()
	if again := f.receive(s2); again.MessageID != "o-1:1" || again.DeliveryCount != 2 {
		t.Errorf("got %s delivery %d, want o-1:1 delivery 2", again.MessageID, again.DeliveryCount)
	}
}

func TestSessionRenewLockExtends(t *testing.T) {
	f := newFixture(t, 1000, 10*time.Minute)
	f.send("o-1", "o-1:1")
	s := f.accept()
	before := s.LockedUntil()
	f.sleep(6 * time.Minute)
	if err := s.RenewLock(f.ctx); err != nil {
		t.Fatalf("RenewLock: %v", err)
	}
	if after := s.LockedUntil(); !after.After(before) {
		t.Errorf("LockedUntil after renew = %v, want later than %v", after, before)
	}
	f.sleep(6 * time.Minute) // past the first expiry, before the renewed one
	if m := f.receive(s); m.MessageID != "o-1:1" {
		t.Errorf("got %s, want o-1:1", m.MessageID)
	}
}

func TestAcceptNextSessionHonoursContext(t *testing.T) {
	f := newFixture(t, 1000, time.Minute)
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	if _, err := f.b.AcceptNextSession(ctx, orders); !errors.Is(err, context.Canceled) {
		t.Errorf("AcceptNextSession on an empty queue with a cancelled ctx = %v, want context.Canceled", err)
	}
	if _, err := f.b.AcceptNextSession(f.ctx, poison); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("AcceptNextSession on a queue without sessions = %v, want ErrInvalid", err)
	}
	if _, err := f.b.AcceptNextSession(f.ctx, "nope"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("AcceptNextSession on an unknown queue = %v, want ErrNotFound", err)
	}
}

func TestTTLExpiry(t *testing.T) {
	f := newFixture(t, 1000, 24*time.Hour)
	if err := f.b.Send(f.ctx, orders, broker.Message{MessageID: "old", SessionID: "o-1", TimeToLive: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Send(f.ctx, orders, broker.Message{MessageID: "young", SessionID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	f.sleep(2 * time.Minute)
	if st := f.b.Stats(orders); st.DeadLettered != 1 || st.Active != 1 {
		t.Errorf("Stats = %+v, want 1 active and 1 dead-lettered", st)
	}
	s := f.accept()
	if m := f.receive(s); m.MessageID != "young" {
		t.Errorf("session delivered %s, want young (old expired)", m.MessageID)
	}
	got, err := f.b.Receive(f.ctx, broker.Source{Queue: orders, DeadLetter: true}, 10, 0)
	if err != nil || len(got) != 1 || got[0].MessageID != "old" || got[0].DeadLetterReason != broker.ReasonTTLExpired {
		t.Fatalf("dead-letter queue = %+v, %v; want old with reason %s", got, err, broker.ReasonTTLExpired)
	}

	// A queue without dead-lettering on expiry drops expired messages.
	o := membroker.DefaultQueueOptions()
	o.DeadLetterOnExpiration = false
	if err := f.b.CreateQueue("dropping", o); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Send(f.ctx, "dropping", broker.Message{MessageID: "x", TimeToLive: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.sleep(2 * time.Minute)
	if st := f.b.Stats("dropping"); st != (membroker.QueueStats{}) {
		t.Errorf("Stats after expiry without dead-lettering = %+v, want all zero", st)
	}
}

func TestTTLWaitsForLock(t *testing.T) {
	f := newFixture(t, 1000, 10*time.Minute)
	if err := f.b.Send(f.ctx, orders, broker.Message{MessageID: "m", SessionID: "s", TimeToLive: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s := f.accept()
	m := f.receive(s)
	f.sleep(2 * time.Minute) // expires while locked: the holder may still complete it
	f.complete(s, m)
	if st := f.b.Stats(orders); st.DeadLettered != 0 {
		t.Errorf("Stats = %+v, want nothing dead-lettered", st)
	}
}

// TestScheduledPaymentTimeout runs the product's 30-minute payment timeout
// on a clock 10 000 times faster than real time: it must arrive after the
// order's other messages, at or after its scheduled time, and a cancelled
// one never.
func TestScheduledPaymentTimeout(t *testing.T) {
	f := newFixture(t, 10000, 24*time.Hour)
	created := f.clk.Now()
	at := created.Add(30 * time.Minute)
	timeout := broker.Message{MessageID: "o-1:payment-timeout", SessionID: "o-1", Subject: "PaymentTimeoutCheck"}
	if _, err := f.b.Schedule(f.ctx, orders, timeout, at); err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	other := timeout
	other.MessageID, other.SessionID = "o-2:payment-timeout", "o-2"
	seq, err := f.b.Schedule(f.ctx, orders, other, at)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	if err := f.b.CancelScheduled(f.ctx, orders, seq); err != nil {
		t.Fatalf("CancelScheduled: %v", err)
	}
	f.send("o-1", "o-1:1")
	if st := f.b.Stats(orders); st.Scheduled != 1 || st.Active != 1 {
		t.Errorf("Stats = %+v, want 1 scheduled, 1 active", st)
	}

	s := f.accept()
	var got []string
	for range 2 {
		m := f.receive(s)
		got = append(got, m.MessageID)
		if m.Subject == "PaymentTimeoutCheck" {
			if now := f.clk.Now(); now.Before(at) {
				t.Errorf("timeout delivered at %v, before %v", now, at)
			}
			if !m.EnqueuedTime.Equal(at) {
				t.Errorf("timeout EnqueuedTime = %v, want the scheduled time %v", m.EnqueuedTime, at)
			}
		}
		f.complete(s, m)
	}
	if want := []string{"o-1:1", "o-1:payment-timeout"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("delivery order %v, want %v", got, want)
	}
	if st := f.b.Stats(orders); st != (membroker.QueueStats{LockedSessions: 1}) {
		t.Errorf("Stats at the end = %+v, want only the held session", st)
	}
}

func TestScheduleDuplicateGetsDeadNumber(t *testing.T) {
	f := newFixture(t, 1000, time.Hour)
	m := broker.Message{MessageID: "o-1:payment-timeout", SessionID: "o-1"}
	at := f.clk.Now().Add(time.Hour)
	first, err := f.b.Schedule(f.ctx, orders, m, at)
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.b.Schedule(f.ctx, orders, m, at)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatalf("duplicate schedule returned the first number %d, want a new one", first)
	}
	if err := f.b.CancelScheduled(f.ctx, orders, second); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("cancel of the dropped duplicate = %v, want ErrNotFound", err)
	}
	if err := f.b.CancelScheduled(f.ctx, orders, first); err != nil {
		t.Errorf("cancel of the original = %v, want nil", err)
	}
}

func TestDuplicateWindowEnds(t *testing.T) {
	f := newFixture(t, 1000, time.Hour)
	f.send("o-1", "o-1:1")
	f.sleep(5 * time.Minute)
	f.send("o-1", "o-1:1") // inside the 10-minute window: dropped
	f.sleep(6 * time.Minute)
	f.send("o-1", "o-1:1") // 11 minutes after the first: accepted
	if st := f.b.Stats(orders); st.Active != 2 {
		t.Errorf("Stats = %+v, want 2 active (the first and the one after the window)", st)
	}
}

func TestCreateQueue(t *testing.T) {
	b := membroker.New(nil)
	o := membroker.DefaultQueueOptions()
	if err := b.CreateQueue("q", o); err != nil {
		t.Fatal(err)
	}
	zero := o
	zero.LockDuration, zero.MaxDeliveryCount = 0, 0 // defaults: the same options
	tests := []struct {
		name string
		q    string
		o    membroker.QueueOptions
		want error
	}{
		{"same options", "q", o, nil},
		{"zero means default", "q", zero, nil},
		{"other options", "q", membroker.QueueOptions{RequiresSession: true}, broker.ErrInvalid},
		{"empty name", "", o, broker.ErrInvalid},
		{"subqueue name", "q/$DeadLetterQueue", o, broker.ErrInvalid},
		{"negative", "r", membroker.QueueOptions{LockDuration: -1}, broker.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := b.CreateQueue(tc.q, tc.o); !errors.Is(err, tc.want) {
				t.Errorf("CreateQueue(%q) = %v, want %v", tc.q, err, tc.want)
			}
		})
	}
}

func TestMessageTooLarge(t *testing.T) {
	f := newFixture(t, 1, time.Minute)
	big := broker.Message{MessageID: "big", Body: make([]byte, membroker.DefaultMaxMessageSize+1)}
	if err := f.b.Send(f.ctx, poison, big); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("Send of %d bytes = %v, want ErrInvalid", len(big.Body), err)
	}
}

func TestIDLengthLimit(t *testing.T) {
	f := newFixture(t, 1, time.Minute)
	long := strings.Repeat("é", membroker.MaxIDLength+1) // counted in characters, not bytes
	limit := strings.Repeat("é", membroker.MaxIDLength)
	// Service Bus counts .NET characters: an emoji (outside the Basic
	// Multilingual Plane) is two.
	emoji := strings.Repeat("\U0001F4E6", membroker.MaxIDLength/2)
	tests := []struct {
		name  string
		queue string
		msg   broker.Message
		want  error
	}{
		{"MessageId at the limit", orders, broker.Message{MessageID: limit, SessionID: "s"}, nil},
		{"SessionId at the limit", orders, broker.Message{MessageID: "m1", SessionID: limit}, nil},
		{"MessageId too long", poison, broker.Message{MessageID: long}, broker.ErrInvalid},
		{"SessionId too long", orders, broker.Message{MessageID: "m2", SessionID: long}, broker.ErrInvalid},
		{"emoji MessageId at the limit", poison, broker.Message{MessageID: emoji}, nil},
		{"emoji MessageId too long", poison, broker.Message{MessageID: emoji + "x"}, broker.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := f.b.Send(f.ctx, tt.queue, tt.msg); !errors.Is(err, tt.want) {
				t.Errorf("Send = %v, want %v", err, tt.want)
			}
			if _, err := f.b.Schedule(f.ctx, tt.queue, tt.msg, f.clk.Now().Add(time.Hour)); !errors.Is(err, tt.want) {
				t.Errorf("Schedule = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNextDue(t *testing.T) {
	clk := clock.Scaled(1) // real time: only AdvanceTo makes an hour pass
	o := membroker.DefaultQueueOptions()
	o.LockDuration = 10 * time.Minute
	b := newBroker(t, clk, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if at, ok := b.NextDue(orders); ok {
		t.Errorf("NextDue of an empty queue = %v, true; want false", at)
	}
	if _, ok := b.NextDue("nope"); ok {
		t.Error("NextDue of an unknown queue = true, want false")
	}
	start := clk.Now()
	late, soon := start.Add(2*time.Hour), start.Add(30*time.Minute)
	if _, err := b.Schedule(ctx, orders, broker.Message{MessageID: "late", SessionID: "o-1"}, late); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Schedule(ctx, orders, broker.Message{MessageID: "soon", SessionID: "o-2"}, soon); err != nil {
		t.Fatal(err)
	}
	if at, ok := b.NextDue(orders); !ok || !at.Equal(soon) {
		t.Errorf("NextDue with two scheduled = %v, %v; want %v", at, ok, soon)
	}
	// An unlocked message's expiry counts; a locked one's does not.
	if err := b.Send(ctx, poison, broker.Message{MessageID: "p", TimeToLive: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if at, ok := b.NextDue(poison); !ok || at.Sub(start) < time.Minute || at.Sub(start) > 2*time.Minute {
		t.Errorf("NextDue of a message with a 1m TTL = %v, %v; want about %v", at, ok, start.Add(time.Minute))
	}
	if got, err := b.Receive(ctx, broker.Source{Queue: poison}, 1, 0); err != nil || len(got) != 1 {
		t.Fatalf("Receive = %v, %v", got, err)
	}
	if at, ok := b.NextDue(poison); ok {
		t.Errorf("NextDue with the only message locked = %v, true; want false", at)
	}

	// Advancing the clock to the due time wakes an acceptor waiting for
	// the scheduled message.
	accepted := make(chan string, 1)
	go func() {
		s, err := b.AcceptNextSession(ctx, orders)
		if err != nil {
			accepted <- err.Error()
			return
		}
		accepted <- s.ID()
	}()
	if d := clk.AdvanceTo(soon); d <= 0 {
		t.Fatalf("AdvanceTo(%v) = %v, want a jump", soon, d)
	}
	select {
	case got := <-accepted:
		if got != "o-2" {
			t.Errorf("accepted %q after the clock reached the first due time, want o-2", got)
		}
	case <-ctx.Done():
		t.Fatal("no session accepted after the clock reached the due time")
	}
	if at, ok := b.NextDue(orders); !ok || !at.Equal(late) {
		t.Errorf("NextDue after the first fell due = %v, %v; want %v", at, ok, late)
	}
}

func TestWaitIdle(t *testing.T) {
	f := newFixture(t, 1000, time.Hour)
	if _, err := f.b.Schedule(f.ctx, poison, broker.Message{MessageID: "later"}, f.clk.Now().Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	idle := func() bool {
		done := make(chan error, 1)
		ctx, cancel := context.WithTimeout(f.ctx, 50*time.Millisecond)
		defer cancel()
		go func() { done <- f.b.WaitIdle(ctx, poison) }()
		return <-done == nil
	}
	if !idle() {
		t.Errorf("WaitIdle with only a scheduled message does not return, want at once")
	}
	if err := f.b.Send(f.ctx, poison, broker.Message{MessageID: "now"}); err != nil {
		t.Fatal(err)
	}
	if idle() {
		t.Errorf("WaitIdle with a visible message returns, want it to wait")
	}
	done := make(chan error, 1)
	go func() { done <- f.b.WaitIdle(f.ctx, poison) }()
	got, err := f.b.Receive(f.ctx, broker.Source{Queue: poison}, 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("Receive = %d, %v", len(got), err)
	}
	if st := f.b.Stats(poison); st.Locked != 1 || st.Scheduled != 1 {
		t.Errorf("Stats = %+v, want 1 locked, 1 scheduled", st)
	}
	if err := f.b.Complete(f.ctx, broker.Source{Queue: poison}, got[0]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("WaitIdle = %v, want nil", err)
	}
}

// TestSessionsUnderLoad runs several acceptors over many sessions with
// random abandons: every message is completed exactly once, and within a
// session in sequence order.
func TestSessionsUnderLoad(t *testing.T) {
	f := newFixture(t, 1000, 24*time.Hour)
	const sessions, perSession, acceptors = 20, 8, 4
	for i := range perSession {
		for s := range sessions {
			f.send(fmt.Sprint("o-", s), fmt.Sprintf("o-%d:%d", s, i))
		}
	}
	var (
		mu        sync.Mutex
		completed = map[string][]int64{} // session -> completed sequence numbers
		wg        sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	for w := range acceptors {
		rng := rand.New(rand.NewPCG(uint64(w), 1))
		wg.Go(func() {
			for {
				s, err := f.b.AcceptNextSession(ctx, orders)
				if err != nil {
					return // cancelled once idle
				}
				for {
					m, err := s.Receive(ctx, time.Second)
					if err != nil || m == nil {
						break
					}
					if rng.IntN(4) == 0 && m.DeliveryCount < 3 {
						if err := s.Abandon(ctx, m); err != nil {
							t.Errorf("Abandon %s: %v", m.MessageID, err)
						}
						continue
					}
					if err := s.Complete(ctx, m); err != nil {
						t.Errorf("Complete %s: %v", m.MessageID, err)
						continue
					}
					mu.Lock()
					completed[s.ID()] = append(completed[s.ID()], m.SequenceNumber)
					mu.Unlock()
				}
				_ = s.Close()
			}
		})
	}
	if err := f.b.WaitIdle(f.ctx, orders); err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
	cancel()
	wg.Wait()
	if len(completed) != sessions {
		t.Errorf("%d sessions completed, want %d", len(completed), sessions)
	}
	for id, seqs := range completed {
		if len(seqs) != perSession {
			t.Errorf("session %s: %d completed, want %d", id, len(seqs), perSession)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Errorf("session %s completed out of order: %v", id, seqs)
				break
			}
		}
	}
	if st := f.b.Stats(orders); st.DeadLettered != 0 {
		t.Errorf("Stats = %+v, want nothing dead-lettered", st)
	}
}

// TestTotalsAccountForEveryMessage: each message sent ends in exactly one
// outcome (dropped as a duplicate, cancelled, expired, dead-lettered,
// completed) or is still in the queue.
func TestTotalsAccountForEveryMessage(t *testing.T) {
	f := newFixture(t, 1000, time.Hour)
	f.send("o-1", "o-1:1")
	f.send("o-1", "o-1:1") // dropped by duplicate detection
	f.send("o-1", "o-1:2")
	f.send("o-2", "o-2:1")
	if err := f.b.Send(f.ctx, orders, broker.Message{MessageID: "o-3:1", SessionID: "o-3", TimeToLive: time.Minute}); err != nil {
		t.Fatal(err)
	}
	seq, err := f.b.Schedule(f.ctx, orders, broker.Message{MessageID: "o-1:payment-timeout", SessionID: "o-1"}, f.clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.b.CancelScheduled(f.ctx, orders, seq); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Schedule(f.ctx, orders, broker.Message{MessageID: "o-4:payment-timeout", SessionID: "o-4"}, f.clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.sleep(2 * time.Minute) // o-3:1 expires: dead-lettered (TTLExpiredException)

	s := f.accept() // o-1: complete o-1:1, abandon o-1:2 until it is dead-lettered
	f.complete(s, f.receive(s))
	for range 5 {
		m := f.receive(s)
		if err := s.Abandon(f.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	got, st := f.b.Totals(orders), f.b.Stats(orders)
	want := membroker.QueueTotals{Sent: 7, DuplicatesDropped: 1, Cancelled: 1, DeadLettered: 2, Completed: 1}
	if got != want {
		t.Errorf("Totals = %+v, want %+v", got, want)
	}
	waiting := st.Active + st.Locked + st.Scheduled // o-2:1 and o-4's timeout
	if sum := got.DuplicatesDropped + got.Cancelled + got.ExpiredDropped + got.DeadLettered + got.Completed + waiting; sum != got.Sent || waiting != 2 {
		t.Errorf("outcomes add up to %d (waiting %d), want Sent %d (waiting 2)", sum, waiting, got.Sent)
	}
	if f.b.Totals("nope") != (membroker.QueueTotals{}) {
		t.Errorf("Totals of an unknown queue is not zero")
	}
}

func TestOperationsCountsEveryCall(t *testing.T) {
	f := newFixture(t, 1, time.Minute)
	before := f.b.Operations()
	f.send("o-1", "o-1:1") // 1 send
	s := f.accept()        // 1 accept
	m := f.receive(s)      // 1 receive
	if err := s.Complete(f.ctx, m); err != nil {
		t.Fatal(err) // 1 complete
	}
	if got, err := s.Receive(f.ctx, 0); err != nil || got != nil {
		t.Fatalf("empty receive = %v, %v", got, err) // 1 receive, empty: billed too
	}
	if err := s.Close(); err != nil {
		t.Fatal(err) // 1 close
	}
	if got := f.b.Operations() - before; got != 6 {
		t.Errorf("operations = %d, want 6 (send, accept, receive, complete, empty receive, close)", got)
	}
}

// TestHoldScheduled: while held, messages that fall due stay scheduled
// (and out of NextDue); a cancel still works on them; releasing makes the
// rest visible at once, in the order they fell due.
func TestHoldScheduled(t *testing.T) {
	clk := clock.Scaled(1) // real time: only AdvanceTo moves it on
	b := newBroker(t, clk, membroker.DefaultQueueOptions())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.HoldScheduled("nope", true); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("HoldScheduled of an unknown queue = %v, want ErrNotFound", err)
	}
	if err := b.HoldScheduled(orders, true); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	seqs := map[string]int64{}
	for i, id := range []string{"second", "first", "cancelled"} {
		at := start.Add(time.Duration(2-i) * time.Minute)
		if id == "cancelled" {
			at = start.Add(30 * time.Second)
		}
		seq, err := b.Schedule(ctx, orders, broker.Message{MessageID: id, SessionID: "o-1"}, at)
		if err != nil {
			t.Fatal(err)
		}
		seqs[id] = seq
	}
	clk.AdvanceTo(start.Add(time.Hour))
	if st := b.Stats(orders); st.Scheduled != 3 || st.Active != 0 {
		t.Errorf("Stats while held, an hour past every due time = %+v, want 3 scheduled, none active", st)
	}
	if at, ok := b.NextDue(orders); ok {
		t.Errorf("NextDue while held = %v, true; want false", at)
	}
	if err := b.CancelScheduled(ctx, orders, seqs["cancelled"]); err != nil {
		t.Fatalf("CancelScheduled of a held message: %v", err)
	}
	if err := b.HoldScheduled(orders, false); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(orders); st.Scheduled != 0 || st.Active != 2 {
		t.Errorf("Stats after the release = %+v, want 2 active, none scheduled", st)
	}
	s, err := b.AcceptNextSession(ctx, orders)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		m, err := s.Receive(ctx, time.Millisecond)
		if err != nil || m == nil {
			t.Fatalf("Receive after the release = %v, %v", m, err)
		}
		ids = append(ids, m.MessageID)
	}
	if want := []string{"first", "second"}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("delivered after the release: %v, want %v (the order they fell due)", ids, want)
	}
}
