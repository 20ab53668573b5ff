package orderfn

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
)

// lineKeys returns a JSON line's keys in order, each with the kind of its
// value (s string, n number, b bool), and the line decoded.
func lineKeys(t *testing.T, line string) (string, map[string]any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", line)
	}
	var keys []string
	rec := map[string]any{}
	for d.More() {
		k, _ := d.Token()
		v, err := d.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		kind := "?"
		switch v.(type) {
		case string:
			kind = "s"
		case json.Number:
			kind = "n"
		case bool:
			kind = "b"
		}
		keys = append(keys, k.(string)+":"+kind)
		rec[k.(string)] = v
	}
	return strings.Join(keys, " "), rec
}

// TestSettledLineKeys pins the settled line's keys, their order and their
// JSON kinds (what the alerts' KQL, the workbook, the dev host's logTap
// and the simulation read), for each kind of outcome, and checks that a
// logger from logging.New (logging.Line's own encoder) and any other
// slog logger (Line through slog) write the same line.
func TestSettledLineKeys(t *testing.T) {
	const head = "time:s level:s msg:s order_id:s message_id:s delivery_count:n sequence:n subject:s result:s duration_ms:n round_trips:n"
	tests := []struct {
		name    string
		outcome orderstate.Outcome
		err     error
		body    string
		want    string
	}{
		{"applied", orderstate.Outcome{Result: order.Applied, State: order.State{Status: order.Paid, LastSequence: 2}, RoundTrips: 1, CacheHit: true, Conflicts: 1}, nil, paid,
			head + " status:s cache_hit:b etag_conflicts:n invocation_id:s trace_id:s operation_id:s lag_ms:n occurred_lag_ms:n"},
		{"duplicate", orderstate.Outcome{Result: order.Duplicate, State: order.State{Status: order.Paid, LastSequence: 2}}, nil, paid,
			head + " invocation_id:s trace_id:s operation_id:s lag_ms:n"},
		{"parked", orderstate.Outcome{}, nil, `{"orderId":"o-1","status":"Lost","sequence":2}`,
			head + " reason:s description:s invocation_id:s trace_id:s operation_id:s lag_ms:n"},
		{"failed", orderstate.Outcome{}, errors.New("boom"), paid,
			head + " invocation_id:s trace_id:s operation_id:s error:s"},
	}
	clock := time.Date(2026, 11, 29, 10, 20, 31, 0, time.UTC) // the lags' clock, fixed
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lines [2]map[string]any
			for i, mk := range []func(io.Writer) *slog.Logger{
				func(w io.Writer) *slog.Logger { return logging.New(w, w, slog.LevelInfo) },
				func(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) },
			} {
				var out bytes.Buffer
				a := &fakeApplier{outcomes: []orderstate.Outcome{tt.outcome}, errs: []error{tt.err}}
				h := New(a, &fakeParker{}, metrics.New(prometheus.NewRegistry(), "test"), mk(&out), Options{Retry: retry.Policy{Budget: 50 * time.Millisecond}, Now: func() time.Time { return clock }})
				var inv map[string]any
				if err := json.Unmarshal(invocation("OrderStatusChanged", "o-1", "o-1:2", 1, tt.body), &inv); err != nil {
					t.Fatal(err)
				}
				inv["Metadata"].(map[string]any)["ApplicationProperties"] = map[string]any{"Diagnostic-Id": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
				body, _ := json.Marshal(inv)
				req := httptest.NewRequest(http.MethodPost, "/OrderStatus", bytes.NewReader(body))
				req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
				req.Header.Set("X-Azure-Functions-InvocationId", "6a1f3b1e-0c1d-4d6e-9f00-123456789abc")
				h.ServeHTTP(httptest.NewRecorder(), req)
				text := strings.TrimSpace(out.String())
				if strings.Count(text, "\n") != 0 || text == "" {
					t.Fatalf("want one line, got %q", out.String())
				}
				keys, rec := lineKeys(t, text)
				if keys != tt.want {
					t.Errorf("logger %d: keys\n got %s\nwant %s", i, keys, tt.want)
				}
				delete(rec, "time")
				delete(rec, "duration_ms") // measured: differs from call to call
				lines[i] = rec
			}
			if !reflect.DeepEqual(lines[0], lines[1]) {
				t.Errorf("logging.New's line and slog's differ:\n%v\n%v", lines[0], lines[1])
			}
		})
	}
}
