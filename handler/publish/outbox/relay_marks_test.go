package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker/brokerpub"
	"github.com/orderstatus/orderstatus/handler/publish"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
	"github.com/orderstatus/orderstatus/handler/publish/outbox/memoutbox"
)

var errLost = errors.New("connection lost")

// failing sends one message at a time (it is no BatchSender) and fails
// the send of a MessageId in sends, and every Schedule while schedules is
// true, with errLost: not a refusal, so the relay must leave those
// records pending.
type failing struct {
	publish.Sender
	mu        sync.Mutex
	sends     map[string]bool
	schedules bool
}

func (f *failing) Send(ctx context.Context, q string, m publish.Message) error {
	f.mu.Lock()
	fail := f.sends[m.MessageID]
	f.mu.Unlock()
	if fail {
		return errLost
	}
	return f.Sender.Send(ctx, q, m)
}

func (f *failing) Schedule(ctx context.Context, q string, m publish.Message, at time.Time) (int64, error) {
	f.mu.Lock()
	fail := f.schedules
	f.mu.Unlock()
	if fail {
		return 0, errLost
	}
	return f.Sender.Schedule(ctx, q, m, at)
}

func (f *failing) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends, f.schedules = nil, false
}

// TestPassMarksOnlyWhatWasSent: when a send fails part way through the
// status changes, the pass marks sent only the ones Service Bus took; the
// others stay pending and the next pass sends them, so none is lost.
func TestPassMarksOnlyWhatWasSent(t *testing.T) {
	s, mb := memoutbox.New(nil), newBroker(t)
	ctx := context.Background()
	orders := []string{"o-1", "o-2", "o-3", "o-4"}
	for _, o := range orders {
		if err := s.Commit(ctx, o, nil, created(o)); err != nil {
			t.Fatal(err)
		}
	}
	f := &failing{Sender: brokerpub.Sender(mb), sends: map[string]bool{"o-3:1": true}}
	r := outbox.NewRelay(s, publish.New(f, &publish.Options{BatchSize: 1}), nil)
	res, err := r.Pass(ctx)
	if !errors.Is(err, errLost) {
		t.Fatalf("pass with o-3:1 failing: %v, want the send's error", err)
	}
	pending, err := s.Pending(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, rec := range pending {
		left[rec.Message.MessageID] = true
	}
	active := mb.Stats(queue).Active
	if !left["o-3:1"] || active+len(pending) != len(orders) || res.Sent != active {
		t.Fatalf("after the failure: %d on the queue, %d reported sent, pending %v; want o-3:1 pending and every record either on the queue or pending",
			active, res.Sent, left)
	}
	f.heal()
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if st := mb.Stats(queue); st.Active != len(orders) {
		t.Errorf("queue %+v after the second pass, want all %d changes: a record marked sent unsent is lost", st, len(orders))
	}
}

// TestPassChecksTheSchedule: a schedule Service Bus did not take (a
// transient failure) is not marked sent: the pass fails, the record stays
// pending with no sequence number, and the next pass schedules it.
func TestPassChecksTheSchedule(t *testing.T) {
	s, mb := memoutbox.New(nil), newBroker(t)
	ctx := context.Background()
	if err := s.Commit(ctx, "o-1", nil, outbox.ScheduleTimeout("o-1", time.Hour)); err != nil {
		t.Fatal(err)
	}
	f := &failing{Sender: brokerpub.Sender(mb), schedules: true}
	r := outbox.NewRelay(s, publish.New(f, nil), nil)
	res, err := r.Pass(ctx)
	if !errors.Is(err, errLost) || res.Scheduled != 0 {
		t.Errorf("pass with the schedule failing: scheduled %d, %v; want 0 and the schedule's error", res.Scheduled, err)
	}
	one := func() outbox.Record {
		ts, err := s.Timeouts(ctx, "o-1", "o-1")
		if err != nil || len(ts) != 1 {
			t.Fatalf("Timeouts = %+v, %v; want the one schedule", ts, err)
		}
		return ts[0]
	}
	rec := one()
	if rec.State != outbox.Pending || rec.SequenceNumber != 0 {
		t.Fatalf("schedule record %s, sequence number %d after the failed schedule; want pending, none", rec.State, rec.SequenceNumber)
	}
	f.heal()
	if res, err := r.Pass(ctx); err != nil || res.Scheduled != 1 {
		t.Fatalf("second pass: scheduled %d, %v; want 1", res.Scheduled, err)
	}
	if rec = one(); rec.State != outbox.Sent || rec.SequenceNumber < 1 {
		t.Errorf("schedule record %s, sequence number %d; want sent with the scheduled message's number", rec.State, rec.SequenceNumber)
	}
	if st := mb.Stats(queue); st.Scheduled != 1 {
		t.Errorf("queue %+v, want the one scheduled check", st)
	}
}
