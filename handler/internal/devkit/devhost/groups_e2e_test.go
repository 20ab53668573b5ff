package devhost

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// messagesApplied is the sum of orderstatus_messages_total{result="Applied"}
// in a Prometheus text answer, 0 when the series is absent.
func messagesApplied(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/api/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/api/metrics: %d, %v", base, resp.StatusCode, err)
	}
	n := 0
	re := regexp.MustCompile(`(?m)^orderstatus_messages_total\{[^}]*result="Applied"[^}]*\} (\d+)$`)
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// TestEndToEndMetricsAnswerFromTheHTTPGroup runs the real handler on the
// app's groups, as Flex Consumption does: OrderStatus applies the
// messages on its own instance, and GET /api/metrics through the front,
// an HTTP function, answers from the http instance, whose registry
// counts no message (what an operator sees in Azure), while the
// OrderStatus instance's own registry counts them all. The row is read
// through the front as well: GetOrder runs on the http group too.
func TestEndToEndMetricsAnswerFromTheHTTPGroup(t *testing.T) {
	t.Parallel()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	app := copyApp(t, root, handler)
	// FastForward: the handler schedules the order's payment timeout
	// check itself, 30 minutes on; WaitIdle skips to it.
	h, err := New(Options{AppRoot: app, Env: e2eEnv(t), HTTPAddr: "127.0.0.1:0", FastForward: true, DrainTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if got, want := h.RunningInstances(), []string{"OrderStatus-1", "DeadLetterSweeper-1", "http-1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("running %v, want %v", got, want)
	}
	for i, status := range []string{"Created", "Paid"} {
		if err := h.Send(ctx, statusLine("g-1", fmt.Sprintf("g-1:%d", i+1), status, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	front := "http://" + h.Addr()
	resp, err := http.Get(front + "/api/orders/g-1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !regexp.MustCompile(`"status":"Paid"`).Match(body) {
		t.Errorf("GET /api/orders/g-1 through the front: %d %s, want Paid", resp.StatusCode, body)
	}
	if n := messagesApplied(t, front); n != 0 {
		t.Errorf("the front's /api/metrics counts %d messages applied: want 0, it answers from the http group", n)
	}
	own, err := h.InstanceURL(ctx, "OrderStatus-1")
	if err != nil {
		t.Fatal(err)
	}
	if n := messagesApplied(t, own); n != 2 {
		t.Errorf("OrderStatus-1's own /api/metrics counts %d messages applied, want 2", n)
	}
	if _, err := h.InstanceURL(ctx, "OrderStatus-9"); err == nil {
		t.Errorf("InstanceURL of an instance that does not run: no error")
	}
}
