package membroker

import (
	"context"
	"testing"

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
