package devhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// expiryScenario: no producer schedules a PaymentTimeoutCheck, except
// for x-sched, whose producer schedules one and the order is paid first.
// The handler schedules each order's check itself when it applies its
// Created (promise 5), at occurredAt + 30 min: x-late's Created is two
// hours late, so its check is due at once (after the settle delay).
const expiryScenario = `
{"subject":"OrderStatusChanged","sessionId":"x-unpaid","messageId":"x-unpaid:1","body":{"orderId":"x-unpaid","status":"Created","sequence":1}}
{"subject":"OrderStatusChanged","sessionId":"x-paid","messageId":"x-paid:1","body":{"orderId":"x-paid","status":"Created","sequence":1}}
{"subject":"OrderStatusChanged","sessionId":"x-paid","messageId":"x-paid:2","body":{"orderId":"x-paid","status":"Paid","sequence":2}}
{"subject":"OrderStatusChanged","sessionId":"x-late","messageId":"x-late:1","body":{"orderId":"x-late","status":"Created","sequence":1,"occurredAt":"%s"}}
{"subject":"OrderStatusChanged","sessionId":"x-sched","messageId":"x-sched:1","body":{"orderId":"x-sched","status":"Created","sequence":1}}
{"subject":"PaymentTimeoutCheck","sessionId":"x-sched","messageId":"x-sched:payment-timeout","body":{"orderId":"x-sched"},"scheduleAfter":"30m"}
{"subject":"OrderStatusChanged","sessionId":"x-sched","messageId":"x-sched:2","body":{"orderId":"x-sched","status":"Paid","sequence":2}}
`

// TestEndToEndExpiryWithoutProducerChecks: with the real handler and the
// default retry policy, every unpaid order ends Cancelled though no
// producer scheduled its check (a late Created included), and no paid
// order is cancelled, with or without the producer's own check.
func TestEndToEndExpiryWithoutProducerChecks(t *testing.T) {
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	cs := testenv.Azurite(t)
	t.Setenv(SettingStoreConnection, cs)
	t.Setenv("OrderStore__tableName", fmt.Sprintf("expiry%d", time.Now().UnixNano()%1e9))
	t.Setenv("LOG_LEVEL", "warn")
	app := copyApp(t, root, handler)
	dir := t.TempDir()
	scenarioPath, summaryPath := filepath.Join(dir, "scenario.jsonl"), filepath.Join(dir, "summary.json")
	late := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if err := os.WriteFile(scenarioPath, []byte(strings.TrimLeft(fmt.Sprintf(expiryScenario, late), "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	code := Main(ctx, []string{"--app-root", app, "--scenario", scenarioPath, "--exit-when-idle", "--summary-json", summaryPath,
		"--http-addr", "127.0.0.1:0", "--handler-log", filepath.Join(dir, "handler.log")}, &stdout, &stderr)
	if code != ExitOK {
		b, _ := os.ReadFile(filepath.Join(dir, "handler.log"))
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s\nhandler log:\n%s", code, stdout.String(), stderr.String(), b)
	}
	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	want := map[string]OrderRow{
		"x-unpaid": {Status: "Cancelled", LastSequence: 1},
		"x-paid":   {Status: "Paid", LastSequence: 2},
		"x-late":   {Status: "Cancelled", LastSequence: 1},
		"x-sched":  {Status: "Paid", LastSequence: 2},
	}
	if !reflect.DeepEqual(s.Orders, want) {
		t.Errorf("orders:\n got %v\nwant %v\nstdout:\n%s", s.Orders, want, stdout.String())
	}
	if len(s.DeadLettered) != 0 || len(s.Parked) != 0 {
		t.Errorf("dead-lettered %v, parked %v: want none", s.DeadLettered, s.Parked)
	}
}
