package orderfn

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// fakeApplier returns scripted results, one per call (the last repeats).
type fakeApplier struct {
	mu       sync.Mutex
	outcomes []orderstate.Outcome
	errs     []error
	applied  []order.Update
	locks    []orderstate.Lock
	expired  []string
	// left is, per ApplyUnder, the time its context had left.
	left []time.Duration
}

func (f *fakeApplier) next() (orderstate.Outcome, error) {
	n := len(f.applied) + len(f.expired) - 1
	var o orderstate.Outcome
	var err error
	if len(f.outcomes) > 0 {
		o = f.outcomes[min(n, len(f.outcomes)-1)]
	}
	if len(f.errs) > 0 {
		err = f.errs[min(n, len(f.errs)-1)]
	}
	return o, err
}

func (f *fakeApplier) ApplyUnder(ctx context.Context, u order.Update, lock orderstate.Lock) (orderstate.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		f.left = append(f.left, time.Until(d))
	}
	f.applied = append(f.applied, u)
	f.locks = append(f.locks, lock)
	return f.next()
}

func (f *fakeApplier) Get(context.Context, string) (store.Row, error) {
	return store.Row{}, errors.New("fakeApplier: Get is not scripted")
}

func (f *fakeApplier) ExpireIfUnpaid(_ context.Context, id string, _ int64) (orderstate.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expired = append(f.expired, id)
	return f.next()
}

type parkCall struct {
	orig                parking.Original
	reason, description string
}

type fakeParker struct {
	mu    sync.Mutex
	calls []parkCall
	errs  []error
}

func (f *fakeParker) Park(_ context.Context, o parking.Original, reason, description string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, parkCall{o, reason, description})
	if len(f.errs) == 0 {
		return nil
	}
	return f.errs[min(len(f.calls)-1, len(f.errs)-1)]
}

// invocation builds a host request body the way the Functions host does
// for dataType binary: base64 body, metadata values as JSON-in-strings.
func invocation(subject, sessionID, messageID string, deliveryCount int, body string) []byte {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	meta := map[string]any{
		"DeliveryCount":         fmt.Sprint(deliveryCount),
		"SequenceNumber":        "17",
		"MessageId":             q(messageID),
		"SessionId":             q(sessionID),
		"Subject":               q(subject),
		"ContentType":           q("application/json"),
		"EnqueuedTimeUtc":       "2026-11-29T10:20:30",
		"ApplicationProperties": map[string]any{},
		"sys":                   map[string]any{"MethodName": "OrderStatus", "UtcNow": "2026-11-29T10:20:31.12Z"},
	}
	b, _ := json.Marshal(map[string]any{
		"Data":     map[string]any{"message": base64.StdEncoding.EncodeToString([]byte(body))},
		"Metadata": meta,
	})
	return b
}

const paid = `{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}`

type answer struct {
	Outputs     map[string]any
	Logs        []string
	ReturnValue map[string]any
}

type rig struct {
	h       *Handler
	applier *fakeApplier
	parker  *fakeParker
	reg     *prometheus.Registry
	m       *metrics.Metrics
	stdout  *bytes.Buffer
}

func newRig(a *fakeApplier, p *fakeParker, stop context.Context) *rig {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test", nil)
	var out bytes.Buffer
	log := logging.New(&out, nil, slog.LevelInfo)
	h := New(a, p, m, log, Options{Retry: retry.Policy{Budget: 50 * time.Millisecond, Initial: time.Millisecond, Max: 5 * time.Millisecond}, Stop: stop})
	return &rig{h: h, applier: a, parker: p, reg: reg, m: m, stdout: &out}
}

func (r *rig) post(t *testing.T, body []byte) (int, answer) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/OrderStatus", bytes.NewReader(body)))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var a answer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("answer is not JSON: %q", rec.Body.String())
	}
	return rec.Code, a
}

func TestSettlement(t *testing.T) {
	applied := orderstate.Outcome{Result: order.Applied, State: order.State{Status: order.Paid, LastSequence: 2}, RoundTrips: 1}
	invalidTransition := orderstate.Outcome{Result: order.InvalidTransition,
		Poison: &order.PoisonError{Reason: order.ReasonInvalidTransition, Description: "order o-1 is Cancelled; cannot move to Paid"}}
	tests := []struct {
		name        string
		body        []byte
		applier     *fakeApplier
		parker      *fakeParker
		wantStatus  int
		wantResult  string
		wantApplies int
		wantExpires int
		wantParked  string // reason; "" = no park call
	}{
		{"applied", invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid),
			&fakeApplier{outcomes: []orderstate.Outcome{applied}}, &fakeParker{}, 200, "Applied", 1, 0, ""},
		{"duplicate on redelivery", invocation("OrderStatusChanged", "o-1", "o-1:2", 2, paid),
			&fakeApplier{outcomes: []orderstate.Outcome{{Result: order.Duplicate}}}, &fakeParker{}, 200, "Duplicate", 1, 0, ""},
		{"stale", invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid),
			&fakeApplier{outcomes: []orderstate.Outcome{{Result: order.Stale}}}, &fakeParker{}, 200, "Stale", 1, 0, ""},
		{"payment timeout", invocation("PaymentTimeoutCheck", "o-1", "o-1:payment-timeout", 1, `{"orderId":"o-1"}`),
			&fakeApplier{outcomes: []orderstate.Outcome{{Result: order.Applied, State: order.State{Status: order.Cancelled}}}}, &fakeParker{}, 200, "Applied", 0, 1, ""},
		{"bad json is parked", invocation("OrderStatusChanged", "o-1", "o-1:2", 1, `{"orderId":`),
			&fakeApplier{}, &fakeParker{}, 200, ResultParked, 0, 0, order.ReasonInvalidPayload},
		{"session mismatch is parked", invocation("OrderStatusChanged", "o-2", "o-1:2", 1, paid),
			&fakeApplier{}, &fakeParker{}, 200, ResultParked, 0, 0, order.ReasonInvalidPayload},
		{"bad timeout body is parked", invocation("PaymentTimeoutCheck", "o-1", "x", 1, `[]`),
			&fakeApplier{}, &fakeParker{}, 200, ResultParked, 0, 0, order.ReasonInvalidPayload},
		{"unknown subject is parked", invocation("OrderRefunded", "o-1", "o-1:9", 1, paid),
			&fakeApplier{}, &fakeParker{}, 200, ResultParked, 0, 0, order.ReasonUnknownSubject},
		{"invalid transition is parked", invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid),
			&fakeApplier{outcomes: []orderstate.Outcome{invalidTransition}}, &fakeParker{}, 200, ResultParked, 1, 0, order.ReasonInvalidTransition},
		{"poison without service bus fails", invocation("OrderRefunded", "o-1", "o-1:9", 1, paid),
			&fakeApplier{}, &fakeParker{errs: []error{parking.ErrNotConfigured}}, 500, ResultFailed, 0, 0, order.ReasonUnknownSubject},
		{"park outage past budget fails", invocation("OrderRefunded", "o-1", "o-1:9", 1, paid),
			&fakeApplier{}, &fakeParker{errs: []error{broker.ErrTransient}}, 503, ResultFailed, 0, 0, order.ReasonUnknownSubject},
		{"park retried after a blip", invocation("OrderRefunded", "o-1", "o-1:9", 1, paid),
			&fakeApplier{}, &fakeParker{errs: []error{broker.ErrTransient, nil}}, 200, ResultParked, 0, 0, order.ReasonUnknownSubject},
		{"storage blip is retried in the call", invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid),
			&fakeApplier{outcomes: []orderstate.Outcome{{}, {}, applied}, errs: []error{store.ErrTransient, store.ErrTransient, nil}}, &fakeParker{}, 200, "Applied", 3, 0, ""},
		{"storage outage past budget fails", invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid),
			&fakeApplier{errs: []error{fmt.Errorf("tablestore: replace o-1: %w", store.ErrTransient)}}, &fakeParker{}, 503, ResultFailed, -1, 0, ""},
		{"permanent storage error fails at once", invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid),
			&fakeApplier{errs: []error{errors.New("403 AuthorizationPermissionMismatch")}}, &fakeParker{}, 500, ResultFailed, 1, 0, ""},
		{"invocation not json fails", []byte(`not json`), &fakeApplier{}, &fakeParker{}, 500, ResultFailed, 0, 0, ""},
		{"invocation without the binding fails", []byte(`{"Data":{},"Metadata":{}}`), &fakeApplier{}, &fakeParker{}, 500, ResultFailed, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(tt.applier, tt.parker, nil)
			status, a := r.post(t, tt.body)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d (answer %+v)", status, tt.wantStatus, a)
			}
			if got := a.ReturnValue["result"]; got != tt.wantResult {
				t.Errorf("ReturnValue.result = %v, want %s", got, tt.wantResult)
			}
			// Logs only on failure: a success's line would be dropped by
			// host.json (Function at Warning), the stdout line records it.
			if failed := tt.wantStatus >= 300; (len(a.Logs) > 0) != failed || a.Outputs == nil {
				t.Errorf("answer %+v: want Outputs, and Logs only on failure", a)
			}
			if tt.wantApplies >= 0 && len(r.applier.applied) != tt.wantApplies {
				t.Errorf("Apply called %d times, want %d", len(r.applier.applied), tt.wantApplies)
			}
			if tt.wantApplies < 0 && len(r.applier.applied) < 2 {
				t.Errorf("Apply called %d times, want retries", len(r.applier.applied))
			}
			if len(r.applier.expired) != tt.wantExpires {
				t.Errorf("ExpireIfUnpaid called %d times, want %d", len(r.applier.expired), tt.wantExpires)
			}
			if tt.wantParked == "" && len(r.parker.calls) > 0 {
				t.Errorf("parked %+v, want no park", r.parker.calls)
			}
			if tt.wantParked != "" {
				if len(r.parker.calls) == 0 {
					t.Fatalf("not parked, want reason %s", tt.wantParked)
				}
				c := r.parker.calls[len(r.parker.calls)-1]
				if c.reason != tt.wantParked || c.description == "" {
					t.Errorf("parked with %q (%q), want %s and a description", c.reason, c.description, tt.wantParked)
				}
				if c.orig.DeliveryCount == 0 || c.orig.SequenceNumber != 17 || len(c.orig.Body) == 0 {
					t.Errorf("parked original lacks its ids or body: %+v", c.orig)
				}
			}
			if got := testutil.ToFloat64(r.m.Messages.WithLabelValues(subjectLabel(subjectOf(tt.body)), tt.wantResult)); got != 1 {
				t.Errorf("messages_total{result=%s} = %v, want 1", tt.wantResult, got)
			}
			// The rows' applied outcomes report one round trip; the others none.
			wantTrips := 0.0
			if tt.wantResult == "Applied" && subjectOf(tt.body) == "OrderStatusChanged" {
				wantTrips = 1
			}
			if got := testutil.ToFloat64(r.m.MessageRoundTrips.WithLabelValues(subjectLabel(subjectOf(tt.body)), tt.wantResult)); got != wantTrips {
				t.Errorf("message_round_trips_total{result=%s} = %v, want %v", tt.wantResult, got, wantTrips)
			}
		})
	}
}

func subjectOf(body []byte) string {
	var inv struct{ Metadata map[string]string }
	_ = json.Unmarshal(body, &inv)
	var s string
	_ = json.Unmarshal([]byte(inv.Metadata["Subject"]), &s)
	return s
}

// The in-call budget is Options.Retry's, in real time, whatever the
// request carries: the header the development host once sent for a
// faster clock changes nothing.
func TestInCallBudgetIsRealTime(t *testing.T) {
	policy := retry.Policy{Budget: 10 * time.Second, Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond}
	for _, header := range []string{"", "20", "1000"} {
		a := &fakeApplier{errs: []error{store.ErrTransient, nil}, outcomes: []orderstate.Outcome{{}, {Result: order.Applied, State: order.State{Status: order.Paid, LastSequence: 2}, RoundTrips: 1}}}
		r := newRig(a, &fakeParker{}, nil)
		r.h.opts.Retry = policy
		req := httptest.NewRequest(http.MethodPost, "/OrderStatus", bytes.NewReader(invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid)))
		if header != "" {
			req.Header.Set("X-Orderstatus-Clock-Rate", header)
		}
		rec := httptest.NewRecorder()
		r.h.ServeHTTP(rec, req)
		if len(a.left) == 0 {
			t.Fatal("the store was never called with a deadline")
		}
		if first := a.left[0]; first < 9*time.Second || rec.Code != http.StatusOK {
			t.Errorf("header %q: first attempt had %v left, answer %d; want the whole 10 s budget and 200", header, first, rec.Code)
		}
	}
}

func TestShutdownDuringRetryAnswers503(t *testing.T) {
	stop, cancel := context.WithCancel(context.Background())
	a := &fakeApplier{errs: []error{store.ErrTransient}}
	r := newRig(a, &fakeParker{}, stop)
	r.h.opts.Retry = retry.Policy{Budget: time.Hour, Initial: time.Hour, Max: time.Hour}
	go func() {
		for {
			a.mu.Lock()
			n := len(a.applied)
			a.mu.Unlock()
			if n > 0 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	status, ans := r.post(t, invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid))
	if status != http.StatusServiceUnavailable || ans.ReturnValue["result"] != ResultFailed {
		t.Errorf("status %d result %v, want 503 Failed", status, ans.ReturnValue["result"])
	}
}

func TestOneLogLinePerAttempt(t *testing.T) {
	a := &fakeApplier{outcomes: []orderstate.Outcome{{Result: order.Applied, Gap: 2, State: order.State{Status: order.Paid, LastSequence: 4}, RoundTrips: 1}}}
	r := newRig(a, &fakeParker{}, nil)
	r.post(t, invocation("OrderStatusChanged", "o-1", "o-1:4", 3, strings.Replace(paid, `"sequence":2`, `"sequence":4`, 1)))
	lines := strings.Split(strings.TrimSpace(r.stdout.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d log lines, want 1: %s", len(lines), r.stdout.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"order_id": "o-1", "message_id": "o-1:4", "delivery_count": 3.0, "sequence": 4.0,
		"subject": "OrderStatusChanged", "result": "Applied", "status": "Paid", "gap": 2.0, "level": "WARN"}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("log %s = %v, want %v", k, rec[k], v)
		}
	}
	if _, ok := rec["duration_ms"]; !ok {
		t.Error("log line lacks duration_ms")
	}
	if got := testutil.ToFloat64(r.m.SequenceGaps); got != 1 {
		t.Errorf("sequence_gaps_total = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(r.m.DeliveryCount); got != 1 {
		t.Errorf("delivery_count histogram series = %d, want 1", got)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	r := newRig(&fakeApplier{}, &fakeParker{}, nil)
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/OrderStatus", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Body.Len() == 0 {
		t.Errorf("GET: %d %q, want 405 with a JSON body", rec.Code, rec.Body.String())
	}
}

// TestSessionLockAndConflictsReachTheStore: the session lock the host sent
// goes to the store layer with the update, and the ETag conflicts of the
// call are on its log line.
func TestSessionLockAndConflictsReachTheStore(t *testing.T) {
	a := &fakeApplier{outcomes: []orderstate.Outcome{{Result: order.Applied, State: order.State{Status: order.Paid, LastSequence: 2}, RoundTrips: 3, Conflicts: 1, CacheHit: true}}}
	r := newRig(a, &fakeParker{}, nil)
	body := invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid)
	var inv map[string]any
	_ = json.Unmarshal(body, &inv)
	inv["Metadata"].(map[string]any)["SessionActions"] = map[string]any{"SessionLockedUntil": "2026-11-29T10:21:30+00:00"}
	body, _ = json.Marshal(inv)
	if code, _ := r.post(t, body); code != http.StatusOK {
		t.Fatalf("status %d, want 200", code)
	}
	want := time.Date(2026, 11, 29, 10, 21, 30, 0, time.UTC)
	if len(a.locks) != 1 || !a.locks[0].Until.Equal(want) {
		t.Errorf("locks passed = %v, want one until %s", a.locks, want)
	}
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(r.stdout.Bytes()), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["etag_conflicts"] != 1.0 || rec["round_trips"] != 3.0 || rec["cache_hit"] != true {
		t.Errorf("log line %v: want etag_conflicts 1, round_trips 3, cache_hit true", rec)
	}
}

// refusedThenCutShort fails its first attempts with a transient
// "connection refused" and blocks the next until the call's deadline, then
// reports what the table adapter reports then: only the context's error.
type refusedThenCutShort struct {
	mu    sync.Mutex
	calls int
}

func (f *refusedThenCutShort) ApplyUnder(ctx context.Context, u order.Update, _ orderstate.Lock) (orderstate.Outcome, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n < 3 {
		return orderstate.Outcome{}, fmt.Errorf("store: apply %s seq %d: dial tcp 127.0.0.1:10002: connect: connection refused: %w", u.OrderID, u.Sequence, store.ErrTransient)
	}
	<-ctx.Done()
	return orderstate.Outcome{}, fmt.Errorf("store: apply %s seq %d: %w (%w)", u.OrderID, u.Sequence, ctx.Err(), ctx.Err())
}

func (f *refusedThenCutShort) ExpireIfUnpaid(context.Context, string, int64) (orderstate.Outcome, error) {
	return orderstate.Outcome{}, errors.New("not used")
}

func (f *refusedThenCutShort) Get(context.Context, string) (store.Row, error) {
	return store.Row{}, errors.New("not used")
}

// TestFailureCarriesTheLastUnderlyingCause: when the call's deadline cuts
// the last attempt short, the answer's error, the invocation Logs and the
// log line still say what the retries saw.
func TestFailureCarriesTheLastUnderlyingCause(t *testing.T) {
	reg := prometheus.NewRegistry()
	var out bytes.Buffer
	h := New(&refusedThenCutShort{}, &fakeParker{}, metrics.New(reg, "test", nil), logging.New(&out, &out, slog.LevelInfo),
		Options{Retry: retry.Policy{Budget: 50 * time.Millisecond, Initial: time.Millisecond, Max: time.Millisecond}})
	r := &rig{h: h, stdout: &out}
	status, ans := r.post(t, invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid))
	if status != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", status)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil || rec["result"] != ResultFailed {
		t.Fatalf("last log line %q (%v): want the Failed line", lines[len(lines)-1], err)
	}
	rvErr, _ := ans.ReturnValue["error"].(string)
	logErr, _ := rec["error"].(string)
	if len(ans.Logs) != 1 {
		t.Fatalf("Logs = %q, want one line", ans.Logs)
	}
	for where, s := range map[string]string{"the answer's error": rvErr, "the invocation Logs": ans.Logs[0], "the log line's error": logErr} {
		if !strings.Contains(s, "connection refused") || strings.Contains(s, "context deadline exceeded (context deadline exceeded)") {
			t.Errorf("%s = %q, want the last underlying cause (connection refused), not only the deadline", where, s)
		}
	}
}

// TestFreshnessLags: a settled message records how old it was when settled
// (from EnqueuedTimeUtc) and, when applied with an occurredAt, how old the
// change was when written; on the histogram by kind and on the log line.
// An unsettled (5xx) message records neither.
func TestFreshnessLags(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 20, 33, 500_000_000, time.UTC) // the invocation was enqueued at 10:20:30
	tests := []struct {
		name                 string
		applier              *fakeApplier
		status               int
		lagMS, occurredLagMS any // nil: absent
	}{
		{"applied", &fakeApplier{outcomes: []orderstate.Outcome{{Result: order.Applied, State: order.State{Status: order.Paid, LastSequence: 2}}}},
			http.StatusOK, 3500.0, (20*60 + 33.5) * 1000},
		{"duplicate: settled, nothing applied", &fakeApplier{outcomes: []orderstate.Outcome{{Result: order.Duplicate}}},
			http.StatusOK, 3500.0, nil},
		{"failed: not settled", &fakeApplier{errs: []error{errors.New("boom")}},
			http.StatusInternalServerError, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(tt.applier, &fakeParker{}, nil)
			r.h.opts.Now = func() time.Time { return now }
			status, _ := r.post(t, invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid))
			if status != tt.status {
				t.Fatalf("status = %d, want %d", status, tt.status)
			}
			var rec map[string]any
			if err := json.Unmarshal(bytes.TrimSpace(r.stdout.Bytes()), &rec); err != nil {
				t.Fatalf("log line %q: %v", r.stdout.String(), err)
			}
			if rec["lag_ms"] != tt.lagMS || rec["occurred_lag_ms"] != tt.occurredLagMS {
				t.Errorf("lag_ms %v occurred_lag_ms %v, want %v and %v", rec["lag_ms"], rec["occurred_lag_ms"], tt.lagMS, tt.occurredLagMS)
			}
			// Observations and their sum by kind, read from the registry.
			counts, sums := map[string]uint64{}, map[string]float64{}
			mfs, err := r.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != "orderstatus_lag_seconds" {
					continue
				}
				for _, m := range mf.GetMetric() {
					kind := m.GetLabel()[0].GetValue()
					counts[kind], sums[kind] = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
			count := func(kind string) uint64 { return counts[kind] }
			sum := func(kind string) float64 { return sums[kind] }
			wantCount := func(v any) uint64 {
				if v == nil {
					return 0
				}
				return 1
			}
			if got := count(metrics.LagEnqueuedToSettled); got != wantCount(tt.lagMS) {
				t.Errorf("enqueued_to_settled observations = %d, want %d", got, wantCount(tt.lagMS))
			} else if tt.lagMS != nil && sum(metrics.LagEnqueuedToSettled) != tt.lagMS.(float64)/1000 {
				t.Errorf("enqueued_to_settled sum = %v s, want %v", sum(metrics.LagEnqueuedToSettled), tt.lagMS.(float64)/1000)
			}
			if got := count(metrics.LagOccurredToApplied); got != wantCount(tt.occurredLagMS) {
				t.Errorf("occurred_to_applied observations = %d, want %d", got, wantCount(tt.occurredLagMS))
			}
		})
	}
}

// TestEveryLineCarriesTheTrace: the producer's trace (the message's
// Diagnostic-Id, as older SDKs write it) and the host's operation (the
// request's traceparent) are on every line of the message: each retry's
// and the final one.
func TestEveryLineCarriesTheTrace(t *testing.T) {
	const producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	const host = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	a := &fakeApplier{errs: []error{store.ErrTransient, nil}, outcomes: []orderstate.Outcome{{}, {Result: order.Applied, State: order.State{Status: order.Paid}}}}
	r := newRig(a, &fakeParker{}, nil)
	var inv map[string]any
	if err := json.Unmarshal(invocation("OrderStatusChanged", "o-1", "o-1:2", 1, paid), &inv); err != nil {
		t.Fatal(err)
	}
	inv["Metadata"].(map[string]any)["ApplicationProperties"] = map[string]any{"Diagnostic-Id": producer}
	body, _ := json.Marshal(inv)
	req := httptest.NewRequest(http.MethodPost, "/OrderStatus", bytes.NewReader(body))
	req.Header.Set("traceparent", host)
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want a retry and the settled line:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e["trace_id"] != "0af7651916cd43dd8448eb211c80319c" || e["operation_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("line %s: trace_id %v operation_id %v, want the producer's and the host's trace ids", l, e["trace_id"], e["operation_id"])
		}
	}
}
