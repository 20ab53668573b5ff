package devhost

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// repoRoot is the repository root, seen from this package.
const repoRoot = "../../../.."

// e2eScenario exercises the real handler: producer reordering, a
// duplicate send, payment timeouts for an unpaid and a paid order, an
// update after Delivered, and three kinds of bad message.
const e2eScenario = `
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:3","body":{"orderId":"o-1","status":"Shipped","sequence":3}}
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:2","body":{"orderId":"o-1","status":"Paid","sequence":2}}
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:2","body":{"orderId":"o-1","status":"Paid","sequence":2}}
{"subject":"OrderStatusChanged","sessionId":"o-2","messageId":"o-2:1","body":{"orderId":"o-2","status":"Created","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}}
{"subject":"PaymentTimeoutCheck","sessionId":"o-2","messageId":"o-2:payment-timeout","body":{"orderId":"o-2"},"scheduleAfter":"30m"}
{"subject":"OrderStatusChanged","sessionId":"o-3","messageId":"o-3:1","body":{"orderId":"o-3","status":"Created","sequence":1}}
{"subject":"OrderStatusChanged","sessionId":"o-3","messageId":"o-3:2","body":{"orderId":"o-3","status":"Paid","sequence":2}}
{"subject":"PaymentTimeoutCheck","sessionId":"o-3","messageId":"o-3:payment-timeout","body":{"orderId":"o-3"},"scheduleAfter":"30m"}
{"subject":"OrderStatusChanged","sessionId":"o-4","messageId":"o-4:1","body":{"orderId":"o-4","status":"Created","sequence":1}}
{"subject":"OrderStatusChanged","sessionId":"o-4","messageId":"o-4:2","body":{"orderId":"o-4","status":"Delivered","sequence":2}}
{"subject":"OrderStatusChanged","sessionId":"o-4","messageId":"o-4:3","body":{"orderId":"o-4","status":"Shipped","sequence":3}}
{"subject":"OrderStatusChanged","sessionId":"o-5","messageId":"o-5:bad","body":"{\"orderId\":\"o-5\",\"status\":"}
{"subject":"OrderRefunded","sessionId":"o-6","messageId":"o-6:refund","body":{"orderId":"o-6","status":"Paid","sequence":1}}
{"subject":"OrderStatusChanged","sessionId":"o-7","messageId":"o-7:mismatch","body":{"orderId":"o-8","status":"Paid","sequence":1}}
`

// copyApp lays out the repository's app (host.json with the executable
// made absolute, the function folders, the settings template) in a fresh
// directory, so a developer's local.settings.json does not leak in.
func copyApp(t testing.TB, root, handler string) string {
	t.Helper()
	dst := t.TempDir()
	var host map[string]any
	data, err := os.ReadFile(filepath.Join(root, "host.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &host); err != nil {
		t.Fatal(err)
	}
	host["customHandler"].(map[string]any)["description"].(map[string]any)["defaultExecutablePath"] = handler
	data, _ = json.Marshal(host)
	files := map[string]string{"host.json": string(data)}
	fns, _ := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	for _, f := range fns {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files["functions/"+filepath.Base(filepath.Dir(f))+"/function.json"] = string(b)
	}
	if b, err := os.ReadFile(filepath.Join(root, "local.settings.json.template")); err == nil {
		files["local.settings.json.template"] = string(b)
	}
	for name, content := range files {
		p := filepath.Join(dst, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// e2eEnv is the environment of a run on the real handler: the process's,
// with the shared Azurite, an order table and a dead-letter table of the
// run's own, then settings (KEY=value).
func e2eEnv(t *testing.T, settings ...string) []string {
	t.Helper()
	suffix := strings.ToLower(rand.Text()[:10])
	return envWith(append([]string{SettingStoreConnection + "=" + testenv.Azurite(t),
		"OrderStore__tableName=devhost" + suffix, "DEAD_LETTER_TABLE=dl" + suffix}, settings...)...)
}

// TestEndToEndRealHandler runs `orderstatus-dev dev --scenario F --exit-when-idle`
// with the real bin/handler and Azurite, in real time, and checks the
// summary: the 30-minute payment timeouts are reached by fast-forwarding
// the idle clock. It skips when bin/handler is not built, except under CI,
// where it fails.
func TestEndToEndRealHandler(t *testing.T) {
	t.Parallel()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	env := e2eEnv(t, "LOG_LEVEL=warn")

	app := copyApp(t, root, handler)
	dir := t.TempDir()
	scenarioPath := filepath.Join(dir, "scenario.jsonl")
	summaryPath := filepath.Join(dir, "summary.json")
	handlerLog := filepath.Join(dir, "handler.log")
	if err := os.WriteFile(scenarioPath, []byte(strings.TrimLeft(e2eScenario, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, []string{"--app-root", app, "--scenario", scenarioPath, "--exit-when-idle", "--summary-json", summaryPath,
		"--http-addr", "127.0.0.1:0", "--handler-log", handlerLog}, env, &stdout, &stderr, DefaultHTTPAddr)
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
	wantOrders := map[string]OrderRow{
		"o-1": {Status: "Shipped", LastSequence: 3},
		"o-2": {Status: "Cancelled", LastSequence: 1},
		"o-3": {Status: "Paid", LastSequence: 2},
		"o-4": {Status: "Delivered", LastSequence: 2},
	}
	if !reflect.DeepEqual(s.Orders, wantOrders) {
		t.Errorf("orders:\n got %v\nwant %v", s.Orders, wantOrders)
	}
	var parked []string
	for _, p := range s.Parked {
		parked = append(parked, p.MessageID+" "+p.Reason)
	}
	sort.Strings(parked)
	wantParked := []string{"o-4:3 InvalidTransition", "o-5:bad InvalidPayload", "o-6:refund UnknownSubject", "o-7:mismatch InvalidPayload"}
	if !reflect.DeepEqual(parked, wantParked) {
		t.Errorf("parked:\n got %q\nwant %q", parked, wantParked)
	}
	if len(s.DeadLettered) != 0 {
		t.Errorf("summary: dead-lettered %v, want none\nhandler log (tail):\n%s", s.DeadLettered, logTail())
	}
	// The DeadLetterSweeper fired at idle: it archived the bad data and
	// left the InvalidTransition for a human.
	var archived []string
	for _, a := range s.Archived {
		archived = append(archived, a.MessageID+" "+a.Reason)
	}
	wantArchived := []string{"o-5:bad InvalidPayload", "o-6:refund UnknownSubject", "o-7:mismatch InvalidPayload"}
	if !reflect.DeepEqual(archived, wantArchived) {
		t.Errorf("archived:\n got %q\nwant %q\nhandler log (tail):\n%s", archived, wantArchived, logTail())
	}

	if !strings.Contains(stdout.String(), "fast-forwarded the clock") {
		t.Errorf("stdout lacks the fast-forward note:\n%s", stdout.String())
	}
	// Stale: o-1:2 after o-1:3, and the paid order's timeout; more only
	// if a lock was lost under load (then the check above judged them).
	if s.Results["Stale"] < 2 || s.Results["Parked"] < 4 || s.Results["Applied"] < 8 {
		t.Errorf("results: got %v, want at least Applied 8, Stale 2, Parked 4", s.Results)
	}
	if !strings.Contains(stdout.String(), "invariants: all hold") {
		t.Errorf("stdout lacks the invariants line:\n%s", stdout.String())
	}
}

// TestEndToEndScaledOut runs what `make run ARGS="--instances 3"` runs,
// with --exit-when-idle and a smaller demo, plus scale events: three real
// handlers of OrderStatus share the demo on one broker and Azurite, a
// fourth is added, the first is killed and the third removed, while the
// sweeper and the HTTP functions run on instances of their own, as Flex
// Consumption scales per function; the invariants hold, each of the first
// three OrderStatus instances took messages, only the sweeper's instance
// ran the timer, the summary counts per instance and names its group, and
// every handler log line names its instance.
func TestEndToEndScaledOut(t *testing.T) {
	t.Parallel()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	env := e2eEnv(t)
	app := copyApp(t, root, handler)
	dir := t.TempDir()
	summaryPath := filepath.Join(dir, "summary.json")
	handlerLog := filepath.Join(dir, "handler.log")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, []string{"--app-root", app, "--instances", "3", "--orders", "60", "--scale", "add@2m,kill:1@4m,remove:3@6m",
		"--exit-when-idle", "--summary-json", summaryPath, "--http-addr", "127.0.0.1:0", "--handler-log", handlerLog}, env, &stdout, &stderr, DefaultHTTPAddr)
	if code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, data)
	}
	states, groups := map[string]string{}, map[string]string{}
	for _, in := range s.Instances {
		states[in.ID], groups[in.ID] = in.State, in.Group
		switch {
		case in.Group == "function:OrderStatus" && in.ID != "OrderStatus-4" && in.Invocations == 0:
			t.Errorf("%s took no message: %+v", in.ID, in)
		case in.Group != "function:OrderStatus" && in.Invocations != 0:
			t.Errorf("%s, of %s, took %d messages: want none", in.ID, in.Group, in.Invocations)
		case in.Group == "function:DeadLetterSweeper" && in.TimerRuns == 0:
			t.Errorf("%s did not run the sweeper: %+v", in.ID, in)
		case in.Group != "function:DeadLetterSweeper" && in.TimerRuns != 0:
			t.Errorf("%s, of %s, ran the timer %d times: want never", in.ID, in.Group, in.TimerRuns)
		}
	}
	want := map[string]string{"OrderStatus-1": InstanceKilled, "OrderStatus-2": InstanceRunning, "OrderStatus-3": InstanceRemoved,
		"OrderStatus-4": InstanceRunning, "DeadLetterSweeper-1": InstanceRunning, "http-1": InstanceRunning}
	if !reflect.DeepEqual(states, want) {
		t.Errorf("instances %v, want %v", states, want)
	}
	wantGroups := map[string]string{"OrderStatus-1": "function:OrderStatus", "OrderStatus-2": "function:OrderStatus", "OrderStatus-3": "function:OrderStatus",
		"OrderStatus-4": "function:OrderStatus", "DeadLetterSweeper-1": "function:DeadLetterSweeper", "http-1": "http"}
	if !reflect.DeepEqual(groups, wantGroups) {
		t.Errorf("groups %v, want %v", groups, wantGroups)
	}
	for _, l := range []string{"instances: OrderStatus-1, OrderStatus-2, OrderStatus-3, DeadLetterSweeper-1, http-1", "by instance (6 started;", "invariants: all hold"} {
		if !strings.Contains(stdout.String(), l) {
			t.Errorf("stdout lacks %q:\n%s", l, stdout.String())
		}
	}
	for _, l := range []string{"scale add: OrderStatus-4", "scale kill: OrderStatus-1", "scale remove: OrderStatus-3"} {
		if !strings.Contains(stderr.String(), l) {
			t.Errorf("stderr lacks %q:\n%s", l, stderr.String())
		}
	}
	logData, err := os.ReadFile(handlerLog)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(logData)), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue // not a JSON line (none expected, but not this test's point)
		}
		id, _ := rec["instance_id"].(string)
		if id == "" {
			t.Errorf("handler log line without instance_id: %s", line)
			break
		}
		seen[id] = true
	}
	for _, id := range []string{"OrderStatus-1", "OrderStatus-2", "OrderStatus-3", "OrderStatus-4", "DeadLetterSweeper-1", "http-1"} {
		if !seen[id] {
			t.Errorf("no handler log line of %s", id)
		}
	}
}
