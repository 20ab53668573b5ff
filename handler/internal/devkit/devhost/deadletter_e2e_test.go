package devhost

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/sim"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
)

// The dead-letter end-to-end tests run the real bin/handler (OrderStatus
// and DeadLetterSweeper) under a development host, against Azurite behind
// a fault proxy, on a broker clock the test moves: the cool-down is
// measured on the broker's clock, which the handler reads through the
// loopback broker.

type dlHost struct {
	*Host
	ctx    context.Context
	clk    *clock.ScaledClock
	proxy  *faultproxy.Proxy
	store  dlstore.Store
	out    *sim.SyncBuffer
	app    string
	cs     string
	suffix string
}

// dlCooldown is the dead-letter cool-down of these tests.
const dlCooldown = 3 * time.Second

func newDLHost(t *testing.T) *dlHost {
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
	d := &dlHost{clk: clock.Scaled(1), proxy: p, out: &sim.SyncBuffer{}, app: copyApp(t, root, handler), cs: cs, suffix: suffix}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	d.ctx = ctx
	h, err := New(Options{
		AppRoot:     d.app,
		HandlerPath: handler,
		Env:         []string{"PATH=" + os.Getenv("PATH")},
		Settings: map[string]string{
			SettingStoreConnection:      azurite.ConnectionString(p.Addr),
			SettingStoreServiceURI:      "",
			"OrderStore__tableName":     "e2e" + suffix,
			"ORDER_STATUS_RETRY_BUDGET": "500ms",
			// The policy before rescheduling: an outage past the budget
			// is answered 5xx and dead-lettered, which these tests need.
			"ORDER_STATUS_RETRY_RESCHEDULE": "false",
			"DEAD_LETTER_TABLE":             "dl" + suffix,
			"DEAD_LETTER_SWEEP_RATE":        "1000",
			// Real time, short: the handler cannot see the host's clock.
			"DEAD_LETTER_REPLAY_COOLDOWN": dlCooldown.String(),
			"LOG_LEVEL":                   "info",
			"ServiceBusConnection__fullyQualifiedNamespace": "",
		},
		Queues:       QueueOverrides{MaxDeliveryCount: 3},
		Clock:        d.clk,
		HTTPAddr:     "off",
		Stdout:       d.out,
		Stderr:       &sim.SyncBuffer{},
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
	d.Host = h
	svc, err := aztables.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.store = dltable.New(svc, "dl"+suffix, nil)
	return d
}

func update(order string, status string, seq int) ScenarioLine {
	return ScenarioLine{Subject: "OrderStatusChanged", SessionID: order, MessageID: fmt.Sprintf("%s:%d", order, seq), ContentType: "application/json",
		Body: []byte(fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d,"occurredAt":"2026-11-29T10:00:00Z"}`, order, status, seq))}
}

func (d *dlHost) send(t *testing.T, lines ...ScenarioLine) {
	t.Helper()
	for _, l := range lines {
		if err := d.Send(d.ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WaitIdle(d.ctx); err != nil {
		t.Fatal(err)
	}
}

func (d *dlHost) sweep(t *testing.T) {
	t.Helper()
	if err := d.FireTimers(d.ctx); err != nil {
		t.Fatalf("FireTimers: %v", err)
	}
	if err := d.WaitIdle(d.ctx); err != nil {
		t.Fatal(err)
	}
}

func (d *dlHost) peek(t *testing.T, src broker.Source) []broker.Received {
	t.Helper()
	got, err := broker.PeekAll(d.ctx, d.Broker(), src)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// completions returns the results the host completed message id with.
func (d *dlHost) completions(id string) []string {
	d.stats.mu.Lock()
	defer d.stats.mu.Unlock()
	var out []string
	for _, c := range d.stats.completions {
		if c.MessageID == id {
			out = append(out, c.Result)
		}
	}
	return out
}

// statsLines returns the handler's deadletter_stats lines for source and
// reason.
func (d *dlHost) statsLines(source, reason string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(d.out.String(), "\n") {
		if !strings.Contains(line, `"msg":"deadletter_stats"`) {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["source"] == source && m["reason"] == reason {
			out = append(out, m)
		}
	}
	return out
}

// 1. A poison message parked by OrderStatus is drained into the store and
// archived, with its audit entries; 3. an InvalidTransition is drained and
// left for a human, stays so across sweeps and is counted in
// deadletter_stats. Nothing stays in the poison queue: no deferral.
func TestSweeperArchivesPoisonAndLeavesInvalidTransition(t *testing.T) {
	t.Parallel()
	d := newDLHost(t)
	bad := ScenarioLine{Subject: "OrderStatusChanged", SessionID: "o-5", MessageID: "o-5:bad", Body: []byte(`{"orderId":`)}
	d.send(t, bad, update("o-4", "Created", 1), update("o-4", "Delivered", 2), update("o-4", "Shipped", 3))
	poison := broker.Source{Queue: d.PoisonQueue()}
	if got := d.peek(t, poison); len(got) != 2 {
		t.Fatalf("poison queue holds %d messages before the sweep, want 2", len(got))
	}
	for range 3 {
		d.sweep(t)
	}
	if left := d.peek(t, poison); len(left) != 0 {
		t.Fatalf("poison queue after three sweeps = %+v, want it drained into the store", left)
	}
	entries, err := d.store.List(d.ctx, dlstore.Filter{Source: dlstore.Poison})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]dlstore.State{}
	for _, e := range entries {
		states[e.MessageID] = e.State
	}
	if states["o-5:bad:parked"] != dlstore.Archived || states["o-4:3:parked"] != dlstore.Left || len(states) != 2 {
		t.Fatalf("entries = %v, want o-5:bad archived and o-4:3 left", states)
	}
	if n := len(d.statsLines("poison", "InvalidTransition")); n < 3 {
		t.Errorf("%d deadletter_stats lines count the InvalidTransition, want one per sweep (3)", n)
	}
	for _, l := range d.statsLines("poison", "InvalidTransition") {
		if l["depth"] != float64(1) || l["left"] != float64(1) {
			t.Errorf("stats line %v: want depth 1, left 1", l)
		}
	}
	sum, err := d.Summary(d.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Entry{{MessageID: "o-5:bad", Reason: "InvalidPayload"}}; !slices.Equal(sum.Archived, want) {
		t.Errorf("summary archived = %+v, want %+v", sum.Archived, want)
	}
	audit, err := d.store.History(d.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, a := range audit {
		count[a.MessageID+" "+a.Action+" "+a.Actor]++
	}
	for _, want := range []string{"o-5:bad:parked stored sweeper", "o-5:bad:parked archived sweeper", "o-4:3:parked stored sweeper", "o-4:3:parked left sweeper"} {
		if count[want] != 1 {
			t.Errorf("audit entries %q: %d, want 1\n%v", want, count[want], count)
		}
	}
}

// 2. A storage outage longer than the deliveries dead-letters a message;
// the sweeper records it, leaves it during the cool-down, replays it after,
// and it is applied exactly once. 4. A replayed message whose order has
// moved on is completed as Stale.
func TestSweeperReplaysAfterTheCooldown(t *testing.T) {
	t.Parallel()
	d := newDLHost(t)
	d.proxy.SetRule(func(r *http.Request) faultproxy.Mode {
		if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "e2e") {
			return faultproxy.ServerBusy // the order table is down for writes
		}
		return faultproxy.Pass
	})
	d.send(t, update("o-1", "Created", 1), update("o-2", "Created", 1))
	dlq := broker.Source{Queue: d.Queue(), DeadLetter: true}
	if got := d.peek(t, dlq); len(got) != 2 {
		t.Fatalf("DLQ holds %d messages after the outage, want 2 (o-1:1, o-2:1)", len(got))
	}
	d.proxy.SetRule(nil)
	// o-2 moves on while its first update sits in the DLQ.
	d.send(t, update("o-2", "Paid", 2))

	d.sweep(t) // drained into the store: the cool-down starts
	if got := d.peek(t, dlq); len(got) != 0 {
		t.Fatalf("DLQ after the sweep = %+v, want it drained into the store", got)
	}
	d.sweep(t) // within the cool-down: nothing
	if got := d.completions("o-1:1:replay:1"); len(got) != 0 {
		t.Fatalf("o-1:1 replayed during the cool-down: %v", got)
	}
	open, err := d.store.List(d.ctx, dlstore.Filter{Source: dlstore.DLQ, States: []dlstore.State{dlstore.Open}})
	if err != nil || len(open) != 2 {
		t.Fatalf("open DLQ entries = %d, %v; want 2", len(open), err)
	}

	time.Sleep(dlCooldown)
	d.sweep(t)
	if open, err := d.store.List(d.ctx, dlstore.NotClosed()); err != nil || len(open) != 0 {
		t.Fatalf("entries not closed after the cool-down: %d, %v; want none", len(open), err)
	}
	if got := d.completions("o-1:1:replay:1"); !slices.Equal(got, []string{"Applied"}) {
		t.Errorf("o-1:1:replay:1 completed %v, want Applied once", got)
	}
	if got := d.completions("o-2:1:replay:1"); !slices.Equal(got, []string{"Stale"}) {
		t.Errorf("o-2:1:replay:1 completed %v, want Stale (o-2 is at sequence 2)", got)
	}
	d.sweep(t) // nothing left to replay
	sum, err := d.Summary(d.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Orders["o-1"] != (OrderRow{Status: "Created", LastSequence: 1}) || sum.Orders["o-2"] != (OrderRow{Status: "Paid", LastSequence: 2}) {
		t.Errorf("orders = %+v", sum.Orders)
	}
	if len(sum.Violations) != 0 {
		t.Errorf("invariants: %v", sum.Violations)
	}
	applied := 0
	for _, id := range []string{"o-1:1", "o-1:1:replay:1", "o-1:1:replay:2"} {
		for _, r := range d.completions(id) {
			if r == "Applied" {
				applied++
			}
		}
	}
	if applied != 1 {
		t.Errorf("o-1's Created was applied %d times, want exactly once", applied)
	}
}

func (d *dlHost) endpoints() devrun.Endpoints {
	ep := d.Endpoints()
	ep.PID = os.Getpid()
	ep.StoreConnectionString = d.cs // directly, not through the fault proxy
	return ep
}

// getenv gives the CLI the host's tables.
func (d *dlHost) getenv(k string) string {
	switch k {
	case "DEAD_LETTER_TABLE":
		return "dl" + d.suffix
	case "OrderStore__tableName":
		return "e2e" + d.suffix
	}
	return ""
}
