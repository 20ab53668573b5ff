package membroker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// TestEventsStayBounded: stale timed events (each sent message schedules
// its expiry a week ahead) are compacted away, not kept for a week.
func TestEventsStayBounded(t *testing.T) {
	b := New(nil)
	if err := b.CreateQueue("q", DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src := broker.Source{Queue: "q"}
	for i := range 2000 {
		if err := b.Send(ctx, "q", broker.Message{}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		got, err := b.Receive(ctx, src, 1, 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("receive %d: %d, %v", i, len(got), err)
		}
		if err := b.Complete(ctx, src, got[0]); err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues["q"]
	if q.live != 0 {
		t.Errorf("live = %d, want 0", q.live)
	}
	if n := len(q.events); n > 128 {
		t.Errorf("%d events pending for an empty queue, want at most 128", n)
	}
}

// TestAcceptOrderAndReadyBound: sessions are accepted by their first
// message's sequence number, also after a session is closed with messages
// left or its first message changes, and the index of acceptable sessions
// stays proportional to the sessions.
func TestAcceptOrderAndReadyBound(t *testing.T) {
	b := New(nil)
	opts := DefaultQueueOptions()
	opts.RequiresSession = true
	if err := b.CreateQueue("q", opts); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(session string) {
		t.Helper()
		if err := b.Send(ctx, "q", broker.Message{SessionID: session}); err != nil {
			t.Fatal(err)
		}
	}
	accept := func() *Session {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		s, err := b.AcceptNextSession(actx, "q")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// c, a, b, a, c: first messages at 1 (c), 2 (a), 3 (b).
	for _, id := range []string{"c", "a", "b", "a", "c"} {
		send(id)
	}
	s := accept()
	if s.ID() != "c" {
		t.Fatalf("first accepted %s, want c", s.ID())
	}
	// c takes its first message and closes: its next one (5) now ranks
	// after a (2) and b (3).
	got, err := s.Receive(ctx, 0)
	if err != nil || got == nil {
		t.Fatalf("receive on c: %v, %v", got, err)
	}
	if err := s.Complete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var order []string
	for range 3 {
		order = append(order, accept().ID())
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(order, want) {
		t.Errorf("accepted %v, want %v", order, want)
	}

	// Many sessions opened and closed again leave no growing index.
	for i := range 500 {
		send(fmt.Sprintf("s%d", i))
		s := accept()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues["q"]
	if n := len(q.ready); n > 64 && n > 4*len(q.groups) {
		t.Errorf("%d entries for %d sessions in the ready index", n, len(q.groups))
	}
}
