package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

type fakeOrders map[string]store.Row

func (f fakeOrders) Get(_ context.Context, id string) (store.Row, error) {
	if id == "down" {
		return store.Row{}, fmt.Errorf("tablestore: get down: %w", store.ErrTransient)
	}
	r, ok := f[id]
	if !ok {
		return store.Row{}, fmt.Errorf("tablestore: get %s: %w", id, store.ErrNotFound)
	}
	return r, nil
}

func newRouter(t *testing.T) http.Handler {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "test", nil)
	m.Messages.WithLabelValues("OrderStatusChanged", "Applied").Inc()
	m.Duration.WithLabelValues("OrderStatusChanged").Observe(0.01)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	orders := fakeOrders{"o-1": {OrderID: "o-1", ETag: "W/1", State: order.State{Status: order.Paid, LastSequence: 2, OccurredAt: at, UpdatedAt: at.Add(time.Second)}}}
	fn := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ReturnValue":"called"}`)
	})
	return New(Options{Orders: orders, Gatherer: reg, Functions: map[string]http.Handler{"OrderStatus": fn},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func TestRoutes(t *testing.T) {
	tests := []struct {
		method, path string
		wantStatus   int
		wantCT       string
		wantBody     string // substring
	}{
		{"GET", "/", 200, "application/json", `"ready"`},
		{"GET", "/api/orders/o-1", 200, "application/json", `{"orderId":"o-1","status":"Paid","lastSequence":2,"occurredAt":"2026-11-29T10:00:00Z","updatedAt":"2026-11-29T10:00:01Z"}`},
		{"GET", "/api/orders/o-404", 404, "application/json", `"order not found"`},
		{"GET", "/api/orders/a%23b", 400, "application/json", `illegal order id`},
		{"GET", "/api/orders/" + strings.Repeat("x", 257), 400, "application/json", `illegal order id`},
		{"GET", "/api/orders/down", 503, "application/json", `store unavailable`},
		{"GET", "/api/orders/", 400, "application/json", `illegal order id`},
		{"GET", "/api/metrics", 200, "text/plain", `orderstatus_messages_total{result="Applied",subject="OrderStatusChanged"} 1`},
		{"POST", "/OrderStatus", 200, "application/json", `"called"`},
		{"POST", "/DeadLetterSweeper", 404, "application/json", `no function`},
		{"GET", "/nothing", 404, "application/json", `not found`},
		{"GET", "/api/orders/a/b", 404, "application/json", `one path segment`},
		{"GET", "/api/orders/a%2Fb", 400, "application/json", `orderId \"a/b\" contains one of /`},
		{"GET", "/api/orders/%2F", 400, "application/json", `orderId \"/\" contains one of /`},
		{"GET", "/api/orders", 404, "application/json", `not found`},
		{"HEAD", "/api/orders/o-1", 200, "application/json", ``},
		{"POST", "/api/orders/o-1", 405, "application/json", `method POST not allowed here; use GET`},
		{"DELETE", "/api/metrics", 405, "application/json", `use GET`},
		{"POST", "/", 405, "application/json", `use GET`},
		{"GET", "/OrderStatus", 405, "application/json", `use POST`},
	}
	h := newRouter(t)
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path[:min(len(tt.path), 40)], func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader("{}")))
			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d (%s)", rec.Code, tt.wantStatus, rec.Body.String())
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tt.wantCT) {
				t.Errorf("Content-Type = %q, want %s", ct, tt.wantCT)
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("body = %q, want it to contain %q", rec.Body.String(), tt.wantBody)
			}
			if strings.HasPrefix(tt.wantCT, "application/json") && tt.method != "HEAD" && !json.Valid(rec.Body.Bytes()) {
				t.Errorf("body is not JSON: %q", rec.Body.String())
			}
			if rec.Code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			// Every error of the HTTP surface has one shape; an
			// invocation of an unknown function answers the host
			// protocol's instead.
			if rec.Code >= 400 && !(tt.method == "POST" && rec.Code == http.StatusNotFound) {
				var e ErrorBody
				dec := json.NewDecoder(strings.NewReader(rec.Body.String()))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&e); err != nil || e.Error == "" || e.Path != httptest.NewRequest(tt.method, tt.path, nil).URL.EscapedPath() {
					t.Errorf("error body %q (%v): want an ErrorBody with the error and the path", rec.Body.String(), err)
				}
			}
		})
	}
}

func TestMetricsHaveNoOrderLabels(t *testing.T) {
	rec := httptest.NewRecorder()
	newRouter(t).ServeHTTP(rec, httptest.NewRequest("GET", "/api/metrics", nil))
	for _, want := range []string{"orderstatus_build_info", "orderstatus_handler_duration_seconds", "go_goroutines"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, bad := range []string{"order_id", "orderId", "message_id"} {
		if strings.Contains(rec.Body.String(), bad) {
			t.Errorf("metrics carry a %s label", bad)
		}
	}
}
