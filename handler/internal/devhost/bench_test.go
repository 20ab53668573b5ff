package devhost

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/testenv"
)

// BenchmarkThroughputRealHandler is the load run of `make bench`: the real
// bin/handler behind the development host, Azurite for storage, and
// `orders` orders of four in-order events each (Created, Paid, Shipped,
// Delivered) sent at once. It reports end-to-end messages per second, from
// the first send to the drained queue, with host.json's concurrency (16
// sessions, one call per session).
//
// The broker clock runs 100 times faster, so that host.json's 5 s
// sessionIdleTimeout (which a session slot waits out after its last
// message, as with the real host) costs 50 ms and the figure shows the
// handler and the store rather than idle slots; the lock duration is raised
// to match, so that it is still a minute of real time.
func BenchmarkThroughputRealHandler(b *testing.B) {
	const orders = 250
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		b.Fatal(err)
	}
	handler := filepath.Join(root, "bin", "handler")
	if _, err := os.Stat(handler); err != nil {
		b.Skipf("bin/handler not built (%v); 'make bench' builds it", err)
	}
	cs := testenv.Azurite(b)
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	app := copyApp(b, root, handler)
	h, err := New(Options{
		AppRoot:   app,
		HTTPAddr:  "127.0.0.1:0",
		TimeScale: 100,
		Queues:    QueueOverrides{LockDuration: 100 * time.Minute},
		Settings: map[string]string{
			SettingStoreConnection:  cs,
			"OrderStore__tableName": fmt.Sprintf("bench%x", suffix),
			"LOG_LEVEL":             "warn",
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer h.Close()

	statuses := []string{"Created", "Paid", "Shipped", "Delivered"}
	var total time.Duration
	msgs := 0
	b.ResetTimer()
	for i := range b.N {
		lines := make([]ScenarioLine, 0, orders*len(statuses))
		for o := range orders {
			id := fmt.Sprintf("b%d-o%d", i, o)
			for seq, st := range statuses {
				lines = append(lines, statusLine(id, fmt.Sprintf("%s:%d", id, seq+1), st, seq+1))
			}
		}
		start := time.Now()
		if err := h.Play(ctx, lines); err != nil {
			b.Fatal(err)
		}
		if err := h.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		msgs += len(lines)
	}
	b.StopTimer()
	s, err := h.Summary(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if s.Results["Applied"] != msgs {
		b.Fatalf("results %v, want %d Applied", s.Results, msgs)
	}
	b.ReportMetric(float64(msgs)/total.Seconds(), "msgs/s")
	b.ReportMetric(float64(total.Microseconds())/float64(msgs), "µs/msg")
}
