package devhost

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// progressReport is one progress line; body is it without the elapsed time.
type progressReport struct {
	elapsed time.Duration
	body    string
	// idle says why nothing changes ("" when nothing is due).
	idle string
}

// progress reports the run's state: the workload sent, where every message
// sent is (as Accounting adds it up), the calls by result, the dead-letter
// and poison queues, and with several instances each one's calls.
func (h *Host) progress(elapsed time.Duration, total int) progressReport {
	sent, results := h.stats.snapshot()
	qt, qs := h.broker.Snapshot(h.queue)
	pt, ps := h.broker.Snapshot(h.poisonQueue)
	var b strings.Builder
	fmt.Fprintf(&b, "workload %d/%d sent | queue: %s", sent, total, queueEquation(qt, qs))
	b.WriteString(" | calls:")
	if len(results) == 0 {
		b.WriteString(" none")
	}
	for _, k := range ordered(results, resultOrder) {
		fmt.Fprintf(&b, " %s %d", k, results[k])
	}
	fmt.Fprintf(&b, " | DLQ %d", qs.DeadLettered)
	if taken := qt.DeadLetterCompleted; taken > 0 {
		fmt.Fprintf(&b, " (%d taken by the sweeper)", taken)
	}
	parked := pt.Sent - pt.DuplicatesDropped
	fmt.Fprintf(&b, " | poison %d", ps.Active+ps.Locked+ps.Scheduled)
	if parked > 0 {
		fmt.Fprintf(&b, " (%d parked", parked)
		if pt.Completed > 0 {
			fmt.Fprintf(&b, ", %d taken by the sweeper", pt.Completed)
		}
		if ps.DeadLettered > 0 {
			fmt.Fprintf(&b, ", %d in its DLQ", ps.DeadLettered)
		}
		b.WriteString(")")
	}
	if down := h.outages.downAt(h.clock.Now()); len(down) > 0 {
		fmt.Fprintf(&b, " | unreachable: %s", strings.Join(down, ", "))
	}
	if inst := h.Instances(); scaled(inst) {
		// The HTTP group takes no message or timer call: left out.
		b.WriteString(" | calls by instance:")
		for _, in := range inst {
			if in.Group == HTTPGroup {
				continue
			}
			mark := ""
			if in.TimerRuns > 0 {
				mark = fmt.Sprintf(" (+%d timer)", in.TimerRuns)
			}
			if in.State != InstanceRunning {
				mark += " (" + in.State + ")"
			}
			fmt.Fprintf(&b, " %s %d%s", in.ID, in.Invocations, mark)
		}
	}
	r := progressReport{elapsed: elapsed, body: b.String()}
	if qs.Scheduled > 0 && qs.Active+qs.Locked == 0 {
		if due, ok := h.broker.NextDue(h.queue); ok {
			wait := time.Duration(float64(due.Sub(h.clock.Now())) / max(h.opts.TimeScale, 1))
			r.idle = fmt.Sprintf("waiting for %s, the next due in %s (%s on the broker's clock)",
				wording.Count(qs.Scheduled, "scheduled message"), max(wait, 0).Round(100*time.Millisecond), due.UTC().Format("15:04:05Z"))
		}
	}
	return r
}

// queueEquation says where every message sent to the queue is: "N in = C completed + ...".
func queueEquation(qt membroker.QueueTotals, qs membroker.QueueStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d in = %d completed", qt.Sent, qt.Completed)
	terms := []struct {
		n    int
		what string
	}{
		{qt.DuplicatesDropped, wording.CountAs(qt.DuplicatesDropped, "dropped as a duplicate", "dropped as duplicates")},
		{qt.DeadLettered, fmt.Sprintf("%d dead-lettered", qt.DeadLettered)},
		{qt.Cancelled, fmt.Sprintf("%d cancelled", qt.Cancelled)},
		{qt.ExpiredDropped, fmt.Sprintf("%d expired", qt.ExpiredDropped)},
	}
	for _, t := range terms {
		if t.n > 0 {
			fmt.Fprintf(&b, " + %s", t.what)
		}
	}
	waiting := qs.Active + qs.Locked + qs.Scheduled
	fmt.Fprintf(&b, " + %d waiting", waiting)
	if waiting > 0 {
		var parts []string
		for _, p := range []struct {
			n    int
			what string
		}{{qs.Active, "active"}, {qs.Locked, "locked"}, {qs.Scheduled, "scheduled"}} {
			if p.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
			}
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	return b.String()
}

// progressPrinter prints progress lines, but not one that repeats the last;
// when nothing changes it prints, once, why.
type progressPrinter struct {
	w         io.Writer
	last      string
	saidQuiet bool
}

func (p *progressPrinter) print(r progressReport) {
	if r.body != p.last {
		fmt.Fprintf(p.w, "[%5.1fs] %s\n", r.elapsed.Seconds(), r.body)
		p.last, p.saidQuiet = r.body, false
		return
	}
	if !p.saidQuiet {
		p.saidQuiet = true
		why := "no change"
		if r.idle != "" {
			why += "; " + r.idle
		}
		fmt.Fprintf(p.w, "[%5.1fs] %s (not repeated until something changes)\n", r.elapsed.Seconds(), why)
	}
}
