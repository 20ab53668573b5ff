package membroker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
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

// TestVisibleCount: the queue's count of visible messages (what WaitIdle
// and Quiet read instead of counting) equals stats' Active + Locked,
// and Quiet says what stats says, after every
// operation of a random mix that reaches every way into and out of the
// lists: send, schedule (falling due, held and released, cancelled),
// receive, complete, abandon up to dead-lettering, lock and session lock
// expiry, expiry by time-to-live, duplicates dropped.
func TestVisibleCount(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		t.Run(fmt.Sprintf("sessions=%v", sessions), func(t *testing.T) {
			c := clock.Scaled(1)
			b := New(&Options{Clock: c})
			opts := DefaultQueueOptions()
			opts.RequiresSession = sessions
			opts.LockDuration = time.Minute
			opts.DefaultTTL = time.Hour
			if err := b.CreateQueue("q", opts); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			src := broker.Source{Queue: "q"}
			rng := rand.New(rand.NewPCG(1, 2))
			var held []broker.Received
			var open []*Session
			var scheduled []int64
			check := func(step int, op string) {
				t.Helper()
				b.mu.Lock()
				q := b.queues["q"]
				s := q.stats()
				v := q.visible
				b.mu.Unlock()
				if v != s.Active+s.Locked {
					t.Fatalf("step %d (%s): visible %d, stats %+v", step, op, v, s)
				}
				if quiet := s.Active+s.Locked+s.Scheduled == 0; b.Quiet("q") != quiet {
					t.Fatalf("step %d (%s): Quiet %v; stats %+v", step, op, b.Quiet("q"), s)
				}
			}
			for step := range 3000 {
				op := rng.IntN(9)
				name := ""
				switch op {
				case 0, 1: // send, a duplicate now and then
					name = "send"
					id := fmt.Sprintf("m%d", rng.IntN(400))
					if err := b.Send(ctx, "q", broker.Message{MessageID: id, SessionID: fmt.Sprintf("s%d", rng.IntN(8))}); err != nil {
						t.Fatal(err)
					}
				case 2:
					name = "schedule"
					seq, err := b.Schedule(ctx, "q", broker.Message{MessageID: fmt.Sprintf("x%d", step), SessionID: "s1"}, c.Now().Add(time.Duration(rng.IntN(120))*time.Second))
					if err != nil {
						t.Fatal(err)
					}
					scheduled = append(scheduled, seq)
				case 3:
					name = "cancel"
					if len(scheduled) > 0 {
						_ = b.CancelScheduled(ctx, "q", scheduled[0]) // gone already when it fell due
						scheduled = scheduled[1:]
					}
				case 4: // receive
					name = "receive"
					if !sessions {
						got, err := b.Receive(ctx, src, 1+rng.IntN(3), 0)
						if err != nil {
							t.Fatal(err)
						}
						held = append(held, got...)
						break
					}
					actx, cancel := context.WithTimeout(ctx, time.Millisecond)
					s, err := b.AcceptNextSession(actx, "q")
					cancel()
					if err == nil {
						open = append(open, s)
					}
				case 5, 6: // settle
					name = "settle"
					if !sessions && len(held) > 0 {
						m := held[0]
						held = held[1:]
						if op == 5 {
							_ = b.Complete(ctx, src, m) // lock lost meanwhile: fine
						} else {
							_ = b.Abandon(ctx, src, m)
						}
					}
					if sessions && len(open) > 0 {
						s := open[0]
						m, err := s.Receive(ctx, 0)
						if err == nil && m != nil {
							if op == 5 {
								_ = s.Complete(ctx, m)
							} else {
								_ = s.Abandon(ctx, m)
							}
						}
						if rng.IntN(3) == 0 {
							_ = s.Close()
							open = open[1:]
						}
					}
				case 7:
					name = "hold"
					_ = b.HoldScheduled("q", rng.IntN(2) == 0)
				case 8: // time passes: schedules fall due, locks and lives end
					name = "advance"
					c.Advance(time.Duration(rng.IntN(90)) * time.Second)
					_ = b.Stats("q")
				}
				check(step, name)
			}
			_ = b.HoldScheduled("q", false)
			c.Advance(2 * time.Hour) // everything expires or dead-letters
			_ = b.Stats("q")
			check(-1, "the end")
			b.mu.Lock()
			v := b.queues["q"].visible
			b.mu.Unlock()
			if v != 0 {
				t.Errorf("after every life ended: visible %d, want 0", v)
			}
		})
	}
}
