package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

// Names returns the printed names of a run with opts, in print order; they
// are an interface.
func Names(opts Options) []string {
	lat := fmt.Sprintf("latency%dms_", opts.Latency.Milliseconds())
	names := []string{
		"limit_msgs_per_s", "naive_msgs_per_s", "ours_msgs_per_s", "ours_msgs_per_s_before",
		"ours_vs_naive", "ours_vs_limit", "limit_through_host_msgs_per_s", "ours_vs_limit_through_host",
		lat + "limit_msgs_per_s", lat + "naive_msgs_per_s", lat + "ours_msgs_per_s", lat + "ours_msgs_per_s_before",
		lat + "ours_vs_naive", lat + "ours_vs_limit", lat + "limit_through_host_msgs_per_s", lat + "ours_vs_limit_through_host",
		"ours_p50_ms", "ours_p99_ms",
		"round_trips_per_applied", "round_trips_per_applied_before", "round_trips_per_duplicate", "round_trips_per_stale",
		"cpu_ms_per_msg_handler", "cpu_ms_per_msg_devhost", "cpu_ms_per_msg_azurite",
		"cpu_ms_per_msg_handler_before", "cpu_ms_per_msg_devhost_before", "cpu_ms_per_msg_azurite_before",
		"cpu_ms_per_msg_floorhandler", "cpu_ms_per_msg_devhost_floor", "cpu_ms_per_msg_azurite_floor",
		"cold_start_ms_p50", "cold_start_ms_p90",
		"rss_idle_mb", "rss_after_load_mb", "rss_after_100k_orders_mb",
	}
	for _, n := range opts.Sessions {
		names = append(names, fmt.Sprintf("sessions_%d_msgs_per_s", n))
	}
	if opts.Instances >= 2 {
		p := instancesPrefix(opts.Instances)
		names = append(names, p+"msgs_per_s", p+"round_trips_per_applied", p+"conflicts_per_1000")
	}
	for _, idle := range opts.SlotIdle {
		for _, n := range opts.SlotSessions {
			names = append(names, fmt.Sprintf("slots_%d_idle_%d_msgs_per_s", n, idle.Milliseconds()))
		}
	}
	names = append(names, CostNames...)
	names = append(names, outageNames(opts.Outages)...)
	// Also printed: the direct loops' own round trips per message.
	return append(names, "limit_round_trips_per_msg", "naive_round_trips_per_msg",
		lat+"limit_round_trips_per_msg", lat+"naive_round_trips_per_msg")
}

// CostNames are the cost phases' figures (cost.go), in print order.
var CostNames = []string{
	"cost_usd_per_million_messages", "cost_usd_per_million_messages_before",
	"cost_usd_per_million_messages_functions", "cost_usd_per_million_messages_servicebus",
	"cost_usd_per_million_messages_storage", "cost_usd_per_million_messages_logs",
	"cost_usd_idle_month", "cost_usd_idle_month_before",
	"cost_usd_idle_month_functions", "cost_usd_idle_month_servicebus", "cost_usd_idle_month_storage", "cost_usd_idle_month_logs",
	"cost_executions_per_message", "cost_exec_ms_per_execution", "cost_servicebus_ops_per_message",
	"cost_table_transactions_per_message", "cost_handler_log_bytes_per_message",
	"cost_log_bytes_per_message", "cost_log_bytes_per_message_before",
	"cost_handler_own_ms_per_execution", "cost_handler_own_gb_s_per_message",
	"cost_sweep_seconds", "cost_sweep_servicebus_ops", "cost_sweep_table_transactions",
	"cost_instance_memory_mb", "cost_sweeps_per_month",
	"timeout_check_servicebus_ops_per_order", "timeout_check_executions_per_order",
}

// format prints v with the precision its kind of figure deserves.
func format(name string, v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "NaN"
	case strings.HasSuffix(name, "_msgs_per_s"), strings.HasSuffix(name, "_msgs_per_s_before"),
		strings.HasSuffix(name, "_recovery_s"), strings.HasSuffix(name, "_recovery_s_before"):
		return fmt.Sprintf("%.1f", v)
	case strings.Contains(name, "gb_s"):
		return fmt.Sprintf("%.6f", v)
	case strings.HasSuffix(name, "_dead_lettered"), strings.HasSuffix(name, "_dead_lettered_before"):
		return fmt.Sprintf("%.0f", v)
	case strings.Contains(name, "round_trips"), strings.HasPrefix(name, "cpu_ms"), strings.HasPrefix(name, "cost_usd_idle"),
		strings.HasSuffix(name, "_per_message"):
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// Print writes the session-slot table, the `name: value` lines and the targets.
func (r Report) Print(w io.Writer, opts Options) {
	if r.Workload != "" {
		fmt.Fprintf(w, "\nworkload: %s\n", r.Workload)
	}
	if len(r.Slots) > 0 {
		fmt.Fprintf(w, "\nsession slots (one available message per session, %d sessions per slot, real clock):\n", opts.SlotRounds)
		fmt.Fprintf(w, "| maxConcurrentSessions | sessionIdleTimeout | messages/s | slot time idle | p99 delay |\n|---:|---:|---:|---:|---:|\n")
		for _, s := range r.Slots {
			fmt.Fprintf(w, "| %d | %v | %.1f | %.0f%% | %.2f s |\n", s.Sessions, s.Idle, s.MsgsPerS, 100*s.IdleShare, s.P99Delay.Seconds())
		}
	}
	if r.Instances != nil {
		r.Instances.print(w)
	}
	if r.Cost != nil {
		r.Cost.print(w)
	}
	fmt.Fprintln(w)
	for _, n := range Names(opts) {
		if v, ok := r.Values[n]; ok {
			fmt.Fprintf(w, "%s: %s\n", n, format(n, v))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintln(w)
	for _, t := range r.Targets(opts) {
		fmt.Fprintln(w, t)
	}
}

// Targets checks the figures against the targets; reported, never enforced.
func (r Report) Targets(opts Options) []string {
	lat := fmt.Sprintf("latency%dms_", opts.Latency.Milliseconds())
	type target struct {
		name   string
		atMost bool
		bound  float64
	}
	var out []string
	for _, t := range []target{
		{"round_trips_per_applied", true, 1.05}, {"round_trips_per_duplicate", true, 0.1}, {"round_trips_per_stale", true, 0.1},
		{"ours_vs_naive", false, 1.3}, {"ours_vs_limit", false, 0.8},
		{lat + "ours_vs_naive", false, 1.8}, {lat + "ours_vs_limit", false, 0.9},
		{"ours_vs_limit_through_host", false, 0.95}, {lat + "ours_vs_limit_through_host", false, 0.95},
		{"cold_start_ms_p50", true, 20}, {"rss_idle_mb", true, 25}, {"rss_after_100k_orders_mb", true, 80},
	} {
		v, ok := r.Values[t.name]
		if !ok {
			continue
		}
		op, met := ">=", v >= t.bound
		if t.atMost {
			op, met = "<=", v <= t.bound
		}
		got := format(t.name, v)
		if sp, ok := r.Spreads[t.name]; ok && strings.HasSuffix(t.name, "_through_host") {
			got += fmt.Sprintf(", pairs %s to %s", format(t.name, sp[0]), format(t.name, sp[1]))
		}
		out = append(out, fmt.Sprintf("target %s %s %g: %s (%s)", t.name, op, t.bound, metWord(met), got))
	}
	out = append(out, r.defaultPolicyTargets(lat)...)
	if len(opts.Sessions) > 1 {
		if _, ran := r.Values[fmt.Sprintf("sessions_%d_msgs_per_s", opts.Sessions[0])]; ran {
			out = append(out, r.sessionsTarget(opts))
		}
	}
	if r.Instances != nil {
		out = append(out, r.instancesTarget(opts))
	}
	if r.Cost != nil {
		out = append(out, r.Cost.targets()...)
	}
	return append(out, r.outageTargets(opts)...)
}

// defaultPolicyTargets: with no outage, the default retry policy keeps
// ours_msgs_per_s within the run's noise of today's policy, and
// round_trips_per_applied within 0.01.
func (r Report) defaultPolicyTargets(lat string) []string {
	var out []string
	for _, name := range []string{"ours_msgs_per_s", lat + "ours_msgs_per_s"} {
		v, ok := r.Values[name]
		before, okBefore := r.Values[name+"_before"]
		if !ok || !okBefore {
			continue
		}
		sp, spb := r.Spreads[name], r.Spreads[name+"_before"]
		noise := max(sp[1]-sp[0], spb[1]-spb[0])
		out = append(out, fmt.Sprintf("target %s on the default policy = today's within the run's noise: %s (%.1f, runs %.1f to %.1f, against %.1f, runs %.1f to %.1f: %+.1f, noise %.1f)",
			name, metWord(math.Abs(v-before) <= noise), v, sp[0], sp[1], before, spb[0], spb[1], v-before, noise))
	}
	if v, ok := r.Values["round_trips_per_applied"]; ok {
		if before, ok := r.Values["round_trips_per_applied_before"]; ok {
			out = append(out, fmt.Sprintf("target round_trips_per_applied on the default policy = today's within 0.01: %s (%.3f against %.3f)",
				metWord(math.Abs(v-before) <= 0.01), v, before))
		}
	}
	return out
}

// outageTargets: on the default policy no message dead-lettered by an
// outage, at most a tenth of today's storage calls per message during one,
// and recovery within reschedule.DefaultCap plus 60 s (docs/outages.md).
func (r Report) outageTargets(opts Options) []string {
	var out []string
	bound := (reschedule.DefaultCap + time.Minute).Seconds()
	for _, d := range opts.Outages.New {
		p := outageName(d)
		if v, ok := r.Values[p+"dead_lettered"]; ok {
			out = append(out, fmt.Sprintf("target %sdead_lettered = 0: %s (%s)", p, metWord(v == 0), format(p+"dead_lettered", v)))
		}
		for _, name := range []string{p + "recovery_s", p + "status_recovery_s"} {
			if v, ok := r.Values[name]; ok {
				out = append(out, fmt.Sprintf("target %s <= %g (the backoff cap, %s, plus 60 s): %s (%s)",
					name, bound, devhostDuration(reschedule.DefaultCap), metWord(v <= bound), format(name, v)))
			}
		}
		v, ok := r.Values[p+"store_calls_per_message"]
		before, okBefore := r.Values[p+"store_calls_per_message_before"]
		if ok && okBefore {
			out = append(out, fmt.Sprintf("target %sstore_calls_per_message <= a tenth of today's: %s (%.2f against %.2f)",
				p, metWord(v <= before/10), v, before))
		}
	}
	return out
}

// instancesTarget: stale caches cost at most 0.1 round trips per applied
// message over the one-instance run.
func (r Report) instancesTarget(opts Options) string {
	name := instancesPrefix(opts.Instances) + "round_trips_per_applied"
	v, base := r.Values[name], r.Instances.Baseline
	extra := v - base
	return fmt.Sprintf("target %s - the 1-instance figure <= 0.1: %s (%.3f extra: %.3f against %.3f, all messages' round trips per applied message)",
		name, metWord(extra <= 0.1), extra, v, base)
}

// sessionsTarget: throughput grows with sessions until the storage floor
// and never falls by more than 10% past it.
func (r Report) sessionsTarget(opts Options) string {
	best, bestN, ok := 0.0, 0, true
	var desc []string
	for _, n := range opts.Sessions {
		v := r.Values[fmt.Sprintf("sessions_%d_msgs_per_s", n)]
		desc = append(desc, fmt.Sprintf("%d: %.0f", n, v))
		if v < 0.9*best {
			ok = false
		}
		if v > best {
			best, bestN = v, n
		}
	}
	return fmt.Sprintf("target throughput grows with sessions, never falls >10%% past its peak: %s (%s; peak at %d, limit %.0f)",
		metWord(ok), strings.Join(desc, ", "), bestN, r.Values["limit_msgs_per_s"])
}

func metWord(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// Elapsed formats a run's duration for the progress lines.
func Elapsed(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
