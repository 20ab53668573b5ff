package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, line string
		want       time.Duration
		wantErr    bool
	}{
		{"plain", "42 (handler) S 1 42 42 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 8 0 1 1 1", 1750 * time.Millisecond, false},
		{"name with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1", 70 * time.Millisecond, false},
		{"truncated", "7 (x) R 1 2 3", 0, true},
		{"no name", "garbage", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tt.line))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStatCPU = %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if d, err := CPUTime(0); err != nil || d < 0 {
		t.Errorf("CPUTime(self) = %v, %v", d, err)
	}
	if n, err := RSS(os.Getpid()); err != nil || n <= 0 {
		t.Errorf("RSS(self) = %d, %v", n, err)
	}
}

func TestMedianPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	if got := median(xs); got != 3 {
		t.Errorf("median = %v, want 3", got)
	}
	if got := median(xs[:4]); got != 3 {
		t.Errorf("median of 5,1,4,2 = %v, want 3", got)
	}
	if got := percentile(xs, 0.9); got != 5 {
		t.Errorf("p90 = %v, want 5", got)
	}
	if !math.IsNaN(median(nil)) || !math.IsNaN(percentile(nil, 0.5)) {
		t.Error("median or percentile of nothing is not NaN")
	}
	if xs[0] != 5 {
		t.Error("median sorted its argument")
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS(strings.NewReader("Name:\tx\nVmPeak:\t 9 kB\nVmRSS:\t   2048 kB\n"))
	if err != nil || got != 2048*1024 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 2048*1024)
	}
	if _, err := parseVmRSS(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("parseVmRSS without VmRSS: no error")
	}
}

const exposition = `# HELP orderstatus_messages_total x
# TYPE orderstatus_messages_total counter
orderstatus_messages_total{result="Applied",subject="OrderStatusChanged"} 8
orderstatus_messages_total{result="Duplicate",subject="OrderStatusChanged"} 2
orderstatus_messages_total{result="Applied",subject="PaymentTimeoutCheck"} 1
orderstatus_odd{label="a,b=\"c\"",x="y"} 3
orderstatus_d_bucket{subject="s",le="0.001"} 0
orderstatus_d_bucket{subject="s",le="0.002"} 50
orderstatus_d_bucket{subject="s",le="0.005"} 90
orderstatus_d_bucket{subject="s",le="0.01"} 100
orderstatus_d_bucket{subject="s",le="+Inf"} 100
orderstatus_d_sum{subject="s"} 0.3
go_goroutines 12
`

func TestMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	sums := []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"orderstatus_messages_total", nil, 11},
		{"orderstatus_messages_total", map[string]string{"result": "Applied"}, 9},
		{"orderstatus_messages_total", map[string]string{"result": "Applied", "subject": "OrderStatusChanged"}, 8},
		{"orderstatus_odd", map[string]string{"label": `a,b="c"`}, 3},
		{"go_goroutines", nil, 12},
		{"missing", nil, 0},
	}
	for _, tt := range sums {
		if got := m.Sum(tt.name, tt.match); got != tt.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tt.name, tt.match, got, tt.want)
		}
	}
	quantiles := []struct{ q, want float64 }{{0.5, 0.002}, {0.25, 0.0015}, {0.9, 0.005}, {0.95, 0.0075}, {1, 0.01}}
	for _, tt := range quantiles {
		if got := m.Quantile("orderstatus_d", tt.q, map[string]string{"subject": "s"}); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := m.Quantile("missing", 0.5, nil); !math.IsNaN(got) {
		t.Errorf("Quantile of a missing histogram = %v, want NaN", got)
	}
	if _, err := ParseMetrics(strings.NewReader("x{a=\"1\" 3\n")); err == nil {
		t.Error("unclosed labels: no error")
	}
}

func TestWorkload(t *testing.T) {
	w := NewWorkload("t", 100, 0.20, 0.05, 1)
	if w.Applied != 400 || w.Duplicates != 80 || w.Stales != 20 || w.Messages() != 500 || len(w.Lines()) != 500 {
		t.Fatalf("workload = %d applied, %d duplicates, %d stale, %d lines; want 400, 80, 20, 500",
			w.Applied, w.Duplicates, w.Stales, len(w.Lines()))
	}
	ids := map[string]bool{}
	for _, l := range w.Lines() {
		if ids[l.MessageID] {
			t.Fatalf("message id %s twice", l.MessageID)
		}
		ids[l.MessageID] = true
		// Producers' changes carry occurredAt: the handler then schedules each
		// Created's check half an hour on, outside the timed run.
		if u, err := order.ParseUpdate(l.Body, l.SessionID); err != nil || u.OccurredAt.IsZero() || time.Since(u.OccurredAt) > time.Minute {
			t.Fatalf("line %s: %s parses to %+v, %v; want a change that occurred now", l.MessageID, l.Body, u, err)
		}
	}
	if again := NewWorkload("t", 100, 0.20, 0.05, 1); len(again.Orders[7].Messages) != len(w.Orders[7].Messages) {
		t.Error("the same seed gave another workload")
	}
}

// TestDirectDesigns runs the limit and naive loops over the in-memory
// store: each must settle the workload exactly as the handler would, with
// the round trips its design implies.
func TestDirectDesigns(t *testing.T) {
	w := NewWorkload("t", 50, 0.20, 0.05, 2)
	tests := []struct {
		name      string
		design    perOrder
		wantTrips int64
	}{
		{"limit", limitOrder, int64(w.Applied)},
		{"naive", naiveOrder, int64(w.Messages() + w.Applied)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New()
			r, err := runDirect(t.Context(), s, w, 4, tt.design)
			if err != nil {
				t.Fatal(err)
			}
			if r.RoundTrips != tt.wantTrips {
				t.Errorf("%d round trips, want %d", r.RoundTrips, tt.wantTrips)
			}
			row, err := s.Get(t.Context(), w.Orders[0].ID)
			if err != nil || row.State.Status != order.Delivered || row.State.LastSequence != 4 {
				t.Errorf("row = %+v, %v; want Delivered at 4", row.State, err)
			}
		})
	}
}

// TestRunSmoke runs the whole of `make bench` at a tiny size against
// Azurite and bin/handler, so that its logic cannot rot: every figure is
// printed, parseable and plausible. The figures themselves mean nothing
// at this size.
// mayBeZero are cost figures that are honestly zero in the smoke run: an
// idle sweep rounds to 0.00 s and may need no table call, the data at
// rest rounds to nothing, and at LOG_LEVEL warn the handler writes no
// per-message line.
var mayBeZero = map[string]bool{"cost_sweep_seconds": true, "cost_sweep_table_transactions": true, "cost_usd_idle_month_storage": true,
	"cost_handler_log_bytes_per_message": true}

func TestRunSmoke(t *testing.T) {
	root := filepath.Dir(filepath.Dir(testenv.Handler(t, "../../../..")))
	opts := Defaults()
	opts.Root, opts.Orders, opts.Latency = root, 8, time.Millisecond
	opts.Sessions, opts.SlotSessions, opts.SlotIdle, opts.SlotRounds = []int{1, 4}, []int{2}, []time.Duration{50 * time.Millisecond}, 2
	opts.ColdStarts, opts.RSSOrders, opts.LogLevel, opts.Repeats = 2, 10, "warn", 2
	opts.Outages = OutageOptions{} // TestOutageSmoke runs them
	opts.ProfileDir = t.TempDir()
	var progress bytes.Buffer
	opts.Progress = &progress
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, opts)
	if err != nil {
		if strings.Contains(err.Error(), "not installed") && os.Getenv("ORDERSTATUS_REQUIRE_AZURITE") != "1" {
			t.Skipf("Azurite not installed: %v", err)
		}
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	// cold start; warm-up; limit, naive and ours twice each, ours on
	// today's policy and the limit through the host four times each (two
	// pairs a round), locally and with latency; the
	// sessions; the instances; the slot table's one row; cost and the
	// timeout checks; memory.
	if n := strings.Count(progress.String(), "\n"); n != 1+1+2*2*7+len(opts.Sessions)+1+1+2+1 {
		t.Errorf("%d progress lines, want one per phase:\n%s", n, progress.String())
	}
	checkProfiles(t, opts.ProfileDir)
	var out bytes.Buffer
	r.Print(&out, opts)
	names := map[string]bool{}
	for _, n := range Names(opts) {
		names[n] = true
	}
	printed := map[string]float64{}
	for _, line := range strings.Split(out.String(), "\n") {
		name, val, ok := strings.Cut(line, ": ")
		if !ok || !names[name] {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Errorf("line %q: %v", line, err)
		}
		printed[name] = v
	}
	lat := "latency1ms_"
	for _, name := range Names(opts) {
		v, ok := printed[name]
		if !ok {
			t.Errorf("%s not printed", name)
			continue
		}
		if math.IsNaN(v) || v < 0 || (v == 0 && !strings.HasPrefix(name, "round_trips_per_") && !strings.HasPrefix(name, "cpu_ms") &&
			!strings.HasSuffix(name, "_conflicts_per_1000") && !mayBeZero[name]) {
			t.Errorf("%s: %v, want a positive figure", name, v)
		}
	}
	for name, want := range map[string]float64{"round_trips_per_applied": 1, "round_trips_per_applied_before": 1, "limit_round_trips_per_msg": float64(32) / 40,
		lat + "limit_round_trips_per_msg": float64(32) / 40} {
		if got := printed[name]; math.Abs(got-want) > 0.06 {
			t.Errorf("%s = %v, want about %v", name, got, want)
		}
	}
	if len(r.Slots) != 1 || r.Slots[0].Messages != 4 || r.Slots[0].IdleShare <= 0 || r.Slots[0].IdleShare >= 1 {
		t.Errorf("slot table = %+v, want one row of 4 messages with a share of idle time", r.Slots)
	}
	checkInstancesRun(t, r, printed, out.String())
	checkCostRun(t, r, printed)
	// One check per order: its schedule, and its delivery's receive and
	// complete at least; one more execution each.
	if v := printed["timeout_check_servicebus_ops_per_order"]; v < 1 {
		t.Errorf("timeout_check_servicebus_ops_per_order = %v, want at least the schedule", v)
	}
	if v := printed["timeout_check_executions_per_order"]; v < 0.99 || v > 1.01 {
		t.Errorf("timeout_check_executions_per_order = %v, want 1 (the check's delivery)", v)
	}
	for _, p := range []string{"", lat} {
		// The same work: ours on today's policy (no handler-scheduled
		// check), as the minimal handler, limit and naive.
		same := printed[p+"ours_msgs_per_s_before"]
		// The median of the rounds' ratios: within the lowest and the
		// highest round's, which lie within what the two designs' own
		// spreads allow.
		name := p + "ours_vs_limit_through_host"
		got, rs, ours, floor := printed[name], r.Spreads[name], r.Spreads[p+"ours_msgs_per_s_before"], r.Spreads[p+"limit_through_host_msgs_per_s"]
		if lo, hi := ours[0]/floor[1], ours[1]/floor[0]; got < rs[0]-0.01 || got > rs[1]+0.01 || rs[0] < lo-1e-9 || rs[1] > hi+1e-9 {
			t.Errorf("%s = %v, rounds %v; want it within the rounds' ratios, and those within ours (today's policy) over the limit through the host, %v to %v", name, got, rs, lo, hi)
		}
		if !strings.Contains(out.String(), "note: "+name+" by pair") {
			t.Errorf("no note of %s by pair", name)
		}
		if got, want := printed[p+"ours_vs_naive"], same/printed[p+"naive_msgs_per_s"]; math.Abs(got-want) > 0.01*want+0.01 {
			t.Errorf("%sours_vs_naive = %v, want ours (today's policy) over naive, %v", p, got, want)
		}
		if !strings.Contains(out.String(), "target "+p+"ours_vs_limit_through_host >= 0.95") {
			t.Errorf("no target line for %sours_vs_limit_through_host", p)
		}
	}
	for _, want := range []string{"target ours_msgs_per_s on the default policy = today's within the run's noise",
		"target " + lat + "ours_msgs_per_s on the default policy = today's within the run's noise",
		"target round_trips_per_applied on the default policy = today's within 0.01"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no target line %q", want)
		}
	}
	for _, name := range []string{"ours_msgs_per_s", "ours_msgs_per_s_before", lat + "ours_msgs_per_s", lat + "ours_msgs_per_s_before"} {
		sp := r.Spreads[name]
		if v := r.Values[name]; sp[0] <= 0 || sp[0] > v || v > sp[1] {
			t.Errorf("%s = %v, spread %v: want the median within the runs' range", name, v, sp)
		}
	}
	if !strings.Contains(out.String(), "target round_trips_per_applied <= 1.05") {
		t.Errorf("targets not printed:\n%s", out.String())
	}
	if t.Failed() {
		t.Logf("progress:\n%s\noutput:\n%s", progress.String(), out.String())
	}
}

// checkInstancesRun checks the smoke run's instances run: its scale events
// applied, each instance in the state they left it, the figures from the
// instances' own counts.
func checkInstancesRun(t *testing.T, r Report, printed map[string]float64, out string) {
	t.Helper()
	run := r.Instances
	if run == nil {
		t.Fatal("no instances run in the report")
	}
	if len(run.Events) != len(instanceSteps) {
		t.Errorf("scale events %q, want %d", run.Events, len(instanceSteps))
	}
	wantStates := []string{devhost.InstanceKilled, devhost.InstanceRemoved, devhost.InstanceRunning, devhost.InstanceRunning,
		devhost.InstanceRunning, devhost.InstanceRunning}
	var states []string
	trips := 0
	for _, in := range run.PerInstance {
		states = append(states, in.State)
		trips += in.RoundTrips
	}
	if !slices.Equal(states, wantStates) {
		t.Errorf("instance states %q, want %q", states, wantStates)
	}
	// 8 orders of 4 status changes: 32 applied messages. The figure may
	// fall below 1: a write made by the killed instance is in the table
	// but in no instance's log lines (its answer died with it).
	if got, want := printed["instances_4_round_trips_per_applied"], float64(trips)/32; math.Abs(got-want) > 0.001 {
		t.Errorf("instances_4_round_trips_per_applied = %v, want the instances' %d round trips over 32 applied (%v)", got, trips, want)
	}
	if run.Calls < sumValues(run.Completed) || sumValues(run.Completed) != 40 {
		t.Errorf("%d calls for %d completed messages, want 40 messages and a call each at least", run.Calls, sumValues(run.Completed))
	}
	if math.IsNaN(run.Baseline) || run.Baseline < 1 {
		t.Errorf("baseline %v, want the local runs' round trips per applied message", run.Baseline)
	}
	for _, want := range []string{"| OrderStatus-1 | killed |", "session moves", "target instances_4_round_trips_per_applied - the 1-instance figure <= 0.1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCheckSettledInstances: with instances killed, a status change may
// settle as Duplicate instead of Applied, but only as often as calls were
// made again; everything else is exact.
func TestCheckSettledInstances(t *testing.T) {
	w := NewWorkload("t", 10, 0.20, 0.05, 1) // 40 applied, 8 duplicates, 2 stale
	tests := []struct {
		name      string
		completed map[string]int
		dead      int
		calls     int
		wantErr   string
	}{
		{"exact", map[string]int{"Applied": 40, "Duplicate": 8, "Stale": 2}, 0, 50, ""},
		{"exact, calls made again", map[string]int{"Applied": 40, "Duplicate": 8, "Stale": 2}, 0, 53, ""},
		{"answers lost with a killed instance", map[string]int{"Applied": 38, "Duplicate": 10, "Stale": 2}, 0, 53, ""},
		{"more lost answers than calls made again", map[string]int{"Applied": 37, "Duplicate": 11, "Stale": 2}, 0, 52, "beyond the workload's"},
		{"an applied message lost", map[string]int{"Applied": 39, "Duplicate": 8, "Stale": 2}, 0, 50, "completed"},
		{"applied twice", map[string]int{"Applied": 41, "Duplicate": 7, "Stale": 2}, 0, 50, "as Duplicate"},
		{"a stale replay applied", map[string]int{"Applied": 41, "Duplicate": 8, "Stale": 1}, 0, 50, "as Stale"},
		{"parked", map[string]int{"Applied": 39, "Duplicate": 8, "Stale": 2, "Parked": 1}, 0, 50, "neither"},
		{"dead-lettered", map[string]int{"Applied": 40, "Duplicate": 8, "Stale": 2}, 1, 51, "dead-lettered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSettledInstances(tt.completed, tt.dead, tt.calls, w)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

// checkCostRun holds the cost figures to what they are made of: the
// breakdown adds up, the executions and operations are those of the
// workload, and the per-million figure is what the model gives for them.
func checkCostRun(t *testing.T, r Report, printed map[string]float64) {
	t.Helper()
	c := r.Cost
	if c == nil {
		t.Error("no cost run")
		return
	}
	parts := printed["cost_usd_per_million_messages_functions"] + printed["cost_usd_per_million_messages_servicebus"] +
		printed["cost_usd_per_million_messages_storage"] + printed["cost_usd_per_million_messages_logs"]
	if total := printed["cost_usd_per_million_messages"]; math.Abs(parts-total) > 0.02 {
		t.Errorf("per million: the parts add up to %.2f, the total is %.2f", parts, total)
	}
	// Every message is one execution (no redelivery in the smoke run) and
	// costs at least its send, its receive and its settlement.
	if e := c.PerMessage.Executions; math.Abs(e-1) > 0.01 {
		t.Errorf("executions per message = %v, want 1", e)
	}
	if ops := c.PerMessage.ServiceBusOps; ops < 3 {
		t.Errorf("Service Bus operations per message = %v, want at least 3 (send, receive, complete)", ops)
	}
	if got := c.Prices.PerMillion(c.PerMessage, c.Params).Total(); math.Abs(got-printed["cost_usd_per_million_messages"]) > 0.01 {
		t.Errorf("the printed per-million figure %.2f is not the model's %.2f", printed["cost_usd_per_million_messages"], got)
	}
	// The handler's own time is part of its duration, and its GB-s per
	// message follow from it at the instance memory.
	own, exec := printed["cost_handler_own_ms_per_execution"], printed["cost_exec_ms_per_execution"]
	if own <= 0 || own >= exec {
		t.Errorf("the handler's own time %v ms per execution, want above 0 and below its duration %v ms", own, exec)
	}
	if want := c.PerMessage.Executions * c.OwnSeconds * float64(c.Params.InstanceMemoryMB) / 1024; math.Abs(printed["cost_handler_own_gb_s_per_message"]-want) > 1e-6 {
		t.Errorf("cost_handler_own_gb_s_per_message = %v, want %v", printed["cost_handler_own_gb_s_per_message"], want)
	}
	// The repository's host.json drops the host's per-execution traces
	// and aggregates the old one kept.
	if after, before := printed["cost_log_bytes_per_message"], printed["cost_log_bytes_per_message_before"]; after >= before {
		t.Errorf("log bytes per message %v under host.json, %v before: want fewer", after, before)
	}
}

// TestOutageSmoke runs the outage runs alone (Only), briefly, against
// Azurite and bin/handler: each prints its figures, and the workload
// went through (every message due in the outage had a refused storage
// request behind it, or was never reached; the run ended drained). The
// figures mean nothing at this size.
func TestOutageSmoke(t *testing.T) {
	root := filepath.Dir(filepath.Dir(testenv.Handler(t, "../../../..")))
	opts := Defaults()
	opts.Root, opts.Only, opts.LogLevel = root, []string{"outage"}, "warn"
	opts.Outages = OutageOptions{New: []time.Duration{2 * time.Minute}, Before: []time.Duration{2 * time.Minute},
		Rate: 2, InFlight: 6, UnpaidShare: 0.25, Lead: 30 * time.Second, Tail: 30 * time.Second,
		TimeScale: 60, Sessions: 8, PaymentTimeout: time.Minute,
		RecoveryScale: 30, SettleScale: 60, RecoveryWindow: 20 * time.Minute}
	var progress bytes.Buffer
	opts.Progress = &progress
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, opts)
	if err != nil {
		if strings.Contains(err.Error(), "not installed") && os.Getenv("ORDERSTATUS_REQUIRE_AZURITE") != "1" {
			t.Skipf("Azurite not installed: %v", err)
		}
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	if n := strings.Count(progress.String(), "\n"); n != 2 {
		t.Errorf("%d progress lines, want the two outage runs only:\n%s", n, progress.String())
	}
	var out bytes.Buffer
	r.Print(&out, opts)
	printed := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if name, val, ok := strings.Cut(line, ": "); ok {
			printed[name] = val
		}
	}
	for _, name := range []string{"outage_2m_dead_lettered", "outage_2m_dead_lettered_before", "outage_2m_store_calls_per_message",
		"outage_2m_store_calls_per_message_before", "outage_2m_recovery_s", "outage_2m_recovery_s_before", "outage_2m_status_recovery_s", "outage_2m_status_recovery_s_before",
		"outage_2m_paid_shown_cancelled", "outage_2m_paid_shown_cancelled_longest_s"} {
		val, ok := printed[name]
		if !ok {
			t.Errorf("%s not printed", name)
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err != nil || v < 0 || (!math.IsNaN(v) && strings.Contains(name, "recovery") && v == 0) {
			t.Errorf("%s: %q, want a figure of at least 0 (recovery: above 0, or NaN)", name, val)
		}
	}
	// The default policy turns an outage shorter than its retry window
	// into delays: nothing is dead-lettered, whatever the size.
	if v := printed["outage_2m_dead_lettered"]; v != "0" {
		t.Errorf("outage_2m_dead_lettered = %q, want 0 (the default policy reschedules)", v)
	}
	if v, _ := strconv.ParseFloat(printed["outage_2m_store_calls_per_message_before"], 64); !(v > 0) {
		t.Errorf("outage_2m_store_calls_per_message_before = %v, want storage requests refused during the outage", v)
	}
	for _, name := range Names(Options{}) {
		if _, ok := printed[name]; ok {
			t.Errorf("%s printed by an outage-only run", name)
		}
	}
	if !strings.Contains(out.String(), "note: outage 2m on today's policy") {
		t.Errorf("no note on the run:\n%s", out.String())
	}
	// The default policy's run was slowed from the table's return and
	// says so, and says what the handler rescheduled after it; today's
	// was not.
	for _, want := range []string{"until a second before the table's return, then 30x for", "after the table's return the handler rescheduled transient",
		"today's policy (ORDER_STATUS_RETRY_RESCHEDULE=false): ", "the host clock at 60x throughout",
		"target outage_2m_recovery_s <= 360", "target outage_2m_status_recovery_s <= 360"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("progress:\n%s\noutput:\n%s", progress.String(), out.String())
	}
}

// TestOutageWorkload: the outage workload is steady at its rate, every
// order's messages are in sequence order, the outage line is where it
// belongs, and the recovery check reads rows as it should.
func TestOutageWorkload(t *testing.T) {
	o := DefaultOutages()
	w := newOutageWorkload("t", o, 10*time.Minute)
	var outages, timeouts int
	last := map[string]int64{}
	for i, l := range w.lines {
		if i > 0 && l.SendAfter < w.lines[i-1].SendAfter {
			t.Fatalf("line %d sent before line %d", i, i-1)
		}
		switch {
		case l.Outage != "":
			outages++
			if l.SendAfter != o.Lead || l.Duration != 10*time.Minute {
				t.Errorf("outage line %+v, want at the lead for 10m", l)
			}
		case l.Subject == order.SubjectPaymentTimeout:
			timeouts++
		default:
			var u struct{ Sequence int64 }
			_ = json.Unmarshal(l.Body, &u)
			if u.Sequence != last[l.SessionID]+1 {
				t.Fatalf("%s: sequence %d after %d", l.MessageID, u.Sequence, last[l.SessionID])
			}
			last[l.SessionID] = u.Sequence
		}
	}
	if outages != 1 || timeouts != len(w.orders) || w.messages != len(w.lines)-1 {
		t.Errorf("%d outage lines, %d timeouts for %d orders, %d messages for %d lines", outages, timeouts, len(w.orders), w.messages, len(w.lines))
	}
	// About Rate messages a second fall due over the run's 13 minutes
	// (the timeouts of the last half hour's orders fall due after it).
	run := (o.Lead + 10*time.Minute + o.Tail).Seconds()
	if rate := float64(w.messages) / run; rate < 0.9*o.Rate || rate > 1.1*o.Rate {
		t.Errorf("%.1f messages a second, want about %v", rate, o.Rate)
	}
	if open := w.life.Seconds() * float64(len(w.orders)) / run; open < 0.9*float64(o.InFlight) || open > 1.1*float64(o.InFlight) {
		t.Errorf("%.0f orders open at once, want about %d", open, o.InFlight)
	}

	// The recovery check, on one paid and one unpaid order.
	small := outageWorkload{life: 3 * time.Minute, timeout: 30 * time.Minute,
		orders: []outageOrder{{id: "p", start: 0, paid: true}, {id: "u", start: 0}}}
	tests := []struct {
		name string
		rows map[string]rowState
		at   time.Duration
		want int
	}{
		{"nothing written", map[string]rowState{}, 2 * time.Minute, 2},
		{"caught up at 2m (Paid at 1m, Shipped at 2m not yet due)", map[string]rowState{"p": {"Paid", 2}, "u": {"Created", 1}}, 2 * time.Minute, 0},
		{"paid order behind", map[string]rowState{"p": {"Created", 1}, "u": {"Created", 1}}, 2*time.Minute + time.Second, 1},
		{"paid order behind its Shipped", map[string]rowState{"p": {"Paid", 2}, "u": {"Created", 1}}, 2*time.Minute + time.Second, 1},
		{"ahead is fine", map[string]rowState{"p": {"Delivered", 4}, "u": {"Created", 1}}, 30 * time.Second, 0},
		{"unpaid order not cancelled after its timeout", map[string]rowState{"p": {"Delivered", 4}, "u": {"Created", 1}}, 31 * time.Minute, 1},
		{"paid order cancelled", map[string]rowState{"p": {"Cancelled", 1}, "u": {"Cancelled", 1}}, 31 * time.Minute, 1},
		{"all done", map[string]rowState{"p": {"Delivered", 4}, "u": {"Cancelled", 1}}, 31 * time.Minute, 0},
	}
	for _, tt := range tests {
		if got := len(small.behind(tt.rows, tt.at)); got != tt.want {
			t.Errorf("%s: behind = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := small.tally(map[string]rowState{"p": {"Delivered", 4}, "u": {"Created", 1}}, wrongRow); fmt.Sprint(got) != "map[unpaid at Created/1:1]" {
		t.Errorf("wrong rows = %v, want the unpaid order not cancelled", got)
	}
	// A stopped run counts only what no later message can put right.
	if got := small.tally(map[string]rowState{"p": {"Delivered", 4}, "u": {"Created", 1}}, paidCancelled); len(got) != 0 {
		t.Errorf("paidCancelled with the unpaid order's check still to come = %v, want none", got)
	}
	if got := small.tally(map[string]rowState{"p": {"Cancelled", 1}, "u": {"Cancelled", 1}}, paidCancelled); fmt.Sprint(got) != "map[paid at Cancelled/1:1]" {
		t.Errorf("paidCancelled = %v, want the paid order at Cancelled/1", got)
	}
	// A row as Table Storage sends it: LastSequence an Edm.Int64 string.
	var x row
	if err := json.Unmarshal([]byte(`{"PartitionKey":"o","Status":"Paid","LastSequence":"3","LastSequence@odata.type":"Edm.Int64"}`), &x); err != nil || x.state() != (rowState{"Paid", 3}) {
		t.Errorf("row = %+v, %v; want Paid at 3", x, err)
	}
}

// TestPacer: an outage run's clock slows to RecoveryScale a second before
// the table's return, moves to SettleScale once the status changes caught
// up and back to TimeScale once every row is right, and the note says
// so; a _before run is never slowed.
func TestPacer(t *testing.T) {
	o := OutageOptions{TimeScale: 60, RecoveryScale: 3, SettleScale: 12, RecoveryWindow: 20 * time.Minute}
	clk := clock.Scaled(o.TimeScale)
	completed := 0
	p := newPacer(clk, o, false, func() int { return completed })
	end := clk.Now().Add(2 * time.Second) // 33 ms of wall time away at 60x
	outages := func() []devhost.OutageSummary { return []devhost.OutageSummary{{End: end}} }

	p.statusCaughtUp() // before the return: nothing moves
	p.recovered()
	if got := clk.Factor(); got != 60 {
		t.Fatalf("factor %v before the return, want 60", got)
	}
	p.slowAtReturn(t.Context(), outages)
	if got := clk.Factor(); got != 3 {
		t.Fatalf("factor %v after the return, want RecoveryScale 3", got)
	}
	if now := clk.Now(); now.Before(end.Add(-time.Second)) {
		t.Errorf("slowed at %v, want no sooner than a second before the end %v", now, end)
	}
	completed = 40
	p.statusCaughtUp()
	if got := clk.Factor(); got != 12 {
		t.Fatalf("factor %v once the status changes caught up, want SettleScale 12", got)
	}
	p.statusCaughtUp() // once only
	completed = 45
	p.recovered()
	p.recovered()
	if got := clk.Factor(); got != 60 {
		t.Fatalf("factor %v once recovered, want TimeScale 60", got)
	}
	note := p.describe()
	for _, want := range []string{"60x until a second before the table's return", "then 3x for", "40 messages completed", "then 12x for", "5 messages completed", "then 60x again"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}

	// The window over before the status changes caught up: straight
	// back to TimeScale.
	clk = clock.Scaled(o.TimeScale)
	p = newPacer(clk, o, false, func() int { return 0 })
	end = clk.Now().Add(2 * time.Second)
	p.slowAtReturn(t.Context(), outages)
	p.recovered()
	if got := clk.Factor(); got != 60 || strings.Contains(p.describe(), "12x") {
		t.Errorf("factor %v, note %q after the window; want 60 and no settle stretch", got, p.describe())
	}

	before := clock.Scaled(o.TimeScale)
	p = newPacer(before, o, true, func() int { return 0 })
	p.slowAtReturn(t.Context(), outages)
	if got := before.Factor(); got != 60 || !strings.Contains(p.describe(), "at 60x throughout") {
		t.Errorf("a _before run: factor %v, note %q; want 60 throughout", got, p.describe())
	}
}

// TestCheckSettled holds the steady phases' accounting: the status
// changes exactly as the workload says and, with rescheduling on, the
// handler's own payment-timeout checks, one per order at least, no more
// than it scheduled, all Stale.
func TestCheckSettled(t *testing.T) {
	w := NewWorkload("t", 10, 0.20, 0.05, 1) // 40 applied, 8 duplicates, 2 stale
	status := func(applied, dup, stale int) string {
		return fmt.Sprintf(`orderstatus_messages_total{result="Applied",subject="OrderStatusChanged"} %d
orderstatus_messages_total{result="Duplicate",subject="OrderStatusChanged"} %d
orderstatus_messages_total{result="Stale",subject="OrderStatusChanged"} %d
`, applied, dup, stale)
	}
	checks := func(stale, applied, scheduled int) string {
		return fmt.Sprintf(`orderstatus_messages_total{result="Stale",subject="PaymentTimeoutCheck"} %d
orderstatus_messages_total{result="Applied",subject="PaymentTimeoutCheck"} %d
orderstatus_timeout_checks_total{outcome="scheduled"} %d
`, stale, applied, scheduled)
	}
	tests := []struct {
		name       string
		exposition string
		checks     bool
		wantErr    string
	}{
		{"today's policy", status(40, 8, 2), false, ""},
		{"today's policy, a status change short", status(39, 8, 2), false, "as Applied"},
		{"today's policy, yet a check", status(40, 8, 2) + checks(1, 0, 1), false, "rescheduling off"},
		{"one check per order", status(40, 8, 2) + checks(10, 0, 10), true, ""},
		{"a Created redelivered: two checks of one order", status(40, 8, 2) + checks(11, 0, 11), true, ""},
		{"a check missing", status(40, 8, 2) + checks(9, 0, 10), true, "one per order"},
		{"more checks than scheduled", status(40, 8, 2) + checks(11, 0, 10), true, "no more than it scheduled"},
		{"a paid order cancelled", status(40, 8, 2) + checks(9, 1, 10), true, "other than Stale"},
		{"something else settled", status(40, 8, 2) + checks(10, 0, 10) + `orderstatus_messages_total{result="Parked",subject="Nope"} 1` + "\n", true, "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMetrics(strings.NewReader(tt.exposition))
			if err != nil {
				t.Fatal(err)
			}
			err = checkSettled(m, w, tt.checks)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

// TestPacedByLength: the default runs' recovery clock is 2x (4x once the
// status changes caught up) for the 30-minute outage and faster, by how much thinner its wave is, for a
// shorter one; no reference, or an outage as long, leaves it alone; it
// never runs faster than TimeScale.
func TestPacedByLength(t *testing.T) {
	o := DefaultOutages()
	for _, tc := range []struct {
		name             string
		ref, d           time.Duration
		timeScale        float64 // 0: the default's
		recovery, settle float64
	}{
		{"the reference", 30 * time.Minute, 30 * time.Minute, 0, 1, 2},
		// 20 a second and 10 minutes of copies over a 5-minute cap: 60
		// a host second, against 140 after 30 minutes.
		{"a third as long", 30 * time.Minute, 10 * time.Minute, 0, 140.0 / 60, 2 * 140.0 / 60},
		{"no reference", 0, 10 * time.Minute, 0, 1, 2},
		// At most 1 x 140 / 20 = 7 times (14 for the checks), for an
		// outage of nothing.
		{"so short the clock would outrun TimeScale", 30 * time.Minute, time.Second, 5, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := o
			o.RecoveryReference = tc.ref
			if tc.timeScale > 0 {
				o.TimeScale = tc.timeScale
			}
			got := o.paced(tc.d)
			if math.Abs(got.RecoveryScale-tc.recovery) > 1e-9 || math.Abs(got.SettleScale-tc.settle) > 1e-9 {
				t.Errorf("paced(%v) = recovery %v, settle %v; want %v, %v", tc.d, got.RecoveryScale, got.SettleScale, tc.recovery, tc.settle)
			}
			if got.TimeScale != o.TimeScale || got.RecoveryWindow != o.RecoveryWindow {
				t.Errorf("paced(%v) changed more than the recovery clock: %+v", tc.d, got)
			}
		})
	}
}

// TestSlotGroups: the session-slot settings are measured together while
// their ceilings (sessions over idle) add up to at most slotsTogether,
// in table order, and one above it alone.
func TestSlotGroups(t *testing.T) {
	o := Defaults()
	var got []string
	for _, g := range slotGroups(o.SlotSessions, o.SlotIdle) {
		got = append(got, g.String())
	}
	// 5 s: 3.2 + 12.8 + 51.2; 1 s: 16 (83.2 so far), then 64, 256,
	// and at 200 ms 80, 320 and 1,280, each alone.
	want := []string{"16, idle 5s; 64, idle 5s; 256, idle 5s; 16, idle 1s (at once)",
		"64, idle 1s", "256, idle 1s", "16, idle 200ms", "64, idle 200ms", "256, idle 200ms"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("slotGroups of the defaults:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if g := slotGroups([]int{2}, []time.Duration{50 * time.Millisecond}); len(g) != 1 || len(g[0]) != 1 {
		t.Errorf("slotGroups of one setting = %v, want it alone", g)
	}
}

// checkProfiles: -profile-dir holds the dev host's CPU profile and one of
// each handler of the first local runs (ours on both policies, the
// minimal handler), each a gzip-compressed profile.
func checkProfiles(t *testing.T, dir string) {
	t.Helper()
	for _, glob := range []string{"devhost.pprof", "handler.*.pprof", "handler-before.*.pprof", "floorhandler.*.pprof"} {
		files, err := filepath.Glob(filepath.Join(dir, glob))
		if err != nil || len(files) == 0 {
			t.Errorf("no profile %s in the profile directory (%v)", glob, err)
			continue
		}
		ok := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			ok = ok || err == nil && len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b
		}
		if !ok {
			t.Errorf("%s: no gzip-compressed profile among %v", glob, files)
		}
	}
}

// TestCrossoverRatio: each order's median, and their geometric mean, in
// which a factor that scales every round of one order and the inverse
// of it in the other cancels.
func TestCrossoverRatio(t *testing.T) {
	for _, tc := range []struct {
		name               string
		rs                 []float64
		est, first, second float64
	}{
		{"none", nil, 0, 0, 0},
		{"one round", []float64{0.9}, 0.9, 0.9, 0},
		{"two rounds", []float64{0.9, 1.1}, math.Sqrt(0.99), 0.9, 1.1},
		// A true 0.96 and a position effect of 4%: ours first reads
		// 0.96*1.04, second 0.96/1.04; the plain median of the three
		// would be 0.998.
		{"position effect cancels", []float64{0.96 * 1.04, 0.96 / 1.04, 0.96 * 1.04}, 0.96, 0.96 * 1.04, 0.96 / 1.04},
		{"medians per order", []float64{1.0, 0.8, 0.5, 0.9, 1.2, 0.7}, math.Sqrt(1.0 * 0.8), 1.0, 0.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			est, first, second := crossoverRatio(tc.rs)
			if math.Abs(est-tc.est) > 1e-12 || math.Abs(first-tc.first) > 1e-12 || math.Abs(second-tc.second) > 1e-12 {
				t.Errorf("crossoverRatio(%v) = %v, %v, %v; want %v, %v, %v", tc.rs, est, first, second, tc.est, tc.first, tc.second)
			}
		})
	}
}
