package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/cost"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// CostRun is what the cost phase measured and what it comes to.
type CostRun struct {
	PerMessage cost.PerMessage
	Sweep      cost.Sweep
	Params     cost.Params
	// Before are the old defaults (2,048 MB, logging at Information), same measurements.
	Before     cost.Params
	PerMillion cost.Breakdown
	Idle       cost.Breakdown
	BeforeMil  cost.Breakdown
	BeforeIdle cost.Breakdown
	Prices     cost.Prices
	// OwnSeconds is the handler's time per execution outside its storage calls.
	OwnSeconds float64
}

// byteCounter counts the bytes and lines written to it.
type byteCounter struct{ n, lines atomic.Int64 }

func (c *byteCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	c.lines.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}

// beforeHost is the old host.json logging: every category at Information.
var beforeHost = cost.HostLogging{Levels: map[string]string{"default": "Information", "Host.Results": "Information", "Function": "Information"},
	DependencyTracking: true}

// proxyRequests is every request the fault proxy has passed or faulted.
func proxyRequests(p *faultproxy.Proxy) int64 {
	var n int64
	for _, m := range []faultproxy.Mode{faultproxy.Pass, faultproxy.ServerBusy, faultproxy.Drop, faultproxy.LoseAnswer} {
		n += p.Count(m)
	}
	return n
}

// costPhase runs the workload once through the dev host, its store behind
// the fault proxy, counting what Azure bills for, then one idle sweep, and
// prices both with infra/prices.json and the Bicep's parameters.
func (b *runner) costPhase(ctx context.Context) error {
	prices, err := cost.Load(filepath.Join(b.opts.Root, "infra", "prices.json"))
	if err != nil {
		return err
	}
	hours := prices.Facts[cost.FactHoursPerMonth].Value
	par, err := cost.ReadParams(b.opts.Root, hours)
	if err != nil {
		return err
	}
	b.proxy.SetDelay(0)
	defer b.proxy.SetDelay(b.opts.Latency)
	out := &byteCounter{}
	c := oursConfig{store: azurite.ConnectionString(b.proxy.Addr), table: b.table("cost"), sessions: b.opts.InFlight,
		timeScale: b.opts.TimeScale, stdout: out}
	h, err := b.startHost(ctx, c)
	if err != nil {
		return err
	}
	defer h.Close()
	m0, err := scrapeHandler(ctx, h)
	if err != nil {
		return err
	}
	ops0, tx0, bytes0, lines0 := h.Broker().Operations(), proxyRequests(b.proxy), out.n.Load(), out.lines.Load()
	if err := h.Play(ctx, b.w.Lines()); err != nil {
		return err
	}
	if err := h.WaitIdle(ctx); err != nil {
		return err
	}
	m, err := scrapeHandler(ctx, h)
	if err != nil {
		return err
	}
	if err := checkSettled(m, b.w, false); err != nil {
		return err
	}
	invocations := invocations(h)
	msgs := float64(b.w.Messages())
	calls := m.Sum("orderstatus_handler_duration_seconds_count", nil)
	if calls == 0 || invocations == 0 {
		return fmt.Errorf("bench: cost: the handler counted %v calls, the host %d invocations", calls, invocations)
	}
	// The handler's own time: its duration minus its storage calls'.
	storeSecs := m.Sum("orderstatus_store_request_duration_seconds_sum", nil) - m0.Sum("orderstatus_store_request_duration_seconds_sum", nil)
	r := CostRun{Prices: prices, Params: par}
	r.OwnSeconds = math.Max(0, m.Sum("orderstatus_handler_duration_seconds_sum", nil)-storeSecs) / calls
	r.PerMessage = cost.PerMessage{
		Executions:        float64(invocations) / msgs,
		ExecSeconds:       m.Sum("orderstatus_handler_duration_seconds_sum", nil) / calls,
		ServiceBusOps:     float64(h.Broker().Operations()-ops0) / msgs,
		TableTransactions: float64(proxyRequests(b.proxy)-tx0) / msgs,
		LogBytes:          float64(out.n.Load()-bytes0) / msgs,
		LogLines:          float64(out.lines.Load()-lines0) / msgs,
	}

	// One idle sweep: every source empty.
	ops1, tx1, bytes1, lines1 := h.Broker().Operations(), proxyRequests(b.proxy), out.n.Load(), out.lines.Load()
	start := time.Now()
	if err := h.FireTimers(ctx); err != nil {
		return fmt.Errorf("bench: cost: the idle sweep: %w", err)
	}
	r.Sweep = cost.Sweep{
		ExecSeconds:       time.Since(start).Seconds(),
		ServiceBusOps:     float64(h.Broker().Operations() - ops1),
		TableTransactions: float64(proxyRequests(b.proxy) - tx1),
		LogBytes:          float64(out.n.Load() - bytes1),
		LogLines:          float64(out.lines.Load() - lines1),
	}
	r.Before = cost.Params{InstanceMemoryMB: 2048, SweepsPerMonth: par.SweepsPerMonth, AlwaysReadyInstances: 0, Host: beforeHost}
	r.PerMillion, r.Idle = prices.PerMillion(r.PerMessage, par), prices.IdleMonth(par, r.Sweep)
	r.BeforeMil, r.BeforeIdle = prices.PerMillion(r.PerMessage, r.Before), prices.IdleMonth(r.Before, r.Sweep)
	b.costRun = &r
	res := b.results
	res["cost_usd_per_million_messages"] = r.PerMillion.Total()
	res["cost_usd_per_million_messages_functions"] = r.PerMillion.Functions
	res["cost_usd_per_million_messages_servicebus"] = r.PerMillion.ServiceBus
	res["cost_usd_per_million_messages_storage"] = r.PerMillion.Storage
	res["cost_usd_per_million_messages_logs"] = r.PerMillion.Logs
	res["cost_usd_per_million_messages_before"] = r.BeforeMil.Total()
	res["cost_usd_idle_month"] = r.Idle.Total()
	res["cost_usd_idle_month_functions"] = r.Idle.Functions
	res["cost_usd_idle_month_servicebus"] = r.Idle.ServiceBus
	res["cost_usd_idle_month_storage"] = r.Idle.Storage
	res["cost_usd_idle_month_logs"] = r.Idle.Logs
	res["cost_usd_idle_month_before"] = r.BeforeIdle.Total()
	res["cost_executions_per_message"] = r.PerMessage.Executions
	res["cost_exec_ms_per_execution"] = r.PerMessage.ExecSeconds * 1000
	res["cost_servicebus_ops_per_message"] = r.PerMessage.ServiceBusOps
	res["cost_table_transactions_per_message"] = r.PerMessage.TableTransactions
	res["cost_handler_log_bytes_per_message"] = r.PerMessage.LogBytes
	res["cost_log_bytes_per_message"] = prices.LogBytesPerMessage(r.PerMessage, par)
	res["cost_log_bytes_per_message_before"] = prices.LogBytesPerMessage(r.PerMessage, r.Before)
	res["cost_handler_own_ms_per_execution"] = r.OwnSeconds * 1000
	res["cost_handler_own_gb_s_per_message"] = r.OwnGBs()
	res["cost_sweep_seconds"] = r.Sweep.ExecSeconds
	res["cost_sweep_servicebus_ops"] = r.Sweep.ServiceBusOps
	res["cost_sweep_table_transactions"] = r.Sweep.TableTransactions
	res["cost_instance_memory_mb"] = float64(par.InstanceMemoryMB)
	res["cost_sweeps_per_month"] = par.SweepsPerMonth
	return nil
}

// OwnGBs is the GB-s per message the handler itself adds outside its
// storage calls: nothing at low traffic (the 1,000 ms minimum), its cost
// under load, when executions share a billed period.
func (r *CostRun) OwnGBs() float64 {
	return r.PerMessage.Executions * r.OwnSeconds * float64(r.Params.InstanceMemoryMB) / 1024
}

// print writes the cost table per million messages and per idle month.
func (r *CostRun) print(w io.Writer) {
	u, s := r.PerMessage, r.Sweep
	fmt.Fprintf(w, "\ncost (USD, %s list prices of %s from infra/prices.json, no free grants; %d MB instances, %.0f sweeps a month):\n",
		r.Prices.Region, r.Prices.Date, r.Params.InstanceMemoryMB, r.Params.SweepsPerMonth)
	fmt.Fprintf(w, "| service | per million messages | per idle month | from |\n|---|---:|---:|---|\n")
	fmt.Fprintf(w, "| Functions (Flex, on demand) | %.2f | %.3f | %.2f executions/message of %.1f ms (%.2f ms of it outside the storage call: %.6f GB-s/message under load), each billed %.1f s x %d MB; %.2f s per sweep |\n",
		r.PerMillion.Functions, r.Idle.Functions, u.Executions, 1000*u.ExecSeconds, 1000*r.OwnSeconds, r.OwnGBs(), r.Prices.Billable(u.ExecSeconds), r.Params.InstanceMemoryMB, s.ExecSeconds)
	fmt.Fprintf(w, "| Service Bus (Standard) | %.2f | %.3f | %.2f operations/message past the included 13M; base charge; %.0f operations per sweep |\n",
		r.PerMillion.ServiceBus, r.Idle.ServiceBus, u.ServiceBusOps, s.ServiceBusOps)
	fmt.Fprintf(w, "| Table Storage | %.2f | %.3f | %.2f transactions/message; %.0f per sweep; data at rest |\n",
		r.PerMillion.Storage, r.Idle.Storage, u.TableTransactions, s.TableTransactions)
	fmt.Fprintf(w, "| Log Analytics | %.2f | %.3f | %.0f bytes/message: %.0f of handler lines (measured) + the host's records host.json keeps (sizes assumed, prices.json); %.0f before |\n",
		r.PerMillion.Logs, r.Idle.Logs, r.Prices.LogBytesPerMessage(u, r.Params), u.LogBytes, r.Prices.LogBytesPerMessage(u, r.Before))
	fmt.Fprintf(w, "| total | %.2f | %.2f | before the cuts (2,048 MB, host.json logging at Information): %.2f and %.2f |\n",
		r.PerMillion.Total(), r.Idle.Total(), r.BeforeMil.Total(), r.BeforeIdle.Total())
}

// targets are the cost targets: an idle month at most the Service Bus base
// charge plus 1 USD, a million messages at most half the old defaults'.
func (r *CostRun) targets() []string {
	base := r.Prices.Facts[cost.FactHoursPerMonth].Value * r.Prices.Prices[cost.PriceSBBasePerHour].USD
	idle, mil, before := r.Idle.Total(), r.PerMillion.Total(), r.BeforeMil.Total()
	return []string{
		fmt.Sprintf("target cost_usd_idle_month <= %.2f (the Service Bus base charge + 1): %s (%.2f)", base+1, metWord(idle <= base+1), idle),
		fmt.Sprintf("target cost_usd_per_million_messages <= half of the old defaults' %.2f: %s (%.2f)", before, metWord(mil <= before/2), mil),
	}
}

// invocations counts the handler calls of every instance of h.
func invocations(h *devhost.Host) int {
	n := 0
	for _, in := range h.Instances() {
		n += in.Invocations
	}
	return n
}

// timeoutChecks measures what the handler's own payment-timeout check
// costs: the same Created-then-Paid orders with rescheduling off and on,
// drained; the differences per order in Service Bus operations and
// executions are what the guarantee adds.
func (b *runner) timeoutChecks(ctx context.Context) error {
	orders := max(20, len(b.w.Orders)/5)
	var lines []devhost.ScenarioLine
	for i := range orders {
		id := fmt.Sprintf("tc%s-%d", b.runID, i)
		lines = append(lines, statusChange(id, order.Created, 1, 0), statusChange(id, order.Paid, 2, 0))
	}
	var ops [2]int64
	var execs [2]int
	for i, reschedule := range []bool{false, true} {
		c := oursConfig{store: b.az.ConnectionString(), table: b.table("tc"), sessions: b.opts.InFlight, timeScale: b.opts.TimeScale, reschedule: reschedule}
		h, err := b.startHost(ctx, c)
		if err != nil {
			return err
		}
		ops0 := h.Broker().Operations()
		err = h.Play(ctx, lines)
		if err == nil {
			err = drainScheduled(ctx, h)
		}
		ops[i], execs[i] = h.Broker().Operations()-ops0, invocations(h)
		h.Close()
		if err != nil {
			return fmt.Errorf("bench: timeout checks: %w", err)
		}
	}
	b.results["timeout_check_servicebus_ops_per_order"] = float64(ops[1]-ops[0]) / float64(orders)
	b.results["timeout_check_executions_per_order"] = float64(execs[1]-execs[0]) / float64(orders)
	return nil
}
