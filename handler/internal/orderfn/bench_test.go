package orderfn

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
)

// BenchmarkOrderStatus measures the handler's own cost per invocation
// (decode, validate, decide, cached conditional write on the in-memory
// store, log line, answer), without network or storage latency.
func BenchmarkOrderStatus(b *testing.B) {
	reg := prometheus.NewRegistry()
	h := New(orderstate.New(memstore.New(), nil), &fakeParker{}, metrics.New(reg, "bench"),
		logging.New(io.Discard, nil, slog.LevelInfo), Options{Retry: retry.Policy{Budget: 0}})
	statuses := []string{"Created", "Paid", "Shipped", "Delivered"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("o-%d", i/4)
		seq := i%4 + 1
		body := fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d,"occurredAt":"2026-11-29T10:00:00Z"}`, id, statuses[seq-1], seq)
		inv := invocation("OrderStatusChanged", id, fmt.Sprintf("%s:%d", id, seq), 1, body)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/OrderStatus", bytes.NewReader(inv)))
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	}
}
