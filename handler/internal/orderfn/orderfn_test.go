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

func (f *fakeApplier) ApplyUnder(_ context.Context, u order.Update, lock orderstate.Lock) (orderstate.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, u)
	f.locks = append(f.locks, lock)
	return f.next()
}

func (f *fakeApplier) ExpireIfUnpaid(_ context.Context, id string) (orderstate.Outcome, error) {
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
	m := metrics.New(reg, "test")
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
		"subject": "OrderStatusChanged", "result": "Applied", "gap": 2.0, "level": "WARN"}
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
