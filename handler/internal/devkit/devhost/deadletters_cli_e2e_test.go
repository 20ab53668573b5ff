package devhost

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/cli/deadletters"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// cliHost is a development host running the real bin/handler (OrderStatus
// and DeadLetterSweeper) against Azurite behind a fault proxy, on a broker
// clock the test moves, with the dead-letter store in a table of its own;
// the CLI finds it as it finds `make run` (the host's file in the app
// root) and reaches Azurite directly.
type cliHost struct {
	*Host
	t       *testing.T
	ctx     context.Context
	clk     *clock.ScaledClock
	proxy   *faultproxy.Proxy
	app, cs string
	// orderTable and dlTable are the host's tables.
	orderTable, dlTable string
}

func newCLIHost(t *testing.T) *cliHost {
	t.Helper()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	cs := testenv.Azurite(t)
	addr := strings.TrimPrefix(strings.Split(strings.Split(cs, "TableEndpoint=")[1], "/devstoreaccount1")[0], "http://")
	p, err := faultproxy.Start("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	suffix := strings.ToLower(rand.Text()[:10])
	d := &cliHost{t: t, clk: clock.Scaled(1), proxy: p, app: copyApp(t, root, handler), cs: cs,
		orderTable: "e2e" + suffix, dlTable: "dl" + suffix}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	d.ctx = ctx
	h, err := New(Options{
		AppRoot:     d.app,
		HandlerPath: handler,
		Env:         []string{"PATH=" + os.Getenv("PATH")},
		Settings: map[string]string{
			SettingStoreConnection:      azurite.ConnectionString(p.Addr),
			SettingStoreServiceURI:      "",
			"OrderStore__tableName":     d.orderTable,
			"DEAD_LETTER_TABLE":         d.dlTable,
			"ORDER_STATUS_RETRY_BUDGET": "500ms",
			// The policy before rescheduling: the outage below must
			// dead-letter, not become scheduled retries.
			"ORDER_STATUS_RETRY_RESCHEDULE":                 "false",
			"DEAD_LETTER_SWEEP_RATE":                        "1000",
			"LOG_LEVEL":                                     "info",
			"ServiceBusConnection__fullyQualifiedNamespace": "",
		},
		Queues:       QueueOverrides{MaxDeliveryCount: 3},
		Clock:        d.clk,
		HTTPAddr:     "off",
		Stdout:       io.Discard,
		Stderr:       io.Discard,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		DrainTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	h.StopTimers() // the test sweeps, with FireTimers or the CLI
	d.Host = h
	ep := h.Endpoints()
	ep.PID = os.Getpid()
	ep.StoreConnectionString = cs // directly, not through the fault proxy
	remove, err := devrun.Write(d.app, ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return d
}

func cliUpdate(orderID, status string, seq int) ScenarioLine {
	return ScenarioLine{Subject: "OrderStatusChanged", SessionID: orderID, MessageID: fmt.Sprintf("%s:%d", orderID, seq), ContentType: "application/json",
		Body: fmt.Appendf(nil, `{"orderId":%q,"status":%q,"sequence":%d,"occurredAt":"2026-11-29T10:00:00Z"}`, orderID, status, seq)}
}

func (d *cliHost) send(lines ...ScenarioLine) {
	d.t.Helper()
	for _, l := range lines {
		if err := d.Send(d.ctx, l); err != nil {
			d.t.Fatal(err)
		}
	}
	if err := d.WaitIdle(d.ctx); err != nil {
		d.t.Fatal(err)
	}
}

// invalidTransitions parks one InvalidTransition (Paid after Cancelled)
// for each order.
func (d *cliHost) invalidTransitions(orders ...string) {
	d.t.Helper()
	var lines []ScenarioLine
	for _, o := range orders {
		lines = append(lines, cliUpdate(o, "Created", 1), cliUpdate(o, "Cancelled", 2), cliUpdate(o, "Paid", 3))
	}
	d.send(lines...)
}

func (d *cliHost) sweepTimer() {
	d.t.Helper()
	if err := d.FireTimers(d.ctx); err != nil {
		d.t.Fatalf("FireTimers: %v", err)
	}
	if err := d.WaitIdle(d.ctx); err != nil {
		d.t.Fatal(err)
	}
}

// cliRun is one run of the CLI.
type cliRun struct {
	code           int
	stdout, stderr string
}

func (r cliRun) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, m)
	}
	return out
}

// cli runs `orderstatus deadletters args` against the host, off a terminal
// (stdin /dev/null); env overrides the settings it reads. progress, when
// set, is its stderr as a terminal: the bulk actions draw their progress
// bar there, one write per entry, and wait for each write.
func (d *cliHost) cli(progress io.Writer, env map[string]string, args ...string) cliRun {
	d.t.Helper()
	return d.cliIn(d.app, progress, env, args...)
}

// cliIn is cli run in dir: where no development host's file is found, it
// connects only as its flags and env say.
func (d *cliHost) cliIn(dir string, progress io.Writer, env map[string]string, args ...string) cliRun {
	d.t.Helper()
	null, err := os.Open(os.DevNull)
	if err != nil {
		d.t.Fatal(err)
	}
	defer null.Close()
	var out, errOut strings.Builder
	ew := io.Writer(&errOut)
	if progress != nil {
		ew = io.MultiWriter(&errOut, progress)
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		switch k {
		case "DEAD_LETTER_TABLE":
			return d.dlTable
		case "OrderStore__tableName":
			return d.orderTable
		case "DEAD_LETTER_SWEEP_RATE":
			return "1000"
		}
		return ""
	}
	code := deadletters.Run(d.ctx, args, &out, ew, deadletters.Env{Dir: dir, Getenv: getenv, Stdin: null,
		StderrIsTerminal: func() bool { return progress != nil }})
	return cliRun{code, out.String(), errOut.String()}
}

func (d *cliHost) must(args ...string) cliRun {
	d.t.Helper()
	r := d.cli(nil, nil, args...)
	if r.code != 0 {
		d.t.Fatalf("%q exited %d:\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// entries returns the store's entries by MessageId (list --json in every
// state).
func (d *cliHost) entries() map[string]map[string]any {
	d.t.Helper()
	out := map[string]map[string]any{}
	r := d.cli(nil, nil, "list", "--json", "--max", "1000", "--state", "open,left,replay-due,replayed,archived,discarded")
	if r.code != 0 {
		return out
	}
	for _, l := range r.lines(d.t) {
		out[l["message_id"].(string)] = l
	}
	return out
}

func (d *cliHost) tables() []string {
	d.t.Helper()
	svc, err := aztables.NewServiceClientFromConnectionString(d.cs, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	var names []string
	for p := svc.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(d.ctx)
		if err != nil {
			d.t.Fatal(err)
		}
		for _, tb := range page.Tables {
			names = append(names, *tb.Name)
		}
	}
	return names
}

// holdWriter, at the first write containing mark, says so on reached and
// waits for release: a command that writes its progress is held there.
type holdWriter struct {
	mark             string
	once             sync.Once
	reached, release chan struct{}
}

func (w *holdWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.mark) {
		w.once.Do(func() {
			close(w.reached)
			<-w.release
		})
	}
	return len(p), nil
}

// Every command of `orderstatus deadletters` against the real handler in the
// development host: stats and a dry run before the first sweep (the dry
// run, on a table that does not exist, names it, still reports Service
// Bus, and creates nothing), sweep agreeing with its dry run, groups and
// list, a bulk discard of a group while new poison arrives (what arrives
// after it started is untouched), a replay by hand that the handler
// applies and find --order then shows with its audit entry, archive and
// restore, and a corrected body resubmitted.
func TestDeadLettersCLIAgainstTheDevHost(t *testing.T) {
	t.Parallel()
	d := newCLIHost(t)
	// An outage longer than the deliveries dead-letters d-0..d-2; three
	// orders get a Paid after Cancelled (InvalidTransition); one body is
	// not JSON (InvalidPayload).
	d.proxy.SetRule(func(r *http.Request) faultproxy.Mode {
		if r.Method != http.MethodGet && strings.Contains(r.URL.Path, d.orderTable) {
			return faultproxy.ServerBusy
		}
		return faultproxy.Pass
	})
	d.send(cliUpdate("d-0", "Created", 1), cliUpdate("d-1", "Created", 1), cliUpdate("d-2", "Created", 1))
	d.proxy.SetRule(nil)
	d.invalidTransitions("p-0", "p-1", "p-2")
	d.send(ScenarioLine{Subject: "OrderStatusChanged", SessionID: "b-0", MessageID: "b-0:1", Body: []byte("not json")})

	// Before any sweep: what waits in Service Bus.
	st := d.must("stats", "--json").lines(t)
	depth := map[string]float64{}
	for _, l := range st {
		depth[l["source"].(string)+"/"+l["reason"].(string)] = l["depth"].(float64)
	}
	if depth["dlq/MaxDeliveryCountExceeded"] != 3 || depth["poison/InvalidTransition"] != 3 || depth["poison/InvalidPayload"] != 1 {
		t.Fatalf("stats before the sweep: %v", st)
	}
	before := d.tables()
	missing := "nodl" + strings.ToLower(rand.Text()[:8])
	r := d.cli(nil, map[string]string{"DEAD_LETTER_TABLE": missing}, "sweep", "--dry-run")
	if r.code != 1 || !strings.Contains(r.stderr, "could not read the dead-letter store") || !strings.Contains(r.stdout, "d-0:1") {
		t.Errorf("dry run on a missing table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := d.tables(); !slices.Equal(after, before) || slices.Contains(after, missing) {
		t.Errorf("the dry run created a table: %v, before %v", after, before)
	}

	// sweep does what its dry run said, per message.
	dry := map[string]string{}
	for _, l := range d.must("sweep", "--dry-run", "--json").lines(t) {
		if id, ok := l["message_id"].(string); ok {
			dry[id] = l["action"].(string)
		}
	}
	want := map[string]string{"d-0:1": "wait", "d-1:1": "wait", "d-2:1": "wait", "p-0:3:parked": "left", "p-1:3:parked": "left",
		"p-2:3:parked": "left", "b-0:1:parked": "archived"}
	for id, a := range want {
		if dry[id] != a {
			t.Errorf("dry run: %s would be %q, want %q", id, dry[id], a)
		}
	}
	for _, l := range d.must("sweep", "--json").lines(t) {
		if id, ok := l["message_id"].(string); ok && dry[id] != l["action"] {
			t.Errorf("sweep did %v to %s, its dry run said %s", l["action"], id, dry[id])
		}
	}
	es := d.entries()
	for id, a := range want {
		state := map[string]string{"wait": "open", "left": "left", "archived": "archived"}[a]
		if es[id]["state"] != state {
			t.Errorf("after the sweep %s is %v, want %s", id, es[id]["state"], state)
		}
	}

	// The InvalidTransition group, then a bulk discard of it while new
	// poison of the same group arrives and is swept into the store.
	groups := d.must("groups", "--json").lines(t)
	var group string
	for _, g := range groups {
		if g["reason"] == "InvalidTransition" {
			group = g["group"].(string)
			if g["count"] != float64(3) || g["orders"] != float64(3) || g["action"] != "left" {
				t.Errorf("group %v", g)
			}
		}
	}
	if group == "" {
		t.Fatalf("no InvalidTransition group: %v", groups)
	}
	if ls := d.must("list", "--group", group, "--state", "left", "--json").lines(t); len(ls) != 3 {
		t.Errorf("list --group: %d entries", len(ls))
	}
	// The discard is held after its first entry (its progress bar's first
	// write) while new poison arrives and the timer sweeps it into the
	// store: stored after the discard started, it must stay as it is.
	hold := &holdWriter{mark: "] 1/3", reached: make(chan struct{}), release: make(chan struct{})}
	done := make(chan cliRun, 1)
	go func() {
		done <- d.cli(hold, nil, "discard", "--group", group, "--state", "left", "--yes")
	}()
	select {
	case <-hold.reached:
	case r := <-done:
		t.Fatalf("discard ended before its first entry was done: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	d.invalidTransitions("p-3", "p-4")
	d.sweepTimer()
	if es := d.entries(); es["p-3:3:parked"]["state"] != "left" || es["p-4:3:parked"]["state"] != "left" {
		t.Fatalf("the new poison is not in the store while the discard runs: %v, %v", es["p-3:3:parked"], es["p-4:3:parked"])
	}
	close(hold.release)
	r = <-done
	if r.code != 0 || !strings.Contains(r.stdout, "3 dead letters match") || !strings.Contains(r.stdout, "discard: 3 of 3 done, 0 failed") {
		t.Fatalf("bulk discard: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	es = d.entries()
	for _, id := range []string{"p-0:3:parked", "p-1:3:parked", "p-2:3:parked"} {
		if es[id]["state"] != "discarded" {
			t.Errorf("%s is %v after the bulk discard", id, es[id]["state"])
		}
	}
	for _, id := range []string{"p-3:3:parked", "p-4:3:parked"} {
		if es[id]["state"] != "left" || es[id]["group"] != group {
			t.Errorf("%s arrived after the discard started: %v, want left in group %s", id, es[id], group)
		}
	}

	// A replay by hand (inside the cool-down: a human decided), applied by
	// the handler; find --order shows the row, the entry and the audit.
	if out := d.must("replay", "--id", "d-0:1").stdout; !strings.Contains(out, "as d-0:1:replay:1") {
		t.Errorf("replay: %s", out)
	}
	if err := d.WaitIdle(d.ctx); err != nil {
		t.Fatal(err)
	}
	ev := d.must("find", "--order", "d-0", "--json").lines(t)
	var kinds []string
	for _, e := range ev {
		kinds = append(kinds, e["kind"].(string))
	}
	if !slices.Contains(kinds, "order") || !slices.Contains(kinds, "entry") {
		t.Fatalf("find --order d-0: %v", ev)
	}
	var replayed bool
	for _, e := range ev {
		switch e["kind"] {
		case "order":
			if o := e["order"].(map[string]any); o["status"] != "Created" || o["last_sequence"] != float64(1) {
				t.Errorf("the replay was not applied: row %v", o)
			}
		case "audit":
			a := e["audit"].(map[string]any)
			if a["action"] == "replayed" && strings.HasPrefix(a["actor"].(string), "cli:") && a["new_message_id"] == "d-0:1:replay:1" {
				replayed = true
			}
		}
	}
	if !replayed {
		t.Errorf("find --order d-0 shows no replay audit entry: %v", ev)
	}
	if text := d.must("find", "--order", "d-0").stdout; !strings.Contains(text, "replayed by cli:") || !strings.Contains(text, "status Created") {
		t.Errorf("find --order d-0:\n%s", text)
	}

	// archive, then restore; the archived bad payload restored and
	// resubmitted with a corrected body.
	d.must("archive", "--id", "d-1:1")
	if es := d.entries(); es["d-1:1"]["state"] != "archived" {
		t.Errorf("after archive: %v", es["d-1:1"]["state"])
	}
	if out := d.must("list", "--state", "archived").stdout; !strings.Contains(out, "d-1:1") || !strings.Contains(out, "b-0:1:parked") {
		t.Errorf("list --state archived:\n%s", out)
	}
	d.must("restore", "--id", "d-1:1")
	d.must("restore", "--id", "b-0:1")
	if es := d.entries(); es["d-1:1"]["state"] != "open" || es["b-0:1:parked"]["state"] != "open" {
		t.Errorf("after restore: %v, %v", es["d-1:1"]["state"], es["b-0:1:parked"]["state"])
	}
	body := filepath.Join(t.TempDir(), "corrected.json")
	if err := os.WriteFile(body, []byte(`{"orderId":"b-0","status":"Created","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := d.must("replay", "--id", "b-0:1", "--body", body).stdout; !strings.Contains(out, "resubmitted") {
		t.Errorf("replay --body: %s", out)
	}
	if err := d.WaitIdle(d.ctx); err != nil {
		t.Fatal(err)
	}
	if text := d.must("find", "--order", "b-0").stdout; !strings.Contains(text, "status Created, last sequence 1") {
		t.Errorf("the corrected body was not applied:\n%s", text)
	}
	d.must("stats")
}

// The CLI on the dead-letter store alone, as an operator with table rights
// only, or during a Service Bus incident, uses it: a development host whose
// broker clock has skipped two hours of idle time parks InvalidTransitions
// and sweeps them into the store, stamped two hours ahead of the wall
// clock. The CLI, with --tables only (no development host found, no
// namespace), lists them, says it could not read the clock they are on,
// finds an order with each time's clock, and a bulk dry run takes exactly
// what list shows, the entries stamped ahead of its clock included; the
// real run discards that set. replay, which sends, refuses in one line.
func TestDeadLettersCLIOnTheStoreAlone(t *testing.T) {
	t.Parallel()
	d := newCLIHost(t)
	d.clk.Advance(2 * time.Hour) // as --exit-when-idle skips idle time: nobody outside the host can tell
	d.invalidTransitions("s-0", "s-1")
	d.sweepTimer()
	nowhere := t.TempDir()
	run := func(args ...string) cliRun {
		t.Helper()
		return d.cliIn(nowhere, nil, nil, append(args, "--tables", d.cs)...)
	}
	ids := func(r cliRun) []string {
		var out []string
		for _, l := range r.lines(t) {
			if id, ok := l["id"].(string); ok {
				out = append(out, id)
			}
		}
		return out
	}

	ls := run("list", "--state", "left", "--json")
	if ls.code != 0 || ls.stderr != "" {
		t.Fatalf("list --tables only: exit %d\n%s%s", ls.code, ls.stdout, ls.stderr)
	}
	listed := ids(ls)
	if len(listed) != 2 {
		t.Fatalf("list --state left: %v, want the two parked InvalidTransitions", listed)
	}
	for _, l := range ls.lines(t) {
		if at, err := time.Parse(time.RFC3339Nano, l["stored_at"].(string)); err != nil || time.Since(at) < 0 || time.Since(at) > time.Minute {
			t.Fatalf("stored_at %v: want it in real time, within the last minute, though the host's clock is two hours ahead (%v)", l["stored_at"], err)
		}
	}
	dry := run("discard", "--state", "left", "--dry-run", "--json")
	if got := ids(dry); dry.code != 0 || !slices.Equal(got, listed) {
		t.Errorf("discard --state left --dry-run: exit %d, takes %v; list shows %v\n%s", dry.code, got, listed, dry.stderr)
	}

	f := run("find", "--order", "s-0", "--json")
	if f.code != 0 {
		t.Fatalf("find --tables only: exit %d\n%s%s", f.code, f.stdout, f.stderr)
	}
	var kinds []string
	for _, e := range f.lines(t) {
		kinds = append(kinds, fmt.Sprint(e["kind"]))
	}
	if len(kinds) < 3 || kinds[0] != "order" || kinds[1] != "entry" || kinds[2] != "audit" {
		t.Errorf("find --order s-0: kinds %v, want the order row first, then its entry and its audit", kinds)
	}

	if r := run("replay", "--state", "left", "--yes"); r.code != 1 || !strings.Contains(r.stderr, "no Service Bus to connect to") ||
		strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("replay with --tables only: exit %d, stderr %q; want 1 and one line saying why", r.code, r.stderr)
	}
	r := run("discard", "--state", "left", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "2 dead letters match") || !strings.Contains(r.stdout, "discard: 2 of 2 done, 0 failed") {
		t.Fatalf("discard --state left: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	es := d.entries() // through the development host
	for _, id := range []string{"s-0:3:parked", "s-1:3:parked"} {
		if es[id]["state"] != "discarded" {
			t.Errorf("%s is %v after the discard, want discarded", id, es[id]["state"])
		}
	}
}
