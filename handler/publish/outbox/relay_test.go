package outbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokerpub"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/publish"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
	"github.com/orderstatus/orderstatus/handler/publish/outbox/memoutbox"
)

const queue = "order-status"

func newBroker(t *testing.T) *membroker.Broker {
	t.Helper()
	mb := membroker.New(nil)
	if err := mb.CreateQueue(queue, membroker.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	return mb
}

func created(order string) outbox.Intent {
	return outbox.Status(contract.StatusChanged{OrderID: order, Status: contract.Created, Sequence: 1})
}

// waitFor polls cond every few milliseconds for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// runRelay starts r.Run and returns a function that stops it and reports
// what Run returned.
func runRelay(t *testing.T, r *outbox.Relay) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop := func() error {
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
			return nil
		}
	}
	t.Cleanup(func() {
		if !stopped {
			_ = stop()
		}
	})
	return stop
}

func TestRunRelaysWhatIsCommittedUntilCancelled(t *testing.T) {
	s, mb := memoutbox.New(nil), newBroker(t)
	stop := runRelay(t, outbox.NewRelay(s, publish.New(brokerpub.Sender(mb), nil), &outbox.RelayOptions{Interval: time.Millisecond}))
	ctx := context.Background()
	if err := s.Commit(ctx, "o-1", nil, created("o-1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "o-1:1 on the queue", func() bool { return mb.Stats(queue).Active == 1 })
	if err := s.Commit(ctx, "o-2", nil, created("o-2"), outbox.ScheduleTimeout("o-2", time.Hour)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "o-2's messages", func() bool { st := mb.Stats(queue); return st.Active == 2 && st.Scheduled == 1 })
	if err := stop(); err != nil {
		t.Errorf("Run returned %v after its context ended, want nil", err)
	}
}

// flaky fails Pending while fails > 0.
type flaky struct {
	outbox.Store
	fails atomic.Int32
}

func (f *flaky) Pending(ctx context.Context, max int) ([]outbox.Record, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, outbox.ErrTransient
	}
	return f.Store.Pending(ctx, max)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunKeepsGoingThroughFailingPasses(t *testing.T) {
	mem, mb := memoutbox.New(nil), newBroker(t)
	s := &flaky{Store: mem}
	s.fails.Store(3)
	var logs syncBuffer
	r := outbox.NewRelay(s, publish.New(brokerpub.Sender(mb), nil), &outbox.RelayOptions{Interval: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err := mem.Commit(context.Background(), "o-1", nil, created("o-1")); err != nil {
		t.Fatal(err)
	}
	runRelay(t, r)
	waitFor(t, "o-1:1 on the queue after the failures", func() bool { return mb.Stats(queue).Active == 1 })
	if n := strings.Count(logs.String(), `"msg":"outbox relay pass failed"`); n != 3 {
		t.Errorf("%d failed passes logged, want 3:\n%s", n, logs.String())
	}
}

// stepClock moves an hour on every reading.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Hour)
	return c.now
}

func TestRunPurgesSentRecords(t *testing.T) {
	clk := &stepClock{now: time.Now()}
	s, mb := memoutbox.New(nil), newBroker(t)
	if err := s.Commit(context.Background(), "o-1", nil, created("o-1"), outbox.ScheduleTimeout("o-1", time.Hour)); err != nil {
		t.Fatal(err)
	}
	runRelay(t, outbox.NewRelay(s, publish.New(brokerpub.Sender(mb), nil), &outbox.RelayOptions{Interval: time.Millisecond,
		Retention: 2 * time.Hour, PurgeEvery: time.Hour, Now: clk.Now}))
	waitFor(t, "the sent timeout purged", func() bool {
		ts, err := s.Timeouts(context.Background(), "o-1", "o-1")
		return err == nil && len(ts) == 0
	})
	// The relay's clock is hours past the commit: the check was due, so
	// it is visible at once.
	if st := mb.Stats(queue); st.Active != 2 {
		t.Errorf("queue %+v, want the status and the timeout sent before the purge", st)
	}
}

func TestScheduleCountsFromTheCommit(t *testing.T) {
	committed := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		relayAt   time.Duration // after the commit
		wantAfter time.Duration // from the broker's now
	}{
		{"sent at once", 0, 30 * time.Minute},
		{"sent 10 minutes late", 10 * time.Minute, 20 * time.Minute},
		{"sent after it was due", 45 * time.Minute, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, mb := memoutbox.New(func() time.Time { return committed }), newBroker(t)
			if err := s.Commit(context.Background(), "o-1", nil, outbox.ScheduleTimeout("o-1", 30*time.Minute)); err != nil {
				t.Fatal(err)
			}
			r := outbox.NewRelay(s, publish.New(brokerpub.Sender(mb), nil), &outbox.RelayOptions{Now: func() time.Time { return committed.Add(tc.relayAt) }})
			before := time.Now()
			if _, err := r.Pass(context.Background()); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			due, ok := mb.NextDue(queue)
			if tc.wantAfter == 0 {
				// Due already: scheduled a millisecond ahead, visible at once.
				if st := mb.Stats(queue); !ok && st.Active != 1 {
					t.Fatalf("queue %+v, want the check due at once", st)
				}
				if ok && due.After(after.Add(time.Second)) {
					t.Errorf("due %v, want at once (before %v)", due, after.Add(time.Second))
				}
				return
			}
			if !ok || due.Before(before.Add(tc.wantAfter)) || due.After(after.Add(tc.wantAfter)) {
				t.Errorf("due %v (scheduled %v), want %s after the broker's now (between %v and %v)", due, ok, tc.wantAfter,
					before.Add(tc.wantAfter), after.Add(tc.wantAfter))
			}
		})
	}
}

// refuse refuses one MessageId for good.
type refuse struct {
	publish.Sender
	id string
}

func (r refuse) Send(ctx context.Context, q string, m publish.Message) error {
	if m.MessageID == r.id {
		return publish.ErrRefused
	}
	return r.Sender.Send(ctx, q, m)
}

func TestRelayMetrics(t *testing.T) {
	committed := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	mem, mb := memoutbox.New(func() time.Time { return committed }), newBroker(t)
	ctx := context.Background()
	if err := mem.Commit(ctx, "o-1", nil, created("o-1"), outbox.ScheduleTimeout("o-1", time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := mem.Commit(ctx, "o-2", nil, created("o-2"), outbox.CancelTimeout("o-2")); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s := &flaky{Store: mem}
	opts := &outbox.RelayOptions{Registerer: reg, Now: func() time.Time { return committed.Add(90 * time.Second) }}
	r := outbox.NewRelay(s, publish.New(refuse{Sender: brokerpub.Sender(mb), id: "o-2:1"}, nil), opts)
	_ = outbox.NewRelay(mem, publish.New(brokerpub.Sender(mb), nil), opts) // a second relay on the registry shares its collectors
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	for result, want := range map[string]float64{"sent": 1, "scheduled": 1, "cancelled": 1, "parked": 1} {
		if got := sample(t, reg, outbox.MetricRecords, result); got != want {
			t.Errorf("%s{result=%q} = %v, want %v", outbox.MetricRecords, result, got, want)
		}
	}
	if got := sample(t, reg, outbox.MetricOldestPending); got != 90 {
		t.Errorf("%s = %v after a pass over records committed 90 s before, want 90", outbox.MetricOldestPending, got)
	}
	s.fails.Store(1)
	if _, err := r.Pass(ctx); err == nil {
		t.Fatal("the failing pass reported no error")
	}
	if got := sample(t, reg, outbox.MetricPassFailures); got != 1 {
		t.Errorf("%s = %v, want 1", outbox.MetricPassFailures, got)
	}
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sample(t, reg, outbox.MetricOldestPending); got != 0 {
		t.Errorf("%s = %v with nothing pending, want 0", outbox.MetricOldestPending, got)
	}
}

// sample reads metric name from reg: its one sample, or with result the
// sample labelled result="<result>".
func sample(t *testing.T, reg *prometheus.Registry, name string, result ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(result) == 1 && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != result[0]) {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s %v", name, result)
	return 0
}
