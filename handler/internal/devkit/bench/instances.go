package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/sim"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// scaleStep is one scale event of the instances run, at share of the messages.
type scaleStep struct {
	share    float64
	action   string // scenario.ScaleAdd, ScaleRemove or ScaleKill
	instance string // the instance removed or killed
}

// instanceSteps are the instances run's scale events: the oldest instance
// killed, one added, the second scaled in gracefully, one added again.
var instanceSteps = []scaleStep{
	{0.20, scenario.ScaleKill, "OrderStatus-1"},
	{0.35, scenario.ScaleAdd, ""},
	{0.50, scenario.ScaleRemove, "OrderStatus-2"},
	{0.65, scenario.ScaleAdd, ""},
}

// instancesLock is the instances run's lock duration (wall clock).
const instancesLock = time.Second

// InstancesRun is what the run with several instances saw.
type InstancesRun struct {
	// Instances is how many ran at the start, Sessions each one's sessions.
	Instances, Sessions int
	// Events are the scale events as they were applied.
	Events []string
	// PerInstance is what each instance of OrderStatus did.
	PerInstance []devhost.InstanceSummary
	// Completed counts the messages by result (each once); Calls the handler calls.
	Completed map[string]int
	Calls     int
	// Cost is what the handlers' log lines say stale caches cost.
	Cost sim.Cost
	// Baseline is the local runs' round trips per applied message (NaN without).
	Baseline float64
}

// instancesPrefix is the figures' prefix for a run with n instances.
func instancesPrefix(n int) string { return fmt.Sprintf("instances_%d_", n) }

// instances runs the workload on opts.Instances instances of the app with
// instanceSteps' scale events, from each handler's log at LOG_LEVEL info.
func (b *runner) instances(ctx context.Context, cs string) error {
	n := b.opts.Instances
	var out sim.SyncBuffer
	c := oursConfig{store: cs, table: b.table("instances"), sessions: max(1, b.opts.InFlight/n), timeScale: b.opts.TimeScale,
		instances: n, lock: instancesLock, stdout: &out, logLevel: "info"}
	h, err := b.startHost(ctx, c)
	if err != nil {
		return err
	}
	defer h.Close()
	run := InstancesRun{Instances: n, Sessions: c.sessions, Baseline: math.NaN()}
	total := b.w.Messages()
	start := time.Now()
	if err := h.Play(ctx, b.w.Lines()); err != nil {
		return err
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for _, step := range instanceSteps {
		for h.Broker().Totals(h.Queue()).Completed < int(math.Ceil(step.share*float64(total))) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-h.HandlerDone():
				return fmt.Errorf("bench: an instance's handler stopped: %v", h.HandlerErr())
			case <-tick.C:
			}
		}
		done := h.Broker().Totals(h.Queue()).Completed
		id, err := applyScale(ctx, h, step)
		if err != nil {
			return fmt.Errorf("bench: %s %s at %d of %d messages: %w", step.action, step.instance, done, total, err)
		}
		run.Events = append(run.Events, fmt.Sprintf("%s %s at %d of %d messages completed (%.1fs)",
			step.action, id, done, total, time.Since(start).Seconds()))
	}
	if err := h.WaitIdle(ctx); err != nil {
		return err
	}
	elapsed := time.Since(start)

	// OrderStatus's instances: the group measured.
	run.PerInstance = h.InstancesIn("")
	sum, err := h.Summary(ctx)
	if err != nil {
		return err
	}
	if len(sum.Violations) > 0 {
		return fmt.Errorf("bench: %d invariants broken with %d instances: %s", len(sum.Violations), n, strings.Join(sum.Violations, "; "))
	}
	run.Completed = sum.Accounting.Completed
	var roundTrips, conflicts int
	for _, in := range run.PerInstance {
		run.Calls += in.Invocations
		roundTrips += in.RoundTrips
		conflicts += in.ETagConflicts
	}
	if err := checkSettledInstances(run.Completed, sum.Accounting.DeadLettered, run.Calls, b.w); err != nil {
		return err
	}
	if roundTrips == 0 {
		return errors.New("bench: the instances logged no storage round trips: no settled log lines were read")
	}
	run.Cost = sim.CacheCost(sim.ParseAnswers(out.Bytes()))
	prefix := instancesPrefix(n)
	b.results[prefix+"msgs_per_s"] = float64(total) / elapsed.Seconds()
	b.results[prefix+"round_trips_per_applied"] = float64(roundTrips) / float64(b.w.Applied)
	b.results[prefix+"conflicts_per_1000"] = 1000 * float64(conflicts) / float64(total)
	b.instancesRun = &run
	return nil
}

// applyScale applies one scale event and returns the instance's id.
func applyScale(ctx context.Context, h *devhost.Host, step scaleStep) (string, error) {
	switch step.action {
	case scenario.ScaleAdd:
		return h.AddInstance(ctx, "")
	case scenario.ScaleRemove:
		return h.RemoveInstance(ctx, step.instance)
	case scenario.ScaleKill:
		return h.KillInstance(step.instance)
	}
	return "", fmt.Errorf("unknown scale action %q", step.action)
}

// checkSettledInstances is checkSettled for a run whose instances were
// killed and removed: a redelivered status change may settle as Duplicate.
func checkSettledInstances(completed map[string]int, deadLettered, calls int, w Workload) error {
	all := sumValues(completed)
	applied, dup, stale := completed[string(order.Applied)], completed[string(order.Duplicate)], completed[string(order.Stale)]
	again := calls - w.Messages()
	switch {
	case deadLettered != 0:
		return fmt.Errorf("bench: %d messages dead-lettered", deadLettered)
	case all != w.Messages():
		return fmt.Errorf("bench: %d messages completed, the workload has %d", all, w.Messages())
	case all != applied+dup+stale:
		return fmt.Errorf("bench: %d messages completed neither Applied, Duplicate nor Stale", all-applied-dup-stale)
	case stale != w.Stales:
		return fmt.Errorf("bench: the handlers settled %d messages as Stale, the workload has %d", stale, w.Stales)
	case applied+dup != w.Applied+w.Duplicates:
		return fmt.Errorf("bench: the handlers settled %d messages as Applied or Duplicate, the workload has %d", applied+dup, w.Applied+w.Duplicates)
	case dup < w.Duplicates:
		return fmt.Errorf("bench: the handlers settled %d messages as Duplicate, the workload has %d", dup, w.Duplicates)
	case dup-w.Duplicates > max(0, again):
		return fmt.Errorf("bench: %d status changes settled as Duplicate beyond the workload's, but only %d calls were made again", dup-w.Duplicates, max(0, again))
	}
	return nil
}

// print writes the instances run: its events and a row per instance.
func (r InstancesRun) print(w io.Writer) {
	fmt.Fprintf(w, "\ninstances (%d at the start, %d sessions each; the same workload, %d messages completed, %d handler calls):\n",
		r.Instances, r.Sessions, sumValues(r.Completed), r.Calls)
	for _, e := range r.Events {
		fmt.Fprintf(w, "  %s\n", e)
	}
	fmt.Fprintf(w, "| instance | state | calls | results | round trips | ETag conflicts | cache hits |\n|---|---|---:|---|---:|---:|---:|\n")
	for _, in := range r.PerInstance {
		fmt.Fprintf(w, "| %s | %s | %d | %s | %d | %d | %d |\n", in.ID, in.State, in.Invocations, results(in.Results), in.RoundTrips, in.ETagConflicts, in.CacheHits)
	}
	c := r.Cost
	fmt.Fprintf(w, "from the handlers' log lines: %d session moves (an order's message answered by another instance than its previous one), "+
		"%d messages answered on two instances, %d ETag conflicts of which %d began from the cache (%d round trips)\n",
		c.Moves, c.Elsewhere, c.Conflicts, c.StaleConflicts, c.StaleRoundTrips)
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// results formats a result count map in name order: "Applied 10, Stale 2".
func results(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return cmp.Or(strings.Join(parts, ", "), "none")
}
