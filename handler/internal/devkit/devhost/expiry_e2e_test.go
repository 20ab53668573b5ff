package devhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// expiryScenario: no producer schedules a PaymentTimeoutCheck, except
// for x-sched, whose producer schedules one and the order is paid first.
// The handler schedules each order's check itself when it applies its
// Created (promise 5), at occurredAt + 30 min: x-late's Created is two
// hours late, so its check is due at once.
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
	t.Parallel()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	env := e2eEnv(t, "LOG_LEVEL=warn")
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
	code := run(ctx, []string{"--app-root", app, "--scenario", scenarioPath, "--exit-when-idle", "--summary-json", summaryPath,
		"--http-addr", "127.0.0.1:0", "--handler-log", filepath.Join(dir, "handler.log")}, env, &stdout, &stderr, DefaultHTTPAddr)
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

// paidPastDeadline: two orders are created on two instances; the
// table is unreachable from 2s for 20s and the first instance is killed
// in it. The payment timeout is 5s, so every order's check falls due in
// the outage. o-1's Paid (sent at 3s, no occurredAt: it occurred when it
// was enqueued) meets the outage and comes back with the checks, in
// whichever order the broker gives; o-2 is never paid. o-3, created at
// the start and paid a second later, reaches the broker only after the
// outage (its Created at 23s: its check is due at once and cancels it;
// its Paid at 60s, long after the circuit closed). (Scaled down from a 20-minute outage: the handler's waits are
// real time.)
const paidPastDeadline = `
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}
{"subject":"OrderStatusChanged","sessionId":"o-2","messageId":"o-2:1","body":{"orderId":"o-2","status":"Created","sequence":1}}
{"scale":"add","sendAfter":"1s"}
{"outage":"table","sendAfter":"2s","duration":"20s"}
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:2","body":{"orderId":"o-1","status":"Paid","sequence":2},"sendAfter":"3s"}
{"scale":"kill","instance":1,"sendAfter":"4s"}
{"subject":"OrderStatusChanged","sessionId":"o-3","messageId":"o-3:1","body":{"orderId":"o-3","status":"Created","sequence":1,"occurredAt":"%[1]s"},"sendAfter":"23s"}
{"subject":"OrderStatusChanged","sessionId":"o-3","messageId":"o-3:2","body":{"orderId":"o-3","status":"Paid","sequence":2,"occurredAt":"%[2]s"},"sendAfter":"60s"}
`

// TestEndToEndPaidPastDeadline: a Paid that occurred by the deadline ends
// Paid however late an outage and a killed instance make it arrive, also
// after its check cancelled the order (o-3): the Paid supersedes the
// cancellation (order.Decide). The unpaid order ends Cancelled; nothing
// is dead-lettered or parked.
func TestEndToEndPaidPastDeadline(t *testing.T) {
	t.Parallel()
	settings := []string{"ORDER_STATUS_RETRY_RESCHEDULE=", "ORDER_STATUS_RETRY_BUDGET=1s", "ORDER_STATUS_RETRY_BASE=500ms",
		"ORDER_STATUS_RETRY_CAP=1s", "ORDER_STATUS_PAYMENT_TIMEOUT=5s", "LOG_LEVEL=info"} // info: the lines of applied messages
	now := time.Now().UTC()
	path := filepath.Join(t.TempDir(), "paid-past-deadline.jsonl")
	body := fmt.Sprintf(paidPastDeadline, now.Format(time.RFC3339Nano), now.Add(time.Second).Format(time.RFC3339Nano))
	if err := os.WriteFile(path, []byte(strings.TrimLeft(body, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	// A short lock: the killed instance's sessions move on sooner.
	s, stdout, _, log := runScenario(t, path, settings, "--lock-duration", "10s")
	logTail := func() string { return tail(log(), 4000) }
	if len(s.Outages) != 1 || !s.Outages[0].Ended || s.Outages[0].Refused == 0 {
		t.Fatalf("outages %+v, want one table outage, over, with requests refused\nstdout:\n%s", s.Outages, stdout)
	}
	for _, id := range []string{"o-1", "o-3"} {
		if row := s.Orders[id]; row.Status != "Paid" || row.LastSequence != 2 {
			t.Errorf("%s = %+v, want Paid/2 (paid by its deadline)\nhandler log (tail):\n%s", id, row, logTail())
		}
	}
	if row := s.Orders["o-2"]; row.Status != "Cancelled" {
		t.Errorf("o-2 = %+v, want Cancelled (unpaid)", row)
	}
	if len(s.DeadLettered) != 0 || len(s.Parked) != 0 {
		t.Errorf("dead-lettered %+v, parked %+v; want none", s.DeadLettered, s.Parked)
	}
	if !strings.Contains(stdout, "invariants: all hold") {
		t.Errorf("stdout lacks %q:\n%s", "invariants: all hold", stdout)
	}
	// o-3 was cancelled by its check, then superseded by its Paid.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`"order_id":"o-3","message_id":"o-3:payment-timeout-1[^"]*",[^\n]*"result":"Applied"`),
		regexp.MustCompile(`"order_id":"o-3","message_id":"o-3:2(:retry:\d+)?",[^\n]*"result":"Applied"`), // the Paid or its rescheduled copy
	} {
		if !want.MatchString(log()) {
			t.Errorf("the handler log has no line matching %s\nhandler log (tail):\n%s", want, logTail())
		}
	}
}
