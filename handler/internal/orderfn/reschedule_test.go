package orderfn

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/circuit"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
)

// fakeBus is a Service Bus queue for scheduling: it keeps what it accepted,
// drops a MessageId it has seen (duplicate detection), and tells the time.
type fakeBus struct {
	mu    sync.Mutex
	now   time.Time
	seen  map[string]bool
	kept  []broker.Message
	at    []time.Time
	calls int
	reads int // of the clock
	err   error
}

func newFakeBus(now time.Time) *fakeBus { return &fakeBus{now: now, seen: map[string]bool{}} }

// last returns the last message scheduled that match accepts (the zero
// message when none does).
func (b *fakeBus) last(match func(broker.Message) bool) broker.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.kept) - 1; i >= 0; i-- {
		if match(b.kept[i]) {
			return b.kept[i]
		}
	}
	return broker.Message{}
}

// ofSession matches the messages of session id with subject subject.
func ofSession(id, subject string) func(broker.Message) bool {
	return func(m broker.Message) bool { return m.SessionID == id && m.Subject == subject }
}

func (b *fakeBus) Schedule(_ context.Context, _ string, m broker.Message, at time.Time) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.err != nil {
		return 0, b.err
	}
	if !b.seen[m.MessageID] {
		b.seen[m.MessageID] = true
		b.kept, b.at = append(b.kept, m), append(b.at, at)
	}
	return int64(b.calls), nil
}

// advance moves the clock on by d.
func (b *fakeBus) advance(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = b.now.Add(d)
}

// clock is the rescheduler's clock (reschedule.Options.Now).
func (b *fakeBus) clock() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	return b.now
}

// flakyBackend fails every call with store.ErrTransient while down.
type flakyBackend struct {
	store.Backend
	down  atomic.Bool
	calls atomic.Int64
}

func (f *flakyBackend) fail() error {
	f.calls.Add(1)
	if f.down.Load() {
		return fmt.Errorf("flaky: connection refused: %w", store.ErrTransient)
	}
	return nil
}

func (f *flakyBackend) Get(ctx context.Context, id string) (store.Row, error) {
	if err := f.fail(); err != nil {
		return store.Row{}, err
	}
	return f.Backend.Get(ctx, id)
}

func (f *flakyBackend) Insert(ctx context.Context, id string, s order.State) (store.ETag, error) {
	if err := f.fail(); err != nil {
		return "", err
	}
	return f.Backend.Insert(ctx, id, s)
}

func (f *flakyBackend) Replace(ctx context.Context, id string, s order.State, e store.ETag) (store.ETag, error) {
	if err := f.fail(); err != nil {
		return "", err
	}
	return f.Backend.Replace(ctx, id, s, e)
}

var now0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

type outageRig struct {
	h       *Handler
	bus     *fakeBus
	backend *flakyBackend
	mem     *memstore.Store
	parker  *fakeParker
	m       *metrics.Metrics
	stdout  *bytes.Buffer
}

func newOutageRig(t *testing.T, p reschedule.Policy, breaker *circuit.Options) *outageRig {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test", nil)
	var out bytes.Buffer
	log := logging.New(&out, nil, slog.LevelInfo)
	mem := memstore.New()
	back := &flakyBackend{Backend: mem}
	bus := newFakeBus(now0)
	r := &outageRig{bus: bus, backend: back, mem: mem, parker: &fakeParker{}, m: m, stdout: &out}
	opts := Options{
		Retry:          retry.Policy{Budget: 20 * time.Millisecond, Initial: time.Millisecond, Max: 2 * time.Millisecond},
		Reschedule:     reschedule.New(bus, "order-status", p, &reschedule.Options{Rand: func() float64 { return 0.5 }, Now: bus.clock}),
		ScheduleBudget: 20 * time.Millisecond,
	}
	if breaker != nil {
		opts.Breaker = NewBreaker(m, log, *breaker)
	}
	r.h = New(orderstate.New(back, nil), r.parker, m, log, opts)
	return r
}

func (r *outageRig) post(t *testing.T, body []byte) (int, answer) {
	t.Helper()
	return (&rig{h: r.h}).post(t, body)
}

// hostInvocation is what the Functions host sends for m (delivery count
// n): application properties as a real JSON object, times as strings.
func hostInvocation(m broker.Message, n int) []byte { return hostInvocationAt(m, n, time.Time{}) }

// hostInvocationAt is hostInvocation with m's EnqueuedTimeUtc: when it
// came due in its session (zero: none sent, so the handler takes its now).
func hostInvocationAt(m broker.Message, n int, enqueued time.Time) []byte {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	props := map[string]any{}
	for k, v := range m.ApplicationProperties {
		if tm, ok := v.(time.Time); ok {
			v = tm.UTC().Format(time.RFC3339Nano)
		}
		props[k] = v
	}
	meta := map[string]any{
		"DeliveryCount": fmt.Sprint(n), "SequenceNumber": "42", "MessageId": q(m.MessageID),
		"SessionId": q(m.SessionID), "Subject": q(m.Subject), "ContentType": q(m.ContentType),
		"ApplicationProperties": props,
	}
	if !enqueued.IsZero() {
		meta["EnqueuedTimeUtc"] = enqueued.UTC().Format("2006-01-02T15:04:05")
	}
	if m.CorrelationID != "" {
		meta["CorrelationId"] = q(m.CorrelationID)
	}
	b, _ := json.Marshal(map[string]any{
		"Data":     map[string]any{"message": base64.StdEncoding.EncodeToString(m.Body)},
		"Metadata": meta,
	})
	return b
}

func statusMsg(id string, seq int64, st order.Status) broker.Message {
	body := fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d,"occurredAt":"2026-12-01T09:50:00Z"}`, id, st, seq)
	return broker.Message{MessageID: fmt.Sprintf("%s:%d", id, seq), SessionID: id, Subject: order.SubjectStatusChanged,
		ContentType: "application/json", CorrelationID: "corr-" + id, Body: []byte(body),
		ApplicationProperties: map[string]any{"Producer": "checkout"}}
}

var policy = reschedule.Policy{Base: 10 * time.Second, Cap: time.Minute, Window: time.Hour}

// An outage longer than the in-call budget becomes a scheduled copy,
// answered 200; the host's redelivery after a lost answer schedules the
// same copy again (one kept by duplicate detection); and the copy
// delivered twice changes the row once.
func TestOutageBecomesOneScheduledCopyThatAppliesOnce(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	if _, err := r.mem.Insert(context.Background(), "o-1", order.State{Status: order.Created, LastSequence: 1}); err != nil {
		t.Fatal(err)
	}
	r.backend.down.Store(true)
	msg := statusMsg("o-1", 2, order.Paid)
	for n := 1; n <= 2; n++ { // the first answer is lost: the host delivers again
		code, a := r.post(t, hostInvocation(msg, n))
		if code != http.StatusOK || a.ReturnValue["result"] != ResultRescheduled {
			t.Fatalf("delivery %d: %d %v, want 200 Rescheduled", n, code, a.ReturnValue)
		}
	}
	if r.bus.calls != 2 || len(r.bus.kept) != 1 {
		t.Fatalf("schedule calls %d, kept %d; want 2 calls and one copy (same MessageId)", r.bus.calls, len(r.bus.kept))
	}
	c := r.bus.kept[0]
	if c.MessageID != "o-1:2:retry:1" || c.SessionID != "o-1" || c.Subject != msg.Subject || c.ContentType != msg.ContentType ||
		c.CorrelationID != msg.CorrelationID || !bytes.Equal(c.Body, msg.Body) || c.ApplicationProperties["Producer"] != "checkout" {
		t.Errorf("copy %+v does not keep the original's session, subject, body, content type, correlation id, properties", c)
	}
	if c.ApplicationProperties[reschedule.PropRetryAttempt] != int64(1) || c.ApplicationProperties[reschedule.PropOriginalMessageID] != "o-1:2" ||
		!strings.Contains(c.ApplicationProperties[reschedule.PropLastError].(string), "connection refused") {
		t.Errorf("copy properties %v", c.ApplicationProperties)
	}
	if first, _ := c.ApplicationProperties[reschedule.PropFirstFailureTime].(time.Time); !first.Equal(now0) {
		t.Errorf("FirstFailureTime = %v, want the broker's now %s", c.ApplicationProperties[reschedule.PropFirstFailureTime], now0)
	}
	if want := now0.Add(5 * time.Second); !r.bus.at[0].Equal(want) {
		t.Errorf("due %s, want %s (half of the first 10 s backoff)", r.bus.at[0], want)
	}
	if got := testutil.ToFloat64(r.m.Rescheduled.WithLabelValues(RescheduleTransient)); got != 2 {
		t.Errorf("orderstatus_rescheduled_total{reason=transient} = %v, want 2", got)
	}

	r.backend.down.Store(false)
	results := []string{}
	for n := 1; n <= 2; n++ { // the copy delivered twice (or two copies)
		code, a := r.post(t, hostInvocation(c, n))
		if code != http.StatusOK {
			t.Fatalf("copy delivery %d: %d", n, code)
		}
		results = append(results, a.ReturnValue["result"].(string))
	}
	if results[0] != "Applied" || results[1] != "Duplicate" {
		t.Errorf("copy delivered twice: %v, want Applied then Duplicate", results)
	}
	row, err := r.mem.Get(context.Background(), "o-1")
	if err != nil || row.State.Status != order.Paid || row.State.LastSequence != 2 {
		t.Errorf("row %+v, %v; want Paid/2", row.State, err)
	}
	if !strings.Contains(r.stdout.String(), `"original_message_id":"o-1:2"`) {
		t.Errorf("the copy's answer does not log original_message_id:\n%s", r.stdout.String())
	}
}

// A copy's copy counts on, keeps the first failure time, and past the
// window the message is parked with its last error, never dropped.
func TestRetryWindowExceededIsParked(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	r.backend.down.Store(true)
	msg := statusMsg("o-1", 2, order.Paid)
	msg.MessageID = "o-1:2:retry:3"
	msg.ApplicationProperties = map[string]any{reschedule.PropRetryAttempt: int64(3), reschedule.PropOriginalMessageID: "o-1:2",
		reschedule.PropFirstFailureTime: now0.Add(-30 * time.Minute)}
	if code, a := r.post(t, hostInvocation(msg, 1)); code != 200 || a.ReturnValue["result"] != ResultRescheduled {
		t.Fatalf("%d %v, want Rescheduled", code, a.ReturnValue)
	}
	c := r.bus.kept[0]
	if c.MessageID != "o-1:2:retry:4" || c.ApplicationProperties[reschedule.PropRetryAttempt] != int64(4) ||
		!c.ApplicationProperties[reschedule.PropFirstFailureTime].(time.Time).Equal(now0.Add(-30*time.Minute)) {
		t.Errorf("copy of a copy: %s %v", c.MessageID, c.ApplicationProperties)
	}

	msg.ApplicationProperties[reschedule.PropFirstFailureTime] = now0.Add(-time.Hour - time.Second)
	code, a := r.post(t, hostInvocation(msg, 1))
	if code != 200 || a.ReturnValue["result"] != ResultParked || a.ReturnValue["reason"] != order.ReasonRetryWindowExceeded {
		t.Fatalf("past the window: %d %v, want Parked RetryWindowExceeded", code, a.ReturnValue)
	}
	if len(r.parker.calls) != 1 || !strings.Contains(r.parker.calls[0].description, "connection refused") {
		t.Fatalf("park calls %+v, want one with the last error", r.parker.calls)
	}
	if p := parking.Message(r.parker.calls[0].orig, order.ReasonRetryWindowExceeded, ""); p.ApplicationProperties[parking.PropOriginalMessageID] != "o-1:2" {
		t.Errorf("parked copy names %v, want the original o-1:2", p.ApplicationProperties[parking.PropOriginalMessageID])
	}
	if len(r.bus.kept) != 1 {
		t.Errorf("scheduled %d copies, want none past the window", len(r.bus.kept)-1)
	}

	// A park that fails is a 5xx: never dropped.
	r.parker.errs = []error{broker.ErrTransient}
	if code, a := r.post(t, hostInvocation(msg, 2)); code != http.StatusServiceUnavailable || a.ReturnValue["result"] != ResultFailed {
		t.Errorf("failed park: %d %v, want 503", code, a.ReturnValue)
	}
}

// With the schedule failing too, the answer is 5xx as today.
func TestScheduleFailureAnswers5xx(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	r.backend.down.Store(true)
	r.bus.err = broker.ErrTransient
	code, a := r.post(t, hostInvocation(statusMsg("o-1", 2, order.Paid), 1))
	if code != http.StatusServiceUnavailable || a.ReturnValue["result"] != ResultFailed {
		t.Fatalf("%d %v, want 503 Failed", code, a.ReturnValue)
	}
}

// Rescheduling off (ORDER_STATUS_RETRY_RESCHEDULE=false) is today's
// policy: 5xx after the budget, nothing scheduled.
func TestReschedulingOff(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test", nil)
	back := &flakyBackend{Backend: memstore.New()}
	back.down.Store(true)
	h := New(orderstate.New(back, nil), &fakeParker{}, m, logging.New(&bytes.Buffer{}, nil, slog.LevelInfo),
		Options{Retry: retry.Policy{Budget: 10 * time.Millisecond, Initial: time.Millisecond}, Breaker: circuit.New(circuit.Options{Threshold: 1})})
	if h.opts.Breaker != nil {
		t.Error("a breaker without rescheduling was kept")
	}
	code, _ := (&rig{h: h}).post(t, hostInvocation(statusMsg("o-1", 2, order.Paid), 1))
	if code != http.StatusServiceUnavailable {
		t.Errorf("answer %d, want 503", code)
	}
	if New(orderstate.New(back, nil), &fakeParker{}, metrics.New(prometheus.NewRegistry(), "t", nil), nil, Options{}).opts.Retry.Budget != config.DefaultRetryBudgetNoReschedule {
		t.Error("the default budget without rescheduling is not config.DefaultRetryBudgetNoReschedule")
	}
}

// After Threshold failed calls the breaker opens: the next messages are
// rescheduled at once without a store call, one probe per interval goes
// through, and a probe that succeeds closes it.
func TestCircuitBreaker(t *testing.T) {
	clk := struct {
		sync.Mutex
		t time.Time
	}{t: now0}
	now := func() time.Time { clk.Lock(); defer clk.Unlock(); return clk.t }
	r := newOutageRig(t, policy, &circuit.Options{Threshold: 2, ProbeInterval: time.Minute, Now: now})
	r.backend.down.Store(true)
	post := func(seq int64) string {
		t.Helper()
		code, a := r.post(t, hostInvocation(statusMsg("o-1", seq, order.Paid), 1))
		if code != 200 {
			t.Fatalf("seq %d: answer %d %v", seq, code, a.ReturnValue)
		}
		return a.ReturnValue["result"].(string)
	}
	post(2)
	post(3)
	if open, closed := testutil.ToFloat64(r.m.CircuitState.WithLabelValues("open")), testutil.ToFloat64(r.m.CircuitState.WithLabelValues("closed")); open != 1 || closed != 0 {
		t.Fatalf("orderstatus_circuit_state{state=open} = %v, {state=closed} = %v after 2 failed calls, want 1 and 0", open, closed)
	}
	before := r.backend.calls.Load()
	for seq := int64(4); seq < 9; seq++ {
		if res := post(seq); res != ResultRescheduled {
			t.Fatalf("open circuit: %s, want Rescheduled", res)
		}
	}
	if calls := r.backend.calls.Load() - before; calls != 0 {
		t.Errorf("open circuit: %d store calls, want none", calls)
	}
	if got := testutil.ToFloat64(r.m.Rescheduled.WithLabelValues(RescheduleCircuitOpen)); got != 5 {
		t.Errorf("rescheduled{reason=circuit_open} = %v, want 5", got)
	}
	clk.Lock()
	clk.t = clk.t.Add(time.Minute)
	clk.Unlock()
	post(9) // the probe, failing: one store call, and open again
	if calls := r.backend.calls.Load() - before; calls != 1 {
		t.Errorf("a probe made %d store calls, want 1", calls)
	}
	post(10)
	if calls := r.backend.calls.Load() - before; calls != 1 {
		t.Errorf("a call right after a failed probe reached the store (%d calls)", calls)
	}
	r.backend.down.Store(false)
	clk.Lock()
	clk.t = clk.t.Add(time.Minute)
	clk.Unlock()
	if res := post(11); res != "Applied" {
		t.Errorf("probe after the store came back: %s, want Applied", res)
	}
	for _, st := range circuit.States {
		want := 0.0
		if st == circuit.Closed {
			want = 1
		}
		if got := testutil.ToFloat64(r.m.CircuitState.WithLabelValues(st.String())); got != want {
			t.Errorf("orderstatus_circuit_state{state=%s} = %v after a good probe, want %v", st, got, want)
		}
	}
	if got := testutil.ToFloat64(r.m.CircuitChanges.WithLabelValues("open")); got != 2 {
		t.Errorf("changes to open = %v, want 2", got)
	}
	if !strings.Contains(r.stdout.String(), "circuit breaker open") || !strings.Contains(r.stdout.String(), "circuit breaker closed") {
		t.Errorf("state changes not logged:\n%s", r.stdout.String())
	}
}

func timeoutMsg(id string) broker.Message {
	m := reschedule.TimeoutCheck(id, 1)
	return m
}

// A PaymentTimeoutCheck for an order with no row is checked again later,
// and parked OrderNeverCreated past the window; once the order exists it
// cancels it.
func TestTimeoutCheckBeforeTheOrderExists(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	code, a := r.post(t, hostInvocation(timeoutMsg("o-1"), 1))
	if code != 200 || a.ReturnValue["result"] != ResultRescheduled || len(r.bus.kept) != 1 || r.bus.kept[0].MessageID != "o-1:payment-timeout-1:retry:1" {
		t.Fatalf("check without a row: %d %v, scheduled %d", code, a.ReturnValue, len(r.bus.kept))
	}
	if got := testutil.ToFloat64(r.m.Rescheduled.WithLabelValues(RescheduleOrderNotFound)); got != 1 {
		t.Errorf("rescheduled{reason=order_not_found} = %v, want 1", got)
	}
	late := r.bus.kept[0]
	late.ApplicationProperties[reschedule.PropFirstFailureTime] = now0.Add(-2 * time.Hour)
	code, a = r.post(t, hostInvocation(late, 1))
	if code != 200 || a.ReturnValue["result"] != ResultParked || a.ReturnValue["reason"] != order.ReasonOrderNeverCreated {
		t.Fatalf("past the window: %d %v, want Parked OrderNeverCreated", code, a.ReturnValue)
	}

	if _, err := r.mem.Insert(context.Background(), "o-1", order.State{Status: order.Created, LastSequence: 1, OccurredAt: now0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// The delayed check cancels at once: it waits for nothing.
	if _, a := r.post(t, hostInvocation(r.bus.kept[0], 1)); a.ReturnValue["result"] != "Applied" {
		t.Fatalf("delayed check after the order appeared: %v, want Applied (cancelled)", a.ReturnValue)
	}
	row, _ := r.mem.Get(context.Background(), "o-1")
	if row.State.Status != order.Cancelled || !row.State.Deadline.Equal(now0.Add(-time.Hour).Add(30*time.Minute)) {
		t.Errorf("row %+v, want Cancelled with the deadline occurredAt + 30m", row.State)
	}
}

// The race an outage creates: an order is Created, then its Paid and its
// payment timeout both fail and wait as copies; after the store returns
// the check's copy comes back first and cancels the order, recording the
// deadline. The Paid's copy, whose original was enqueued by the deadline
// (it has no occurredAt: the copy carries OriginalEnqueuedTime), then
// supersedes the cancellation. A Paid first enqueued after the deadline
// is parked InvalidTransition.
func TestDelayedPaidSupersedesTheTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		enqueued time.Time // the Paid's first EnqueuedTimeUtc
		want     string
		row      order.Status
	}{
		{"enqueued by the deadline", now0.Add(-time.Minute), "Applied", order.Paid},
		{"enqueued after the deadline", now0.Add(time.Hour), ResultParked, order.Cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newOutageRig(t, policy, nil)
			created := statusMsg("o-1", 1, order.Created) // occurredAt 09:50: deadline 10:20
			if code, a := r.post(t, hostInvocation(created, 1)); code != 200 || a.ReturnValue["result"] != "Applied" {
				t.Fatalf("Created: %d %v", code, a.ReturnValue)
			}
			paid := statusMsg("o-1", 2, order.Paid)
			paid.Body = []byte(`{"orderId":"o-1","status":"Paid","sequence":2}`)
			r.backend.down.Store(true)
			if _, a := r.post(t, hostInvocationAt(paid, 1, tc.enqueued)); a.ReturnValue["result"] != ResultRescheduled {
				t.Fatalf("Paid during the outage: %v, want Rescheduled", a.ReturnValue)
			}
			if _, a := r.post(t, hostInvocation(timeoutMsg("o-1"), 1)); a.ReturnValue["result"] != ResultRescheduled {
				t.Fatalf("check during the outage: %v, want Rescheduled", a.ReturnValue)
			}
			paidCopy := r.bus.last(ofSession("o-1", order.SubjectStatusChanged))
			checkCopy := r.bus.last(ofSession("o-1", order.SubjectPaymentTimeout))
			if got, _ := paidCopy.ApplicationProperties[reschedule.PropOriginalEnqueuedTime].(time.Time); !got.Equal(tc.enqueued.Truncate(time.Second)) {
				t.Errorf("the Paid's copy carries %s %v, want %s", reschedule.PropOriginalEnqueuedTime, got, tc.enqueued)
			}
			r.backend.down.Store(false)
			if _, a := r.post(t, hostInvocation(checkCopy, 1)); a.ReturnValue["result"] != "Applied" {
				t.Fatalf("the check's copy first: %v, want Applied (cancelled)", a.ReturnValue)
			}
			// The copy comes back well after the deadline.
			if _, a := r.post(t, hostInvocationAt(paidCopy, 1, now0.Add(2*time.Hour))); a.ReturnValue["result"] != tc.want {
				t.Fatalf("the Paid's copy: %v, want %s", a.ReturnValue, tc.want)
			}
			if row, _ := r.mem.Get(context.Background(), "o-1"); row.State.Status != tc.row {
				t.Errorf("row %+v, want %s", row.State, tc.row)
			}
		})
	}
}

// Applying a Created schedules the order's PaymentTimeoutCheck at
// occurredAt + 30 min with the producer's MessageId; a redelivery
// (Duplicate) schedules it again, which duplicate detection absorbs; a
// failed schedule answers 5xx so the redelivery tries again.
func TestCreatedSchedulesTheTimeoutCheck(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	created := statusMsg("o-1", 1, order.Created) // occurredAt 09:50, now 10:00
	r.bus.err = broker.ErrTransient
	if code, a := r.post(t, hostInvocation(created, 1)); code != http.StatusServiceUnavailable || a.ReturnValue["result"] != ResultFailed {
		t.Fatalf("schedule failing: %d %v, want 503", code, a.ReturnValue)
	}
	r.bus.err = nil
	for n := 2; n <= 3; n++ {
		if code, a := r.post(t, hostInvocation(created, n)); code != 200 || a.ReturnValue["result"] != "Duplicate" {
			t.Fatalf("redelivery %d: %d %v, want 200 Duplicate", n, code, a.ReturnValue)
		}
	}
	if len(r.bus.kept) != 1 || r.bus.kept[0].MessageID != "o-1:payment-timeout-1" || r.bus.kept[0].Subject != order.SubjectPaymentTimeout {
		t.Fatalf("kept %+v, want one o-1:payment-timeout-1", r.bus.kept)
	}
	if want := time.Date(2026, 12, 1, 10, 20, 0, 0, time.UTC); !r.bus.at[0].Equal(want) {
		t.Errorf("check due %s, want occurredAt + 30 min = %s", r.bus.at[0], want)
	}
	if got := testutil.ToFloat64(r.m.TimeoutChecks.WithLabelValues("scheduled")); got != 2 {
		t.Errorf("timeout checks scheduled = %v, want 2", got)
	}
	// A Paid does not schedule one; an overdue Created is checked at once
	// (its Paid, if it occurred in time, supersedes the cancellation).
	r.post(t, hostInvocation(statusMsg("o-1", 2, order.Paid), 1))
	old := statusMsg("o-2", 1, order.Created)
	old.Body = []byte(`{"orderId":"o-2","status":"Created","sequence":1,"occurredAt":"2026-12-01T08:00:00Z"}`)
	r.post(t, hostInvocation(old, 1))
	if len(r.bus.kept) != 2 || !r.bus.at[1].Equal(now0) {
		t.Errorf("overdue Created: %d checks, due %v; want a second one due now", len(r.bus.kept), r.bus.at)
	}
}

// The longest legal ids: a 128-character order id and a 128-character
// MessageId through retry, park and the payment-timeout check, every
// derived MessageId within 128.
func TestLongestIDs(t *testing.T) {
	id := strings.Repeat("o", order.MaxIDLength)
	r := newOutageRig(t, policy, nil)
	r.backend.down.Store(true)
	m := statusMsg(id, 2, order.Paid)
	m.MessageID = strings.Repeat("m", contract.MaxServiceBusIDLength)
	if code, a := r.post(t, hostInvocation(m, 1)); code != 200 || a.ReturnValue["result"] != ResultRescheduled {
		t.Fatalf("%d %v", code, a.ReturnValue)
	}
	c := r.bus.kept[0]
	if len(c.MessageID) > contract.MaxServiceBusIDLength || c.SessionID != id || c.ApplicationProperties[reschedule.PropOriginalMessageID] != m.MessageID {
		t.Errorf("copy id %q (%d), session %d characters", c.MessageID, len(c.MessageID), len(c.SessionID))
	}
	c.ApplicationProperties[reschedule.PropFirstFailureTime] = now0.Add(-2 * time.Hour)
	if _, a := r.post(t, hostInvocation(c, 1)); a.ReturnValue["result"] != ResultParked {
		t.Fatalf("past the window: %v", a.ReturnValue)
	}
	p := parking.Message(r.parker.calls[0].orig, order.ReasonRetryWindowExceeded, "x")
	if len(p.MessageID) > contract.MaxServiceBusIDLength || p.ApplicationProperties[parking.PropOriginalMessageID] != m.MessageID {
		t.Errorf("parked id %q (%d characters), original %v", p.MessageID, len(p.MessageID), p.ApplicationProperties[parking.PropOriginalMessageID])
	}
	r.backend.down.Store(false)
	created := statusMsg(id, 1, order.Created)
	if _, a := r.post(t, hostInvocation(created, 1)); a.ReturnValue["result"] != "Applied" {
		t.Fatalf("Created: %v", a.ReturnValue)
	}
	tc := r.bus.kept[len(r.bus.kept)-1]
	if tc.Subject != order.SubjectPaymentTimeout || len(tc.MessageID) > contract.MaxServiceBusIDLength || tc.SessionID != id {
		t.Errorf("timeout check id %q (%d characters)", tc.MessageID, len(tc.MessageID))
	}
	if code, a := r.post(t, hostInvocation(tc, 1)); code != 200 || a.ReturnValue["result"] != "Applied" {
		t.Errorf("timeout check of a 128-character order: %d %v, want Applied (cancelled)", code, a.ReturnValue)
	}
}

// Past its window a message meeting an open breaker still tries the store
// once before it is parked: it is applied when the store is back, and
// parked with the store's own error when it is not.
func TestPastTheWindowTriesTheStoreDespiteTheBreaker(t *testing.T) {
	r := newOutageRig(t, policy, &circuit.Options{Threshold: 1, ProbeInterval: time.Hour})
	r.backend.down.Store(true)
	r.post(t, hostInvocation(statusMsg("o-1", 1, order.Created), 1)) // opens the breaker
	old := statusMsg("o-1", 1, order.Created)
	old.MessageID = "o-1:1:retry:9"
	old.ApplicationProperties = map[string]any{reschedule.PropRetryAttempt: int64(9), reschedule.PropOriginalMessageID: "o-1:1",
		reschedule.PropFirstFailureTime: now0.Add(-2 * time.Hour)}
	before := r.backend.calls.Load()
	if _, a := r.post(t, hostInvocation(old, 1)); a.ReturnValue["result"] != ResultParked || !strings.Contains(a.ReturnValue["description"].(string), "connection refused") {
		t.Fatalf("store down: %v, want Parked with the store's error", a.ReturnValue)
	}
	if r.backend.calls.Load() == before {
		t.Fatal("parked without trying the store")
	}
	r.backend.down.Store(false)
	if _, a := r.post(t, hostInvocation(old, 2)); a.ReturnValue["result"] != "Applied" {
		t.Fatalf("store back, breaker still open: %v, want Applied", a.ReturnValue)
	}
}
