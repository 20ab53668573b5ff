package devhost

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/testenv"
)

// outageScenario scripts two outages around a few messages: the table is
// unreachable from 1m to 11m (o-1's Paid arrives in it), then the
// handler's Service Bus calls from 13m to 18m (o-3's bad message, which
// must be parked, arrives in it); o-2 and o-4 arrive after each.
const outageScenario = `
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}
{"outage":"table","sendAfter":"1m","duration":"10m"}
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:2","body":{"orderId":"o-1","status":"Paid","sequence":2},"sendAfter":"2m"}
{"subject":"OrderStatusChanged","sessionId":"o-2","messageId":"o-2:1","body":{"orderId":"o-2","status":"Created","sequence":1},"sendAfter":"12m"}
{"outage":"servicebus","sendAfter":"13m","duration":"5m"}
{"subject":"OrderStatusChanged","sessionId":"o-3","messageId":"o-3:bad","body":"{\"orderId\":\"o-3\",\"status\":","sendAfter":"14m"}
{"subject":"OrderStatusChanged","sessionId":"o-4","messageId":"o-4:bad","body":"{\"orderId\":\"o-4\",\"status\":","sendAfter":"19m"}
`

// TestEndToEndOutage runs `handler dev --scenario F --exit-when-idle` with
// outage lines, the real bin/handler and Azurite, on today's retry policy
// (ORDER_STATUS_RETRY_RESCHEDULE=false: in-call retries, then 5xx, so a
// message that meets an outage longer than five deliveries is
// dead-lettered), and checks the summary's account of each outage: the
// table's refused the handler's storage calls and cost o-1:2 (dead-lettered),
// Service Bus's refused the parking of o-3:bad (dead-lettered, not
// parked); what came after each was handled, and the idle stretches were
// skipped.
func TestEndToEndOutage(t *testing.T) {
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	cs := testenv.Azurite(t)
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	t.Setenv(SettingStoreConnection, cs)
	t.Setenv("OrderStore__tableName", fmt.Sprintf("devhost%x", suffix))
	t.Setenv("LOG_LEVEL", "warn")
	t.Setenv("ORDER_STATUS_RETRY_RESCHEDULE", "false")
	t.Setenv("ORDER_STATUS_RETRY_BUDGET", "300ms") // five deliveries in seconds

	app := copyApp(t, root, handler)
	dir := t.TempDir()
	scenarioPath := filepath.Join(dir, "outage.jsonl")
	summaryPath := filepath.Join(dir, "summary.json")
	handlerLog := filepath.Join(dir, "handler.log")
	if err := os.WriteFile(scenarioPath, []byte(strings.TrimLeft(outageScenario, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	code := Main(ctx, []string{"--app-root", app, "--scenario", scenarioPath, "--exit-when-idle", "--summary-json", summaryPath,
		"--http-addr", "127.0.0.1:0", "--handler-log", handlerLog}, &stdout, &stderr)
	logTail := func() string {
		b, _ := os.ReadFile(handlerLog)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		return string(b)
	}
	if code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s\nhandler log (tail):\n%s", code, stdout.String(), stderr.String(), logTail())
	}
	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, data)
	}
	if len(s.Outages) != 2 {
		t.Fatalf("outages %+v, want two\nstdout:\n%s", s.Outages, stdout.String())
	}
	table, bus := s.Outages[0], s.Outages[1]
	if table.Target != OutageTable || table.After != "1m" || table.Duration != "10m" || !table.Ended ||
		table.Refused == 0 || table.DeadLettered != 1 || table.Rescheduled != 0 || table.Parked != 0 {
		t.Errorf("table outage %+v, want from 1m for 10m, over, requests refused, 1 dead-lettered, nothing rescheduled or parked", table)
	}
	if bus.Target != OutageServiceBus || bus.After != "13m" || bus.Duration != "5m" || !bus.Ended ||
		bus.Refused == 0 || bus.DeadLettered != 1 || bus.Parked != 0 {
		t.Errorf("servicebus outage %+v, want from 13m for 5m, over, requests refused, 1 dead-lettered, nothing parked", bus)
	}
	var dead []string
	for _, e := range s.DeadLettered {
		dead = append(dead, e.MessageID)
	}
	slices.Sort(dead)
	if !slices.Equal(dead, []string{"o-1:2", "o-3:bad"}) {
		t.Errorf("dead-lettered %q, want o-1:2 and o-3:bad\nhandler log (tail):\n%s", dead, logTail())
	}
	if !slices.ContainsFunc(s.Parked, func(e Entry) bool { return e.MessageID == "o-4:bad" }) {
		t.Errorf("parked %+v, want o-4:bad (after the outage)", s.Parked)
	}
	if row := s.Orders["o-2"]; row.Status != "Created" {
		t.Errorf("o-2 = %+v, want Created (sent after the table's outage)", row)
	}
	for _, want := range []string{"outages (2;", "to the end of an outage", "invariants: all hold"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "outage: table unreachable from the handler for 10m") {
		t.Errorf("stderr lacks the outage's note:\n%s", stderr.String())
	}
}
