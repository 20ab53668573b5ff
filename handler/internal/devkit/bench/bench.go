// Package bench is `make bench`: it measures, on one machine and one
// Azurite, how close the real system (bin/handler behind the development
// host) comes to what the storage allows, what its one-round-trip design
// buys over a read-then-write handler (locally and with storage latency
// added by the fault proxy), the session slots' regime, cold start, memory
// and CPU per message. It prints one `name: value` line per figure (the
// names are an interface: scripts and the README read them).
//
// The designs compared are limit (one conditional write per message,
// straight on the table), naive (read, decide, write), ours (bin/handler
// through the dev host) and limit through the host (floor.go); ours also
// runs on several instances (instances.go). Linux only; Azurite installed.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// Options size a run. Defaults gives `make bench`'s.
type Options struct {
	// Root is the repository: host.json, functions/, bin/handler.
	Root string
	// Orders is the workload's size, plus DuplicateShare and StaleShare copies.
	Orders                     int
	DuplicateShare, StaleShare float64
	// InFlight is how many orders every design handles at once.
	InFlight int
	// Repeats is how many times each side-by-side run is made (the median reported).
	Repeats int
	// Latency is added to every storage request in the latency phases.
	Latency time.Duration
	// TimeScale is the broker clock's speed in the throughput phases.
	TimeScale float64
	// Sessions are the maxConcurrentSessions of the sessions_<n> runs.
	Sessions []int
	// Instances is the instances_<n> run's start count; below 2: no such run.
	Instances int
	// SlotSessions, SlotIdle and SlotRounds span the session-slot table.
	SlotSessions []int
	SlotIdle     []time.Duration
	SlotRounds   int
	// ColdStarts is how many times bin/handler is started for cold start.
	ColdStarts int
	// RSSOrders distinct orders are sent before rss_after_100k_orders_mb.
	RSSOrders int
	// LogLevel is the handler's LOG_LEVEL (production's default: info).
	LogLevel string
	// ProfileDir, if set, receives CPU profiles of the first local runs
	// (devhost, handler, handler-before, floorhandler; see go tool pprof).
	ProfileDir string
	// Outages size the outage runs (outage.go); no lengths: none.
	Outages OutageOptions
	// Only, if not empty, runs only these groups of phases (see Groups).
	Only []string
	// Progress receives one line per phase; nil discards.
	Progress io.Writer
}

// Defaults returns the options of `make bench`.
func Defaults() Options {
	return Options{
		Root: ".", Orders: 1000, DuplicateShare: 0.20, StaleShare: 0.05, InFlight: 16, Repeats: 3,
		Latency: 8 * time.Millisecond, TimeScale: devhostMaxScale,
		Sessions:     []int{1, 4, 16, 64},
		Instances:    4,
		SlotSessions: []int{16, 64, 256}, SlotIdle: []time.Duration{5 * time.Second, time.Second, 200 * time.Millisecond}, SlotRounds: 3,
		ColdStarts: 20, RSSOrders: 100000, LogLevel: "info",
		Outages: DefaultOutages(),
	}
}

// Groups are the groups of phases Options.Only (-only) selects from, in run order.
var Groups = []string{"cold", "throughput", "sessions", "instances", "slots", "cost", "memory", "outage"}

// devhostMaxScale is the fastest broker clock the dev host allows.
const devhostMaxScale = 10000

// runner is one run of Run.
type runner struct {
	opts     Options
	handler  string // the dev kit's, which the dev host runs
	deployed string // bin/handler, whose cold start is measured
	az       *azurite.Server
	// tablesSvc reaches Azurite directly, not through the proxy.
	tablesSvc *aztables.ServiceClient
	proxy     *faultproxy.Proxy
	runID     string
	tables    int
	// made are the tables made since the last phase ended (dropTables).
	made    []string
	results map[string]float64
	samples map[string][]float64 // throughputs of the repeated runs
	local   []oursRun            // the local runs of ours
	// localBefore are the local runs of ours on today's policy.
	localBefore []oursRun
	slots       []SlotRow
	notes       []string
	// instancesRun is the instances run's detail; nil before it ran.
	instancesRun *InstancesRun
	// baseline: local round trips per applied message (InstancesRun.Baseline).
	baseline float64
	// costRun is the cost phase's detail; nil before it ran.
	costRun *CostRun
	w       Workload
	// floorBin is the built floorhandler (floor.go).
	floorBin   string
	floorLocal []oursRun
	cleanup    []func()
}

// Report is what a run measured.
type Report struct {
	// Values holds every figure by its printed name.
	Values map[string]float64
	// Spreads holds the lowest and highest sample of the repeated figures.
	Spreads map[string][2]float64
	// Slots is the session-slot table.
	Slots []SlotRow
	// Workload describes the workload in words.
	Workload string
	// Notes are remarks worth printing with the figures.
	Notes []string
	// Instances is the instances run's detail; nil without one.
	Instances *InstancesRun
	// Cost is the cost phase's detail.
	Cost *CostRun
}

// phase is one step of the run.
type phase struct {
	name string
	run  func(ctx context.Context) error
	// group is one of Groups ("" in Run's table: the group of the rows above).
	group string
}

// Run runs every phase, on its own Azurite and fault proxy, and returns the figures.
func Run(ctx context.Context, opts Options) (Report, error) {
	b := &runner{opts: opts, results: map[string]float64{}, samples: map[string][]float64{}, baseline: math.NaN()}
	defer func() {
		for _, f := range b.cleanup {
			f()
		}
	}()
	if b.opts.Progress == nil {
		b.opts.Progress = io.Discard
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return Report{}, err
	}
	b.opts.Root = root
	b.handler = filepath.Join(root, "bin", "orderstatus-dev")
	b.deployed = filepath.Join(root, "bin", "handler")
	for _, bin := range []string{b.handler, b.deployed} {
		if _, err := os.Stat(bin); err != nil {
			return Report{}, fmt.Errorf("bench: %s not built (make build): %w", bin, err)
		}
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	b.runID = fmt.Sprintf("%x", suffix)
	if opts.ProfileDir != "" {
		// Absolute: the handlers the dev host starts write there too.
		if b.opts.ProfileDir, err = filepath.Abs(opts.ProfileDir); err != nil {
			return Report{}, err
		}
		if err := os.MkdirAll(b.opts.ProfileDir, 0o755); err != nil {
			return Report{}, fmt.Errorf("bench: -profile-dir: %w", err)
		}
	}
	b.w = NewWorkload("w", opts.Orders, opts.DuplicateShare, opts.StaleShare, 1)

	bin, err := azurite.FindFrom(root)
	if err != nil {
		return Report{}, fmt.Errorf("bench: %w (make tools)", err)
	}
	if b.az, err = azurite.Start(ctx, azurite.Options{Binary: bin}); err != nil {
		return Report{}, err
	}
	defer b.az.Stop()
	if b.tablesSvc, err = aztables.NewServiceClientFromConnectionString(b.az.ConnectionString(), nil); err != nil {
		return Report{}, err
	}
	if b.proxy, err = faultproxy.Start("http://" + b.az.Addr); err != nil {
		return Report{}, err
	}
	defer b.proxy.Close()
	b.proxy.SetDelay(opts.Latency)
	local, slow := b.az.ConnectionString(), azurite.ConnectionString(b.proxy.Addr)
	lat := fmt.Sprintf("latency%dms_", opts.Latency.Milliseconds())

	phases := []phase{{"cold start", b.coldStart, "cold"}, {"warm-up (untimed)", func(ctx context.Context) error { return b.warmUp(ctx, local) }, "throughput"}}
	for _, env := range []struct{ cs, prefix, desc string }{{local, "", "local"}, {slow, lat, "+" + opts.Latency.String()}} {
		for i := range max(1, opts.Repeats) {
			rep := fmt.Sprintf("%s, run %d of %d", env.desc, i+1, max(1, opts.Repeats))
			// ours on today's policy and the limit through the host run back to back
			// in both orders (floorRatios, crossoverRatio).
			before := phase{"ours on today's policy, " + rep, func(ctx context.Context) error { return b.ours(ctx, env.cs, env.prefix, false) }, "throughput"}
			floor := phase{"limit through the host, " + rep, func(ctx context.Context) error { return b.limitThroughHost(ctx, env.cs, env.prefix) }, "throughput"}
			pair := []phase{before, floor, floor, before}
			designs := [][]phase{
				{{"limit, " + rep, func(ctx context.Context) error { return b.direct(ctx, env.cs, env.prefix+"limit_", limitOrder) }, "throughput"}},
				{{"naive, " + rep, func(ctx context.Context) error { return b.direct(ctx, env.cs, env.prefix+"naive_", naiveOrder) }, "throughput"}},
				{{"ours, " + rep, func(ctx context.Context) error { return b.ours(ctx, env.cs, env.prefix, true) }, "throughput"}},
				pair}
			// Each round starts one design later, so no design always follows the same one.
			k := i % len(designs)
			for _, d := range append(designs[k:], designs[:k]...) {
				phases = append(phases, d...)
			}
		}
	}
	for _, n := range opts.Sessions {
		phases = append(phases, phase{fmt.Sprintf("ours, %d sessions", n), func(ctx context.Context) error { return b.sessions(ctx, local, n) }, "sessions"})
	}
	if opts.Instances >= 2 {
		phases = append(phases, phase{fmt.Sprintf("ours, %d instances, sessions moving", opts.Instances), func(ctx context.Context) error { return b.instances(ctx, local) }, "instances"})
	}
	for _, g := range slotGroups(opts.SlotSessions, opts.SlotIdle) {
		phases = append(phases, phase{"session slots " + g.String(), func(ctx context.Context) error {
			return b.slotRows(ctx, local, g)
		}, "slots"})
	}
	phases = append(phases, phase{"cost: the workload and an idle sweep, counted", b.costPhase, "cost"})
	phases = append(phases, phase{"cost: the handler's own payment-timeout checks", b.timeoutChecks, "cost"})
	phases = append(phases, phase{fmt.Sprintf("memory after %d orders", opts.RSSOrders), b.rssOrders, "memory"})
	for _, d := range opts.Outages.New {
		phases = append(phases, phase{fmt.Sprintf("outage %s, default retry policy", devhostDuration(d)), func(ctx context.Context) error { return b.outage(ctx, d, false) }, "outage"})
	}
	for _, d := range opts.Outages.Before {
		phases = append(phases, phase{fmt.Sprintf("outage %s, today's policy", devhostDuration(d)), func(ctx context.Context) error { return b.outage(ctx, d, true) }, "outage"})
	}
	if len(opts.Only) > 0 {
		phases = slices.DeleteFunc(phases, func(p phase) bool { return !slices.Contains(opts.Only, p.group) })
	}

	begin := time.Now()
	for i, p := range phases {
		fmt.Fprintf(b.opts.Progress, "bench: [%d/%d] %s ...", i+1, len(phases), p.name)
		start := time.Now()
		if err := p.run(ctx); err != nil {
			fmt.Fprintln(b.opts.Progress, " failed")
			return Report{}, fmt.Errorf("bench: %s: %w", p.name, err)
		}
		if err := b.dropTables(ctx); err != nil {
			fmt.Fprintln(b.opts.Progress, " failed")
			return Report{}, fmt.Errorf("bench: %s: %w", p.name, err)
		}
		fmt.Fprintf(b.opts.Progress, " %.1fs (%.0fs in all)\n", time.Since(start).Seconds(), time.Since(begin).Seconds())
	}
	spreads := map[string][2]float64{}
	for name, xs := range b.samples {
		b.results[name] = median(xs)
		spreads[name] = [2]float64{slices.Min(xs), slices.Max(xs)}
	}
	b.summarizeLocal()
	if _, ok := b.results["ours_msgs_per_s"]; ok {
		b.ratios("", spreads)
		b.ratios(lat, spreads)
	}
	if b.instancesRun != nil {
		b.instancesRun.Baseline = b.baseline
	}
	workload := ""
	if slices.ContainsFunc(phases, func(p phase) bool { return p.group == "throughput" || p.group == "sessions" || p.group == "instances" }) {
		workload = fmt.Sprintf("%d orders, %d messages: %d in-order status changes, %d redeliveries of applied messages, %d stale replays; %d orders in flight",
			len(b.w.Orders), b.w.Messages(), b.w.Applied, b.w.Duplicates, b.w.Stales, opts.InFlight)
	}
	return Report{Values: b.results, Spreads: spreads, Slots: b.slots, Notes: b.notes, Instances: b.instancesRun, Cost: b.costRun, Workload: workload}, nil
}

// table returns a fresh table name for one run; the phase's end drops it.
func (b *runner) table(name string) string {
	b.tables++
	t := fmt.Sprintf("bench%s%s%d", strings.ReplaceAll(name, "_", ""), b.runID, b.tables)
	b.made = append(b.made, t)
	return t
}

// dropTables deletes the tables made since the last phase ended (a missing
// one is no error): Azurite's in-memory store keeps them until deleted.
func (b *runner) dropTables(ctx context.Context) error {
	if len(b.made) == 0 {
		return nil
	}
	for _, t := range b.made {
		_, err := b.tablesSvc.DeleteTable(ctx, t, nil)
		var re *azcore.ResponseError
		if err != nil && !(errors.As(err, &re) && re.StatusCode == http.StatusNotFound) {
			return fmt.Errorf("bench: drop table %s: %w", t, err)
		}
	}
	b.made = b.made[:0]
	return nil
}

func (b *runner) newStore(ctx context.Context, cs, table string) (*tablestore.Store, error) {
	s, err := tablestore.NewFromConnectionString(cs, table, nil)
	if err != nil {
		return nil, err
	}
	return s, s.EnsureTable(ctx)
}

// warmUp runs each design once on a quarter of the workload, untimed.
func (b *runner) warmUp(ctx context.Context, cs string) error {
	w := NewWorkload("warm", max(1, len(b.w.Orders)/4), b.opts.DuplicateShare, b.opts.StaleShare, 2)
	for _, design := range []perOrder{limitOrder, naiveOrder} {
		s, err := b.newStore(ctx, cs, b.table("warm"))
		if err != nil {
			return err
		}
		if _, err := runDirect(ctx, s, w, b.opts.InFlight, design); err != nil {
			return err
		}
	}
	_, err := b.runOurs(ctx, oursConfig{store: cs, table: b.table("warm"), sessions: b.opts.InFlight, timeScale: b.opts.TimeScale}, w)
	return err
}

// direct runs one of the direct loops (limit or naive).
func (b *runner) direct(ctx context.Context, cs, prefix string, design perOrder) error {
	s, err := b.newStore(ctx, cs, b.table(prefix))
	if err != nil {
		return err
	}
	r, err := runDirect(ctx, s, b.w, b.opts.InFlight, design)
	if err != nil {
		return err
	}
	b.samples[prefix+"msgs_per_s"] = append(b.samples[prefix+"msgs_per_s"], float64(b.w.Messages())/r.Elapsed.Seconds())
	b.results[prefix+"round_trips_per_msg"] = float64(r.RoundTrips) / float64(b.w.Messages())
	return nil
}

// ours runs the real system on the default retry policy (reschedule) or on
// today's (_before); local runs also yield the handler's figures.
func (b *runner) ours(ctx context.Context, cs, prefix string, reschedule bool) error {
	c := oursConfig{store: cs, table: b.table(prefix + "ours"), sessions: b.opts.InFlight, timeScale: b.opts.TimeScale, reschedule: reschedule}
	switch {
	case b.opts.ProfileDir == "" || prefix != "":
	case reschedule && len(b.local) == 0:
		c.profileDir = b.opts.ProfileDir
		c.handlerProfile = filepath.Join(b.opts.ProfileDir, "handler")
	case !reschedule && len(b.localBefore) == 0:
		c.handlerProfile = filepath.Join(b.opts.ProfileDir, "handler-before")
	}
	r, err := b.runOurs(ctx, c, b.w)
	if err != nil {
		return err
	}
	suffix := ""
	if !reschedule {
		suffix = "_before"
	}
	name := prefix + "ours_msgs_per_s" + suffix
	b.samples[name] = append(b.samples[name], float64(b.w.Messages())/r.Elapsed.Seconds())
	switch {
	case prefix == "" && reschedule:
		b.local = append(b.local, r)
	case prefix == "":
		b.localBefore = append(b.localBefore, r)
	}
	return nil
}

// summarizeLocal derives the handler's figures from all local runs of ours.
func (b *runner) summarizeLocal() {
	if len(b.local) == 0 {
		return
	}
	var (
		m        Scrape
		rssIdle  int64
		rssAfter int64
	)
	for _, r := range b.local {
		m = append(m, r.Metrics...)
		rssIdle, rssAfter = max(rssIdle, r.RSSIdle), max(rssAfter, r.RSSAfter)
	}
	status := map[string]string{"subject": "OrderStatusChanged"}
	b.results["ours_p50_ms"] = 1000 * m.Quantile("orderstatus_handler_duration_seconds", 0.50, status)
	b.results["ours_p99_ms"] = 1000 * m.Quantile("orderstatus_handler_duration_seconds", 0.99, status)
	for name, result := range map[string]string{"applied": "Applied", "duplicate": "Duplicate", "stale": "Stale"} {
		match := map[string]string{"subject": "OrderStatusChanged", "result": result}
		b.results["round_trips_per_"+name] = m.Sum("orderstatus_message_round_trips_total", match) /
			m.Sum("orderstatus_messages_total", match)
	}
	if len(b.localBefore) > 0 {
		var before Scrape
		for _, r := range b.localBefore {
			before = append(before, r.Metrics...)
		}
		match := map[string]string{"subject": "OrderStatusChanged", "result": "Applied"}
		b.results["round_trips_per_applied_before"] = before.Sum("orderstatus_message_round_trips_total", match) /
			before.Sum("orderstatus_messages_total", match)
		// The same work as the minimal handler's, process by process.
		for p, ms := range b.cpuPerMessage(b.localBefore) {
			b.results["cpu_ms_per_msg_"+p+"_before"] = ms
		}
	}
	// The instances run's baseline: every message's round trips.
	b.baseline = m.Sum("orderstatus_message_round_trips_total", status) /
		m.Sum("orderstatus_messages_total", map[string]string{"subject": "OrderStatusChanged", "result": "Applied"})
	// The store's call count must match the per-message sums (waitTable's
	// read goes to the HTTP group's instance).
	if calls, perMsg := m.Sum("orderstatus_store_round_trips_total", nil), m.Sum("orderstatus_message_round_trips_total", nil); calls != perMsg {
		b.notes = append(b.notes, fmt.Sprintf("the handler made %.0f storage calls, %.0f of them for messages", calls, perMsg))
	}
	for p, ms := range b.cpuPerMessage(b.local) {
		b.results["cpu_ms_per_msg_"+p] = ms
	}
	b.results["rss_idle_mb"] = float64(rssIdle) / (1 << 20)
	b.results["rss_after_load_mb"] = float64(rssAfter) / (1 << 20)
}

// cpuPerMessage is each process's CPU milliseconds per message over runs.
func (b *runner) cpuPerMessage(runs []oursRun) map[string]float64 {
	n := float64(len(runs) * b.w.Messages())
	out := map[string]float64{}
	for _, p := range []string{"handler", "devhost", "azurite"} {
		var d time.Duration
		for _, r := range runs {
			d += r.CPU[p]
		}
		out[p] = float64(d.Microseconds()) / 1000 / n
	}
	return out
}

// sessions runs the real system with maxConcurrentSessions n.
func (b *runner) sessions(ctx context.Context, cs string, n int) error {
	c := oursConfig{store: cs, table: b.table("sessions"), sessions: n, timeScale: b.opts.TimeScale}
	r, err := b.runOurs(ctx, c, b.w)
	if err != nil {
		return err
	}
	b.results[fmt.Sprintf("sessions_%d_msgs_per_s", n)] = float64(b.w.Messages()) / r.Elapsed.Seconds()
	return nil
}

// slotSetting is one row of the session-slot table.
type slotSetting struct {
	sessions int
	idle     time.Duration
}

// ceiling is the most messages a second the setting can complete.
func (s slotSetting) ceiling() float64 { return float64(s.sessions) / s.idle.Seconds() }

// slotGroup is session-slot settings measured at once.
type slotGroup []slotSetting

func (g slotGroup) String() string {
	var parts []string
	for _, s := range g {
		parts = append(parts, fmt.Sprintf("%d, idle %v", s.sessions, s.idle))
	}
	if len(g) == 1 {
		return parts[0]
	}
	return strings.Join(parts, "; ") + " (at once)"
}

// slotsTogether bounds the summed ceilings of the session-slot settings
// measured at once: busier settings measured together slow each other.
const slotsTogether = 100

// slotGroups groups the session-slot settings while their ceilings add up
// to at most slotsTogether.
func slotGroups(sessions []int, idles []time.Duration) []slotGroup {
	var groups []slotGroup
	var cur slotGroup
	sum := 0.0
	for _, idle := range idles {
		for _, n := range sessions {
			s := slotSetting{n, idle}
			if len(cur) > 0 && sum+s.ceiling() > slotsTogether {
				groups, cur, sum = append(groups, cur), nil, 0
			}
			cur, sum = append(cur, s), sum+s.ceiling()
		}
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// slotRows measures the settings of g at once on the real clock.
func (b *runner) slotRows(ctx context.Context, cs string, g slotGroup) error {
	rows := make([]SlotRow, len(g))
	errs := make([]error, len(g))
	var wg sync.WaitGroup
	for i, s := range g {
		c := oursConfig{store: cs, table: b.table("slots"), sessions: s.sessions, idle: s.idle, timeScale: 1}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i], errs[i] = b.runSlots(ctx, c, b.opts.SlotRounds, fmt.Sprintf("s%d-%d", s.sessions, s.idle.Milliseconds()))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, s := range g {
		b.slots = append(b.slots, rows[i])
		b.results[fmt.Sprintf("slots_%d_idle_%d_msgs_per_s", s.sessions, s.idle.Milliseconds())] = rows[i].MsgsPerS
	}
	return nil
}

// coldStart times bin/handler's first 200 on GET / ColdStarts times.
func (b *runner) coldStart(ctx context.Context) error {
	if b.opts.ColdStarts <= 0 {
		return errors.New("bench: no cold starts asked for")
	}
	var ds []float64
	for range b.opts.ColdStarts {
		p, d, err := b.startHandler(ctx, b.az.ConnectionString(), b.table("cold"))
		if err != nil {
			return err
		}
		p.stop()
		ds = append(ds, float64(d.Microseconds())/1000)
	}
	b.results["cold_start_ms_p50"] = percentile(ds, 0.50)
	b.results["cold_start_ms_p90"] = percentile(ds, 0.90)
	return nil
}

// rssOrders reads one handler's VmRSS after RSSOrders orders (on tableStub).
func (b *runner) rssOrders(ctx context.Context) error {
	stub, err := startTableStub()
	if err != nil {
		return err
	}
	defer stub.close()
	p, _, err := b.startHandler(ctx, stub.connectionString(), "rss")
	if err != nil {
		return err
	}
	defer p.stop()
	if err := waitTable(ctx, p.base); err != nil {
		return err
	}
	if err := postOrders(ctx, p.base, "rss", b.opts.RSSOrders, 2*b.opts.InFlight); err != nil {
		return err
	}
	rss, err := RSS(p.pid())
	if err != nil {
		return err
	}
	b.results["rss_after_100k_orders_mb"] = float64(rss) / (1 << 20)
	if got := stub.inserts.Load(); got != int64(b.opts.RSSOrders) {
		return fmt.Errorf("bench: the handler inserted %d rows for %d new orders, want one each", got, b.opts.RSSOrders)
	}
	return nil
}

// sameWorkName names ours's messages per second on the other designs' work:
// today's policy (_before) when it ran (docs/performance.md).
func (b *runner) sameWorkName(prefix string) string {
	if _, ok := b.samples[prefix+"ours_msgs_per_s_before"]; ok {
		return prefix + "ours_msgs_per_s_before"
	}
	return prefix + "ours_msgs_per_s"
}

func (b *runner) ratios(prefix string, spreads map[string][2]float64) {
	ours := b.results[b.sameWorkName(prefix)]
	b.results[prefix+"ours_vs_naive"] = ours / b.results[prefix+"naive_msgs_per_s"]
	b.results[prefix+"ours_vs_limit"] = ours / b.results[prefix+"limit_msgs_per_s"]
	b.floorRatios(prefix, spreads)
}

// median is the middle of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}

// percentile is the nearest-rank q-quantile of xs.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}
