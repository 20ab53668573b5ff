package orderfn

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
)

// BenchmarkOrderStatus measures the handler's own cost per invocation
// (decode, validate, decide, cached conditional write on the in-memory
// store, log line, answer), without network or storage latency.
func BenchmarkOrderStatus(b *testing.B) {
	reg := prometheus.NewRegistry()
	h := New(orderstate.New(memstore.New(), nil), &fakeParker{}, metrics.New(reg, "bench", nil),
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

// BenchmarkInvocation and BenchmarkMinimalWork set ours beside the minimal
// handler's work (package floorhandler: decode, one conditional write
// with the ETag it knows, answer) on the same invocations, in process, on
// the in-memory store: the difference is what ours' own code costs per
// message beyond it (the settled line's write to the null device
// included), without the network, the host or the store's latency, which
// the two share. make bench's ours_vs_limit_through_host measures the
// same difference through the dev host (docs/performance.md).
func BenchmarkInvocation(b *testing.B) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	h := New(orderstate.New(memstore.New(), nil), &fakeParker{}, metrics.New(prometheus.NewRegistry(), "bench", nil),
		logging.New(null, nil, slog.LevelInfo), Options{Retry: retry.Policy{Budget: 10 * time.Second}})
	serveEach(b, h.ServeHTTP)
}

// BenchmarkMinimalWork: see BenchmarkInvocation.
func BenchmarkMinimalWork(b *testing.B) {
	s := memstore.New()
	var mu sync.Mutex
	etags := map[string]store.ETag{}
	serveEach(b, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var msg hostproto.ServiceBusMessage
		if err == nil {
			msg, err = hostproto.DecodeServiceBus(body, "message")
		}
		var u order.Update
		if err == nil {
			u, err = order.ParseUpdate(msg.Body, msg.SessionID)
		}
		if err != nil {
			hostproto.WriteResponse(w, http.StatusInternalServerError, hostproto.Response{Logs: []string{err.Error()}})
			return
		}
		mu.Lock()
		etag, ok := etags[u.OrderID]
		mu.Unlock()
		st := order.State{Status: u.Status, LastSequence: u.Sequence, OccurredAt: u.OccurredAt, UpdatedAt: time.Now()}
		if ok {
			etag, err = s.Replace(r.Context(), u.OrderID, st, etag)
		} else {
			etag, err = s.Insert(r.Context(), u.OrderID, st)
		}
		if err != nil {
			hostproto.WriteResponse(w, http.StatusServiceUnavailable, hostproto.Response{Logs: []string{err.Error()}})
			return
		}
		mu.Lock()
		etags[u.OrderID] = etag
		mu.Unlock()
		hostproto.WriteResponse(w, http.StatusOK, hostproto.Response{ReturnValue: map[string]string{"result": string(order.Applied)}})
	})
}

// serveEach serves b.N invocations, every order's four status changes in
// order, made before the timer starts, through one request and one
// reusable response writer, and fails on any answer but 200.
func serveEach(b *testing.B, serve http.HandlerFunc) {
	statuses := []string{"Created", "Paid", "Shipped", "Delivered"}
	invs := make([][]byte, b.N)
	for i := range b.N {
		id, seq := fmt.Sprintf("o-%d", i/4), i%4+1
		body := fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d,"occurredAt":"2026-11-29T10:00:00Z"}`, id, statuses[seq-1], seq)
		invs[i] = invocation(order.SubjectStatusChanged, id, fmt.Sprintf("%s:%d", id, seq), 1, body)
	}
	req := httptest.NewRequest(http.MethodPost, "/OrderStatus", nil)
	req.Header.Set("X-Azure-Functions-InvocationId", "0b6e2f0e-8c1e-4a0e-9d0e-6b3f1e7d9a11")
	w := &reusableWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req.Body = io.NopCloser(bytes.NewReader(invs[i]))
		clear(w.h)
		w.body.Reset()
		w.code = 0
		serve(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("invocation %d: status %d: %s", i, w.code, w.body.String())
		}
	}
}

// reusableWriter is an http.ResponseWriter reset between invocations.
type reusableWriter struct {
	h    http.Header
	body bytes.Buffer
	code int
}

func (w *reusableWriter) Header() http.Header         { return w.h }
func (w *reusableWriter) WriteHeader(code int)        { w.code = code }
func (w *reusableWriter) Write(p []byte) (int, error) { return w.body.Write(p) }

// TestDocumentedBenchmarks: every `go test ... -bench '<names>' ...
// ./handler/internal/orderfn/` command docs/performance.md shows names
// benchmarks of this package, and each of them runs and reports a time.
func TestDocumentedBenchmarks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs benchmarks")
	}
	text, err := os.ReadFile("../../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	benchmarks := map[string]func(*testing.B){
		"BenchmarkOrderStatus": BenchmarkOrderStatus, "BenchmarkInvocation": BenchmarkInvocation, "BenchmarkMinimalWork": BenchmarkMinimalWork,
	}
	cmds := regexp.MustCompile("`go test -run '\\^\\$' -bench '([^']+)'[^`]*\\./handler/internal/orderfn/`").FindAllSubmatch(text, -1)
	if len(cmds) == 0 {
		t.Fatal("docs/performance.md shows no go test -bench command for this package; update this test")
	}
	for _, m := range cmds {
		for _, name := range strings.Split(string(m[1]), "|") {
			bench, ok := benchmarks[name]
			if !ok {
				t.Errorf("docs/performance.md names %s, not a benchmark of package orderfn", name)
				continue
			}
			if r := testing.Benchmark(bench); r.N == 0 || r.NsPerOp() <= 0 {
				t.Errorf("%s: %v, want a run", name, r)
			}
		}
	}
}
