package devhost

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// outageExample is the scenario docs/outages.md shows and runs: the table
// is unreachable from 1m to 11m (o-1's Paid arrives in it), then the
// handler's Service Bus calls from 13m to 18m (o-3's bad message, which
// must be parked, arrives in it); o-2 and o-4 arrive after each.
const outageExample = repoRoot + "/docs/outage-example.jsonl"

// TestEndToEndOutage runs what docs/outages.md runs, `orderstatus-dev dev --scenario
// docs/outage-example.jsonl --exit-when-idle` with its outage lines, with
// the real bin/handler and Azurite, on today's retry policy
// (ORDER_STATUS_RETRY_RESCHEDULE=false: in-call retries, then 5xx, so a
// message that meets an outage longer than five deliveries is
// dead-lettered), and checks the summary's account of each outage: the
// table's refused the handler's storage calls and cost o-1:2 (dead-lettered),
// Service Bus's refused the parking of o-3:bad (dead-lettered, not
// parked); what came after each was handled, and the idle stretches were
// skipped.
func TestEndToEndOutage(t *testing.T) {
	t.Parallel()
	s, stdout, stderr, logTail := runOutageExample(t, outageExample,
		"ORDER_STATUS_RETRY_RESCHEDULE=false", "ORDER_STATUS_RETRY_BUDGET=1s") // as docs/outages.md: five deliveries in seconds
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
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "outage: table unreachable from the handler for 10m") {
		t.Errorf("stderr lacks the outage's note:\n%s", stderr)
	}
}

// TestEndToEndOutageDefaultPolicy runs the same example on the handler's
// default retry policy (rescheduling; a one-second in-call budget), as
// docs/outages.md's second command does: the table's outage becomes a
// delay, not a dead letter. o-1:2, which meets it, is rescheduled until the
// table is back and then applied (o-1 ends Paid); nothing is dead-lettered
// by it. The Service Bus outage refuses the handler's own calls, the
// rescheduling included, so o-3:bad, whose parking meets it, is still
// dead-lettered, as docs/outages.md says; o-4:bad after it is parked. The
// handler's own payment-timeout checks fall due (the idle time skipped)
// and cancel o-2, never paid, and leave o-1, paid. The table's outage is
// cut from 10m to 2m (o-1:2, sent at 2m, still meets it): no check below
// depends on its length, and each of its seconds costs about two
// rescheduling rounds in real time.
func TestEndToEndOutageDefaultPolicy(t *testing.T) {
	t.Parallel()
	const long, short = `{"outage":"table","sendAfter":"1m","duration":"10m"}`, `{"outage":"table","sendAfter":"1m","duration":"2m"}`
	example, err := os.ReadFile(outageExample)
	if err != nil || strings.Count(string(example), long) != 1 {
		t.Fatalf("docs/outage-example.jsonl: %v; want it to have the line %s", err, long)
	}
	path := filepath.Join(t.TempDir(), "outage-example.jsonl")
	if err := os.WriteFile(path, []byte(strings.Replace(string(example), long, short, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// As docs/outages.md: the deliveries of o-3:bad in seconds. The
	// handler's waits are real time, which the host's skipped idle time
	// does not shorten: a backoff cap (and so the breaker's probe
	// interval) of a second, from a base of half that, lets the table's
	// return be seen before the host's clock reaches the Service Bus outage.
	s, stdout, _, logTail := runOutageExample(t, path, "ORDER_STATUS_RETRY_RESCHEDULE=", "ORDER_STATUS_RETRY_BUDGET=1s",
		"ORDER_STATUS_RETRY_BASE=500ms", "ORDER_STATUS_RETRY_CAP=1s")
	table, bus := s.Outages[0], s.Outages[1]
	if table.Target != OutageTable || !table.Ended || table.Refused == 0 || table.Rescheduled == 0 ||
		table.DeadLettered != 0 || table.Parked != 0 {
		t.Errorf("table outage %+v, want over, requests refused, rescheduled, nothing dead-lettered or parked\nhandler log (tail):\n%s", table, logTail())
	}
	if bus.Target != OutageServiceBus || !bus.Ended || bus.Refused == 0 || bus.DeadLettered != 1 {
		t.Errorf("servicebus outage %+v, want over, requests refused, 1 dead-lettered (o-3:bad)", bus)
	}
	var dead []string
	for _, e := range s.DeadLettered {
		dead = append(dead, e.MessageID)
	}
	if !slices.Equal(dead, []string{"o-3:bad"}) {
		t.Errorf("dead-lettered %q, want only o-3:bad\nhandler log (tail):\n%s", dead, logTail())
	}
	if !slices.ContainsFunc(s.Parked, func(e Entry) bool { return e.MessageID == "o-4:bad" }) {
		t.Errorf("parked %+v, want o-4:bad (after the outage)", s.Parked)
	}
	if row := s.Orders["o-1"]; row.Status != "Paid" || row.LastSequence != 2 {
		t.Errorf("o-1 = %+v, want Paid/2 (its Paid applied once the table was back)", row)
	}
	if row := s.Orders["o-2"]; row.Status != "Cancelled" {
		t.Errorf("o-2 = %+v, want Cancelled (unpaid; the handler's own check fell due)", row)
	}
	if !strings.Contains(stdout, "invariants: all hold") {
		t.Errorf("stdout lacks %q:\n%s", "invariants: all hold", stdout)
	}
}

// runOutageExample plays the outage example at path with `orderstatus-dev
// dev --exit-when-idle` on the real bin/handler and Azurite, with the
// retry settings (KEY=value), and returns the summary (with its two
// outages), stdout, stderr and a function giving the handler log's tail.
func runOutageExample(t *testing.T, path string, settings ...string) (s Summary, stdout, stderr string, logTail func() string) {
	t.Helper()
	s, stdout, stderr, log := runScenario(t, path, settings)
	logTail = func() string { return tail(log(), 4000) }
	if len(s.Outages) != 2 {
		t.Fatalf("outages %+v, want two\nstdout:\n%s", s.Outages, stdout)
	}
	return s, stdout, stderr, logTail
}

// runScenario plays the scenario at path with `orderstatus-dev dev
// --exit-when-idle` on the real bin/handler and Azurite, with the settings
// (KEY=value; LOG_LEVEL warn unless they name it) and the extra flags,
// and returns the summary, stdout, stderr and a function giving the
// handler log.
func runScenario(t *testing.T, path string, settings []string, flags ...string) (s Summary, stdout, stderr string, log func() string) {
	t.Helper()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	env := e2eEnv(t, append([]string{"LOG_LEVEL=warn"}, settings...)...)

	app := copyApp(t, root, handler)
	dir := t.TempDir()
	scenarioPath, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	summaryPath := filepath.Join(dir, "summary.json")
	handlerLog := filepath.Join(dir, "handler.log")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out, errOut strings.Builder
	code := run(ctx, append([]string{"--app-root", app, "--scenario", scenarioPath, "--exit-when-idle", "--summary-json", summaryPath,
		"--http-addr", "127.0.0.1:0", "--handler-log", handlerLog}, flags...), env, &out, &errOut, DefaultHTTPAddr)
	log = func() string {
		b, _ := os.ReadFile(handlerLog)
		return string(b)
	}
	if code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s\nhandler log (tail):\n%s", code, out.String(), errOut.String(), tail(log(), 4000))
	}
	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, data)
	}
	return s, out.String(), errOut.String(), log
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestEndToEndKillSwitch runs what docs/outages.md runs with the kill
// switch set, AzureWebJobs_OrderStatus_Disabled=true and `orderstatus-dev dev
// --exit-when-idle --orders 10`, with the real bin/handler and Azurite:
// OrderStatus is never invoked, a warning names the setting, and the run
// ends with exit 1, its messages still waiting in the queue.
func TestEndToEndKillSwitch(t *testing.T) {
	t.Parallel()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	env := e2eEnv(t, "LOG_LEVEL=warn", "AzureWebJobs_OrderStatus_Disabled=true")
	app := copyApp(t, root, handler)
	summaryPath := filepath.Join(t.TempDir(), "summary.json")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, []string{"--app-root", app, "--exit-when-idle", "--orders", "10", "--summary-json", summaryPath,
		"--http-addr", "127.0.0.1:0", "--quiet", "--handler-log", filepath.Join(t.TempDir(), "handler.log")}, env, &stdout, &stderr, DefaultHTTPAddr)
	if code != ExitFailure {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "function OrderStatus is disabled by AzureWebJobs_OrderStatus_Disabled") {
		t.Errorf("stderr lacks the warning:\n%s", stderr.String())
	}
	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	// The demo sends some messages twice; duplicate detection drops them.
	if a := s.Accounting; a.Sent == 0 || a.Waiting != a.Sent-a.DroppedAsDuplicates || len(a.Completed) != 0 || a.DeadLettered != 0 {
		t.Errorf("accounting %+v, want every message sent (but the duplicates dropped) still waiting", a)
	}
	if s.Results["Applied"] != 0 || len(s.Orders) != 0 {
		t.Errorf("results %v, orders %v: want OrderStatus never invoked", s.Results, s.Orders)
	}
}

// TestDocsOutage: the commands docs/outages.md shows are the ones the
// tests above run: its `make run` arguments parse, and its example
// scenario is docs/outage-example.jsonl.
func TestDocsOutage(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(repoRoot + "/docs/outages.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(outageExample)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```json\n"+string(example)+"```") {
		t.Error("docs/outages.md does not show docs/outage-example.jsonl as its example scenario")
	}
	runs := regexp.MustCompile(`make run ARGS="([^"]*)"`).FindAllStringSubmatch(string(doc), -1)
	if len(runs) == 0 {
		t.Fatal("docs/outages.md shows no make run; update this test")
	}
	for _, m := range runs {
		if _, code := parseFlags(strings.Fields(m[1]), io.Discard, io.Discard, DefaultHTTPAddr); code != -1 {
			t.Errorf("docs/outages.md's make run ARGS=%q: parseFlags exit %d", m[1], code)
		}
	}
	if _, err := scenario.ReadFile(outageExample, nil); err != nil {
		t.Errorf("docs/outage-example.jsonl: %v", err)
	}
}
