package publish_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokerpub"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/orderfn"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
	"github.com/orderstatus/orderstatus/handler/publish"
)

const queue = "order-status"

// devBroker is a membroker with the production queue settings on clk,
// served over loopback as the development host serves it, and a client.
func devBroker(t *testing.T, clk clock.Clock) (*membroker.Broker, *loopback.Client) {
	t.Helper()
	mb := membroker.New(&membroker.Options{Clock: clk})
	o := membroker.DefaultQueueOptions()
	o.RequiresSession = true
	if err := mb.CreateQueue(queue, o); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(loopback.NewServer(mb))
	t.Cleanup(srv.Close)
	c, err := loopback.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mb, c
}

// TestRoundTrip publishes through the loopback broker, takes each message
// off the order's session as the Functions host does, hands it to the
// real OrderStatus function (over an in-memory store) encoded as the host
// encodes it, and checks what the handler decoded and applied.
func TestRoundTrip(t *testing.T) {
	// The producer's trace: every message carries it, and every line the
	// handler writes for them names it (golden log lines below).
	const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx, err := publish.WithTraceParent(context.Background(), traceparent)
	if err != nil {
		t.Fatal(err)
	}
	mb, c := devBroker(t, clock.Real())
	p := publish.New(brokerpub.Sender(c), nil)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	changes := []contract.StatusChanged{
		{OrderID: "o-1", Status: contract.Created, Sequence: 1, OccurredAt: at},
		{OrderID: "o-1", Status: contract.Paid, Sequence: 2, OccurredAt: at.Add(time.Minute)},
		{OrderID: "o-2", Status: contract.Created, Sequence: 1},
		{OrderID: "ordre-été", Status: contract.Created, Sequence: 1, OccurredAt: at},
	}
	if err := p.Status(ctx, changes[0]); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Statuses(ctx, changes[1:], nil); err != nil || n != 3 {
		t.Fatalf("Statuses = %d, %v", n, err)
	}
	if _, err := p.ScheduleTimeoutFor(ctx, "o-2", 1, time.Millisecond); err != nil {
		t.Fatal(err)
	}

	rows := memstore.New()
	orders := orderstate.New(rows, nil)
	var handlerLog bytes.Buffer
	fn := orderfn.New(orders, parking.New(nil, "order-status-poison"), metrics.New(prometheus.NewRegistry(), "test", nil),
		slog.New(slog.NewJSONHandler(&handlerLog, nil)), orderfn.Options{})
	results := map[string]string{}
	deadline := time.Now().Add(10 * time.Second)
	for len(results) < 5 && time.Now().Before(deadline) {
		actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		s, err := mb.AcceptNextSession(actx, queue)
		cancel()
		if err != nil {
			continue // none ready yet (the timeout is scheduled)
		}
		for {
			m, err := s.Receive(ctx, 50*time.Millisecond)
			if err != nil || m == nil {
				break
			}
			inv, err := hostenc.EncodeServiceBus(hostproto.ServiceBusMessage{
				Body: m.Body, MessageID: m.MessageID, SessionID: m.SessionID, Subject: m.Subject, ContentType: m.ContentType,
				DeliveryCount: m.DeliveryCount, SequenceNumber: m.SequenceNumber, EnqueuedTime: m.EnqueuedTime, ExpiresAt: m.ExpiresAt,
				ApplicationProperties: m.ApplicationProperties,
			}, "message", "OrderStatus", time.Now())
			if err != nil {
				t.Fatalf("encode invocation of %s: %v", m.MessageID, err)
			}
			rec := httptest.NewRecorder()
			fn.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/OrderStatus", bytes.NewReader(inv)))
			var answer struct{ ReturnValue struct{ Result string } }
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &answer) != nil {
				t.Fatalf("OrderStatus answered %d %s for %s", rec.Code, rec.Body, m.MessageID)
			}
			results[m.MessageID] = answer.ReturnValue.Result
			if err := s.Complete(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
	}
	want := map[string]string{"o-1:1": "Applied", "o-1:2": "Applied", "o-2:1": "Applied", "ordre-été:1": "Applied", "o-2:payment-timeout-1": "Applied"}
	for id, w := range want {
		if results[id] != w {
			t.Errorf("%s: result %q, want %q (all: %v)", id, results[id], w, results)
		}
	}
	golden(t, "roundtrip_log", goldenLines(t, handlerLog.Bytes()))
	wantRows := map[string]struct {
		status contract.Status
		seq    int64
		at     time.Time
	}{
		"o-1":       {contract.Paid, 2, at.Add(time.Minute)},
		"o-2":       {contract.Cancelled, 1, time.Time{}},
		"ordre-été": {contract.Created, 1, at},
	}
	for id, w := range wantRows {
		row, err := orders.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
		if row.State.Status != w.status || row.State.LastSequence != w.seq || (!w.at.IsZero() && !row.State.OccurredAt.Equal(w.at)) {
			t.Errorf("order %s = %+v, want %s at sequence %d (occurred %v)", id, row.State, w.status, w.seq, w.at)
		}
	}
}

// TestScheduleAfterOnADevBrokerAhead: the development broker's clock runs
// ahead of the real one (fast-forwarded), which the publisher cannot
// tell: a timeout "after 30m" is due 30 minutes after the broker's now,
// reported as 30 minutes after the publisher's, and cancelling it after
// it became visible says ErrNotScheduled.
func TestScheduleAfterOnADevBrokerAhead(t *testing.T) {
	ctx := context.Background()
	clk := clock.Scaled(1)
	clk.Advance(5 * time.Hour)
	mb, c := devBroker(t, clk)
	p := publish.New(brokerpub.Sender(c), nil)

	s, err := p.ScheduleTimeoutFor(ctx, "o-1", 1, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	due, ok := mb.NextDue(queue)
	if !ok {
		t.Fatal("nothing scheduled")
	}
	want := clk.Now().Add(30 * time.Minute)
	if d := want.Sub(due); d < 0 || d > 5*time.Second {
		t.Fatalf("due at %v on the broker, want 30m after its now, about %v", due, want)
	}
	if d := time.Until(s.At) - 30*time.Minute; d > 0 || d < -5*time.Second {
		t.Fatalf("reported due at %v, want 30m after the publisher's now", s.At)
	}
	if err := p.CancelTimeout(ctx, s.SequenceNumber); err != nil {
		t.Fatalf("CancelTimeout before it is due: %v", err)
	}
	if err := p.CancelTimeout(ctx, s.SequenceNumber); !errors.Is(err, publish.ErrNotScheduled) {
		t.Errorf("CancelTimeout again = %v, want ErrNotScheduled", err)
	}

	// Let one become visible: the cancel loses the race, and says so.
	s, err = p.ScheduleTimeoutFor(ctx, "o-2", 1, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(31 * time.Minute)
	if st := mb.Stats(queue); st.Active != 1 || st.Scheduled != 0 {
		t.Fatalf("after 31m: %+v, want the timeout visible (1 active, 0 scheduled)", st)
	}
	if err := p.CancelTimeout(ctx, s.SequenceNumber); !errors.Is(err, publish.ErrNotScheduled) {
		t.Errorf("CancelTimeout after it became visible = %v, want ErrNotScheduled", err)
	}
}

// goldenLines is the handler's log as its golden file holds it: one JSON
// line per message, sorted by message id, without the fields that differ
// from run to run (time, durations, lags).
func goldenLines(t *testing.T, log []byte) []byte {
	t.Helper()
	var lines []string
	for _, l := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(l, &rec); err != nil {
			t.Fatalf("handler log line %q: %v", l, err)
		}
		for _, k := range []string{"time", "duration_ms", "lag_ms", "occurred_lag_ms"} {
			delete(rec, k)
		}
		b, err := json.Marshal(rec) // keys sorted
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}
