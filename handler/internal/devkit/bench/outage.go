package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

// OutageOptions size the outage runs: a steady workload through the dev
// host with the table unreachable for a while (--outage table), time-scaled.
type OutageOptions struct {
	// New are the outage lengths run on the default retry policy, Before
	// those on today's (ORDER_STATUS_RETRY_RESCHEDULE false); none: no runs.
	New, Before []time.Duration
	// Rate is messages a host second, InFlight the open orders, UnpaidShare the unpaid.
	Rate        float64
	InFlight    int
	UnpaidShare float64
	// Lead and Tail are how long the workload runs before and after the outage.
	Lead, Tail time.Duration
	// TimeScale is the host clock's speed (handler settings divided by it: runOutage).
	TimeScale float64
	// Sessions is maxConcurrentSessions.
	Sessions int
	// PaymentTimeout is when PaymentTimeoutCheck falls due (default 30m).
	PaymentTimeout time.Duration
	// RecoveryScale is the host clock's speed from a second before the
	// table's return until the status changes caught up, SettleScale from
	// then until every row is right; RecoveryWindow bounds both (0: TimeScale).
	RecoveryScale, SettleScale float64
	RecoveryWindow             time.Duration
	// RecoveryReference, if set, is the outage length RecoveryScale and
	// SettleScale are for; other lengths scale both by waveRate.
	RecoveryReference time.Duration
}

// waveRate is the host-clock rate of the messages due after an outage of
// d: its copies within reschedule.DefaultCap of the return, and the workload.
func (o OutageOptions) waveRate(d time.Duration) float64 {
	return o.Rate * (1 + d.Seconds()/reschedule.DefaultCap.Seconds())
}

// paced returns o with the recovery clock of an outage of d.
func (o OutageOptions) paced(d time.Duration) OutageOptions {
	if o.RecoveryReference <= 0 || d <= 0 || o.Rate <= 0 {
		return o
	}
	k := o.waveRate(o.RecoveryReference) / o.waveRate(d)
	if o.RecoveryScale > 0 {
		o.RecoveryScale = min(o.TimeScale, o.RecoveryScale*k)
	}
	if o.SettleScale > 0 {
		o.SettleScale = min(o.TimeScale, o.SettleScale*k)
	}
	return o
}

// DefaultOutages returns the outage runs of `make bench`: 10 and 30
// minutes on the default policy, 30 on today's; 20 messages a second over
// 200 open orders at 60x. From the table's return the clock runs at 1x
// until the status changes caught up, then 2x, for at most 20 host
// minutes; the 10-minute run is scaled by RecoveryReference (docs/outages.md).
func DefaultOutages() OutageOptions {
	return OutageOptions{
		New: []time.Duration{10 * time.Minute, 30 * time.Minute}, Before: []time.Duration{30 * time.Minute},
		Rate: 20, InFlight: 200, UnpaidShare: 0.1, Lead: time.Minute, Tail: 2 * time.Minute,
		TimeScale: 60, Sessions: 64, PaymentTimeout: 30 * time.Minute,
		RecoveryScale: 1, SettleScale: 2, RecoveryWindow: 20 * time.Minute, RecoveryReference: 30 * time.Minute,
	}
}

func outageName(d time.Duration) string { return fmt.Sprintf("outage_%dm_", int(d.Minutes())) }

// outageNames are the figures of the outage runs, in print order.
func outageNames(o OutageOptions) []string {
	var names []string
	for _, d := range o.New {
		p := outageName(d)
		names = append(names, p+"dead_lettered", p+"store_calls_per_message", p+"recovery_s", p+"status_recovery_s",
			p+"paid_shown_cancelled", p+"paid_shown_cancelled_longest_s")
	}
	for _, d := range o.Before {
		p := outageName(d)
		names = append(names, p+"dead_lettered_before", p+"store_calls_per_message_before", p+"recovery_s_before", p+"status_recovery_s_before",
			p+"paid_shown_cancelled_before", p+"paid_shown_cancelled_longest_s_before")
	}
	return names
}

// outageOrder is one order of the outage workload.
type outageOrder struct {
	id    string
	start time.Duration // its Created, since the workload began
	paid  bool
}

// outageWorkload is the outage runs' workload: orders, their messages and the outage.
type outageWorkload struct {
	lines  []devhost.ScenarioLine
	orders []outageOrder
	life   time.Duration // from an order's Created to its Delivered
	// timeout is PaymentTimeoutCheck's delay after Created.
	timeout time.Duration
	// messages fall due in the workload, during of them within the outage.
	messages, during int
}

// recoveryBound is how long after an outage (host clock) a drained run looks for recovery.
const recoveryBound = 45 * time.Minute

// newOutageWorkload builds the workload of an outage of d after o.Lead.
func newOutageWorkload(prefix string, o OutageOptions, d time.Duration) outageWorkload {
	// Messages per order: 4 status changes or Created, and the timeout.
	perOrder := 4*(1-o.UnpaidShare) + 1*o.UnpaidShare + 1
	every := time.Duration(float64(time.Second) * perOrder / o.Rate) // between two orders' Created
	w := outageWorkload{life: time.Duration(o.InFlight) * every, timeout: o.PaymentTimeout}
	if w.timeout <= 0 {
		w.timeout = 30 * time.Minute
	}
	paymentTimeout := w.timeout
	end := o.Lead + d + o.Tail
	outStart, outEnd := o.Lead, o.Lead+d
	in := func(at time.Duration) bool { return at >= outStart && at < outEnd }
	unpaidEvery := 0
	if o.UnpaidShare > 0 {
		unpaidEvery = int(math.Round(1 / o.UnpaidShare))
	}
	for i := 0; time.Duration(i)*every+w.life <= end; i++ {
		id := fmt.Sprintf("%s-o%d", prefix, i)
		ord := outageOrder{id: id, start: time.Duration(i) * every, paid: unpaidEvery == 0 || i%unpaidEvery != unpaidEvery-1}
		w.orders = append(w.orders, ord)
		statuses := []order.Status{order.Created}
		if ord.paid {
			statuses = append(statuses, order.Paid, order.Shipped, order.Delivered)
		}
		for k, st := range statuses {
			at := ord.start + time.Duration(k)*w.life/3
			w.lines = append(w.lines, statusChange(id, st, int64(k+1), at))
			w.messages++
			if in(at) {
				w.during++
			}
			if k == 0 {
				w.lines = append(w.lines, devhost.ScenarioLine{Subject: order.SubjectPaymentTimeout, SessionID: id,
					MessageID: contract.TimeoutMessageID(id, 1), ContentType: "application/json",
					Body: []byte(fmt.Sprintf(`{"orderId":%q,"createdSequence":1}`, id)), SendAfter: at, ScheduleAfter: paymentTimeout})
				w.messages++
				if in(at + paymentTimeout) {
					w.during++
				}
			}
		}
	}
	w.lines = append(w.lines, devhost.ScenarioLine{Outage: devhost.OutageTable, SendAfter: outStart, Duration: d, Pos: "outage"})
	slices.SortStableFunc(w.lines, func(a, b devhost.ScenarioLine) int { return cmp.Compare(a.SendAfter, b.SendAfter) })
	return w
}

func statusChange(id string, st order.Status, seq int64, at time.Duration) devhost.ScenarioLine {
	return devhost.ScenarioLine{Subject: order.SubjectStatusChanged, SessionID: id, MessageID: fmt.Sprintf("%s:%d", id, seq),
		ContentType: "application/json", SendAfter: at,
		Body: []byte(fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d}`, id, st, seq))}
}

// rowState is what the recovery check reads of a row.
type rowState struct {
	Status       string
	LastSequence int64
}

// behind returns the orders whose row does not yet show every message due before at.
func (w outageWorkload) behind(rows map[string]rowState, at time.Duration) []string {
	return w.behindOf(rows, at, nil, true)
}

// behindOf is behind over only (all when nil), without the cancellations if !checks.
func (w outageWorkload) behindOf(rows map[string]rowState, at time.Duration, only []string, checks bool) []string {
	var named map[string]bool
	if only != nil {
		named = make(map[string]bool, len(only))
		for _, id := range only {
			named[id] = true
		}
	}
	var out []string
	for _, o := range w.orders {
		if o.start >= at || (named != nil && !named[o.id]) {
			continue
		}
		var want int64 = 1
		if o.paid {
			want = min(4, 1+int64((at-o.start-1)/(w.life/3)))
		}
		row, ok := rows[o.id]
		switch {
		case !ok:
			out = append(out, o.id)
		case !o.paid && o.start+w.timeout < at:
			if checks && row.Status != string(order.Cancelled) {
				out = append(out, o.id)
			}
		case row.LastSequence < want || (o.paid && row.Status == string(order.Cancelled)):
			out = append(out, o.id)
		}
	}
	return out
}

// tally counts the orders keep selects by what their rows show
// ("paid at Paid/2", "unpaid at -/0").
func (w outageWorkload) tally(rows map[string]rowState, keep func(o outageOrder, got rowState) bool) map[string]int {
	out := map[string]int{}
	for _, o := range w.orders {
		if got := rows[o.id]; keep(o, got) {
			kind := "paid"
			if !o.paid {
				kind = "unpaid"
			}
			out[fmt.Sprintf("%s at %s/%d", kind, cmp.Or(got.Status, "-"), got.LastSequence)]++
		}
	}
	return out
}

// wrongRow: the row is not Delivered/4 (unpaid: Cancelled/1).
func wrongRow(o outageOrder, got rowState) bool {
	if !o.paid {
		return got != rowState{string(order.Cancelled), 1}
	}
	return got != rowState{string(order.Delivered), 4}
}

// paidCancelled: a paid order's row shows Cancelled.
func paidCancelled(o outageOrder, got rowState) bool {
	return o.paid && got.Status == string(order.Cancelled)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// rowReader reads the orders' rows straight from Azurite, not via the proxy.
type rowReader struct {
	client *aztables.Client
}

// row is what the recovery check reads of a row (LastSequence: Edm.Int64).
type row struct {
	PartitionKey string
	Status       string
	LastSequence aztables.EDMInt64
}

func (r row) state() rowState {
	return rowState{Status: r.Status, LastSequence: int64(r.LastSequence)}
}

// all lists every order row (RowKey "status", not the recovery marker).
func (r *rowReader) all(ctx context.Context) (map[string]rowState, error) {
	pager := r.client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Select: to.Ptr("PartitionKey,Status,LastSequence"),
		Filter: to.Ptr("RowKey eq 'status'")})
	rows := map[string]rowState{}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entities {
			var x row
			if err := json.Unmarshal(e, &x); err != nil {
				return nil, err
			}
			rows[x.PartitionKey] = x.state()
		}
	}
	return rows, nil
}

// some reads the rows of ids (RowKey "status"); a missing row is left out.
func (r *rowReader) some(ctx context.Context, ids []string) (map[string]rowState, error) {
	rows := map[string]rowState{}
	for _, id := range ids {
		resp, err := r.client.GetEntity(ctx, id, "status", nil)
		var re *azcore.ResponseError
		switch {
		case errors.As(err, &re) && re.StatusCode == 404:
			continue
		case err != nil:
			return nil, err
		}
		var x row
		if err := json.Unmarshal(resp.Value, &x); err != nil {
			return nil, err
		}
		rows[id] = x.state()
	}
	return rows, nil
}

// fewRows is the most rows the recovery poll reads one by one.
const fewRows = 200

// outageRun is one outage run's measurements.
type outageRun struct {
	deadLettered int
	deadDuring   int // of deadLettered, those while the table was unreachable
	refused      int
	during       int
	recovery     time.Duration // host clock; < 0: not recovered
	// statusRecovery: the same for the status changes alone; < 0: not recovered.
	statusRecovery time.Duration
	behindAtEnd    int // orders not recovered when the run ended
	// wrongAtEnd, wrongRows: the final rows that are wrong; scheduledAtEnd: still scheduled.
	wrongAtEnd     int
	wrongRows      map[string]int
	scheduledAtEnd int
	rescheduled    int
	wall           time.Duration
	messages       int
	// pace is how the run's host clock ran.
	pace *pacer
	// behindAtWindow counts the orders behind when RecoveryWindow ended, by kind.
	behindAtWindow map[string]int
	// afterReturn: what the handler rescheduled and its circuit did after the return.
	afterReturn string
	// stopped: the run ended at recovery or its bound, not waiting for the checks.
	stopped bool
	// shownCancelled counts the paid orders a look saw Cancelled, longestCancelled the longest.
	shownCancelled   int
	longestCancelled time.Duration
}

// cancelledSeen tracks the paid orders the looks see Cancelled.
type cancelledSeen struct {
	since   map[string]time.Time // order -> first look that saw it Cancelled, while it is
	ever    map[string]bool
	longest time.Duration
}

// look records what one look at time at read of the paid orders.
func (c *cancelledSeen) look(w outageWorkload, rows map[string]rowState, at time.Time) {
	if c.since == nil {
		c.since, c.ever = map[string]time.Time{}, map[string]bool{}
	}
	for _, o := range w.orders {
		row, ok := rows[o.id]
		if !o.paid || !ok {
			continue
		}
		from, was := c.since[o.id]
		switch {
		case row.Status == string(order.Cancelled) && !was:
			c.since[o.id], c.ever[o.id] = at, true
		case row.Status != string(order.Cancelled) && was:
			c.longest = max(c.longest, at.Sub(from))
			delete(c.since, o.id)
		}
	}
}

// end closes the stretches still open at at.
func (c *cancelledSeen) end(at time.Time) {
	for _, from := range c.since {
		c.longest = max(c.longest, at.Sub(from))
	}
}

// afterReturn describes what the handler rescheduled and its circuit did between scrapes.
func afterReturn(from, to Scrape) string {
	var parts []string
	for _, reason := range []string{"transient", "circuit_open", "order_not_found"} {
		match := map[string]string{"reason": reason}
		n := to.Sum("orderstatus_rescheduled_total", match) - from.Sum("orderstatus_rescheduled_total", match)
		parts = append(parts, fmt.Sprintf("%s %.0f", reason, n))
	}
	open := map[string]string{"state": "open"}
	opened := to.Sum("orderstatus_circuit_changes_total", open) - from.Sum("orderstatus_circuit_changes_total", open)
	return fmt.Sprintf("after the table's return the handler rescheduled %s; its circuit opened %.0f times", strings.Join(parts, ", "), opened)
}

// outage runs one outage run of length d and records its figures.
func (b *runner) outage(ctx context.Context, d time.Duration, before bool) error {
	o := b.opts.Outages
	suffix := ""
	if before {
		suffix = "_before"
	}
	r, err := b.runOutage(ctx, o.paced(d), d, before)
	if err != nil {
		return err
	}
	seconds := func(d time.Duration) float64 { // < 0: not recovered
		if d < 0 {
			return math.NaN()
		}
		return d.Seconds()
	}
	for name, v := range map[string]float64{
		"dead_lettered":                  float64(r.deadLettered),
		"store_calls_per_message":        float64(r.refused) / float64(max(1, r.during)),
		"recovery_s":                     seconds(r.recovery),
		"status_recovery_s":              seconds(r.statusRecovery),
		"paid_shown_cancelled":           float64(r.shownCancelled),
		"paid_shown_cancelled_longest_s": r.longestCancelled.Seconds(),
	} {
		b.results[outageName(d)+name+suffix] = v
	}
	policy := "the default retry policy"
	if before {
		policy = "today's policy (ORDER_STATUS_RETRY_RESCHEDULE=false)"
	}
	note := fmt.Sprintf("outage %s on %s: %d messages (%d due in the outage), %.0f s of wall time; %d storage requests refused, %d rescheduled while the table was unreachable; %d dead-lettered in the run, %d of them while it was",
		devhostDuration(d), policy, r.messages, r.during, r.wall.Seconds(), r.refused, r.rescheduled, r.deadLettered, r.deadDuring)
	note += "; " + r.pace.describe()
	if r.afterReturn != "" {
		note += "; " + r.afterReturn
	}
	if r.behindAtWindow != nil {
		note += fmt.Sprintf("; behind when the slowed stretch ended, %s after the return: %v", devhostDuration(o.RecoveryWindow), r.behindAtWindow)
	}
	if r.recovery < 0 {
		note += fmt.Sprintf("; not recovered when the run ended: %d orders behind what was sent before the table came back", r.behindAtEnd)
	}
	switch {
	case r.stopped && r.wrongAtEnd > 0:
		note += fmt.Sprintf("; stopped then, %d messages still scheduled (the workload's later payment-timeout checks); %d paid orders Cancelled, which no later message can put right: %v",
			r.scheduledAtEnd, r.wrongAtEnd, r.wrongRows)
	case r.stopped:
		note += fmt.Sprintf("; stopped then, %d messages still scheduled (the workload's later payment-timeout checks); no paid order Cancelled", r.scheduledAtEnd)
	case r.wrongAtEnd > 0:
		note += fmt.Sprintf("; %d orders end other than the workload makes them (Delivered, or Cancelled when unpaid): %v; %d messages still scheduled",
			r.wrongAtEnd, r.wrongRows, r.scheduledAtEnd)
	}
	b.notes = append(b.notes, note)
	return nil
}

func devhostDuration(d time.Duration) string { return strings.TrimSuffix(d.String(), "0s") }

// runOutage plays the outage workload of d through the real system and
// measures dead letters, refused requests and recovery (host clock).
func (b *runner) runOutage(ctx context.Context, o OutageOptions, d time.Duration, before bool) (outageRun, error) {
	r := outageRun{recovery: -1, statusRecovery: -1}
	scale := o.TimeScale
	// Production's retry settings on the host clock at the run's speed.
	settings := scaledRetry(scale)
	settings["ORDER_STATUS_RETRY_RESCHEDULE"] = "true"
	if before {
		settings["ORDER_STATUS_RETRY_RESCHEDULE"] = "false"
		settings[config.EnvRetryBudget] = max(time.Duration(float64(config.DefaultRetryBudgetNoReschedule)/scale), minWallBudget).String()
	}
	clk := clock.Scaled(scale)
	table := b.table("outage")
	c := oursConfig{store: b.az.ConnectionString(), table: table, sessions: o.Sessions, timeScale: scale, clock: clk,
		lock: time.Duration(float64(time.Minute) / scale), settings: settings, outages: []string{devhost.OutageTable}, logLevel: "warn"}
	h, err := b.startHost(ctx, c)
	if err != nil {
		return r, err
	}
	defer h.Close()
	w := newOutageWorkload(fmt.Sprintf("out%d", b.tables), o, d)
	r.messages, r.during = w.messages, w.during
	completed := func() int { return h.Broker().Totals(h.Queue()).Completed }
	pc := newPacer(clk, o, before, completed)
	r.pace = pc

	start := time.Now()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go pc.slowAtReturn(runCtx, h.Outages)
	played := make(chan error, 1)
	sent := make(chan struct{}) // closed once every line of the workload was sent
	go func() {
		err := h.Play(runCtx, w.lines)
		close(sent)
		if err == nil {
			err = h.WaitIdle(runCtx)
		}
		played <- err
	}()
	rr := rowReader{b.tablesSvc.NewClient(table)}
	// Recovery: read the rows until each order shows what was sent before the return.
	var behind []string
	var seen cancelledSeen
	first := true
	wait := 250 * time.Millisecond
	var atReturn Scrape // the handler's metrics at the first look after the return
	look := func(end time.Time) error {
		if atReturn == nil {
			m, err := scrapeHandler(ctx, h)
			if err != nil {
				return err
			}
			atReturn = m
		}
		at, began := clk.Now(), time.Now()
		var rows map[string]rowState
		var err error
		if first || len(behind) > fewRows {
			rows, err = rr.all(ctx)
		} else {
			rows, err = rr.some(ctx, behind)
		}
		if err != nil {
			return err
		}
		first = false
		seen.look(w, rows, at)
		wait = max(250*time.Millisecond, 9*time.Since(began))
		candidates := behind // the orders read: all the first time, then those behind
		if len(rows) >= len(w.orders) {
			candidates = nil
		}
		if r.statusRecovery < 0 && len(w.behindOf(rows, o.Lead+d, candidates, false)) == 0 {
			r.statusRecovery = at.Sub(end)
		}
		if behind = w.behindOf(rows, o.Lead+d, candidates, true); len(behind) == 0 {
			r.recovery = at.Sub(end)
			pc.recovered()
		} else if r.statusRecovery >= 0 {
			pc.statusCaughtUp()
		}
		if r.recovery < 0 && at.Sub(end) > o.RecoveryWindow && r.behindAtWindow == nil {
			ids := map[string]bool{}
			for _, id := range behind {
				ids[id] = true
			}
			r.behindAtWindow = w.tally(rows, func(o outageOrder, _ rowState) bool { return ids[o.id] })
			pc.recovered()
		}
		return nil
	}
	// Measure until recovery or the bound, then stop once the workload is sent;
	// today's policy cannot recover what dead-lettered: its bound is the target.
	bound := recoveryBound
	if before {
		bound = reschedule.DefaultCap + time.Minute
	}
	var runErr error
	stopped := false
	for done := false; !done; {
		select {
		case runErr = <-played:
			done = true
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(wait):
		}
		out := h.Outages()
		if len(out) == 0 || !out[0].Ended {
			continue
		}
		if r.recovery < 0 {
			if err := look(out[0].End); err != nil {
				return r, err
			}
		}
		if !done && closed(sent) && (r.recovery >= 0 || !clk.Now().Before(out[0].End.Add(bound))) {
			stopRun()
			<-played
			done, stopped = true, true
		}
	}
	if runErr != nil {
		return r, runErr
	}
	if out := h.Outages(); len(out) == 1 && out[0].Ended && !stopped {
		for r.recovery < 0 && clk.Now().Before(out[0].End.Add(bound)) {
			select {
			case <-ctx.Done():
				return r, ctx.Err()
			case <-time.After(wait):
			}
			if err := look(out[0].End); err != nil {
				return r, err
			}
		}
		pc.recovered()
		if err := h.WaitIdle(ctx); err != nil {
			return r, err
		}
	}
	r.wall = time.Since(start)
	out := h.Outages()
	if len(out) != 1 || !out[0].Ended {
		return r, fmt.Errorf("bench: outage run: outages %+v, want one, over", out)
	}
	r.refused, r.rescheduled, r.deadDuring = out[0].Refused, out[0].Rescheduled, out[0].DeadLettered
	r.deadLettered = h.Broker().Totals(h.Queue()).DeadLettered
	rows, err := rr.all(ctx)
	if err != nil {
		return r, err
	}
	if atReturn != nil {
		m, err := scrapeHandler(ctx, h)
		if err != nil {
			return r, err
		}
		r.afterReturn = afterReturn(atReturn, m)
	}
	r.stopped = stopped
	seen.look(w, rows, clk.Now())
	seen.end(clk.Now())
	r.shownCancelled, r.longestCancelled = len(seen.ever), seen.longest
	r.scheduledAtEnd = h.Broker().Stats(h.Queue()).Scheduled
	if stopped {
		// A paid order shown Cancelled never comes right; an unpaid one may.
		r.wrongRows = w.tally(rows, paidCancelled)
	} else {
		r.wrongRows = w.tally(rows, wrongRow)
	}
	for _, n := range r.wrongRows {
		r.wrongAtEnd += n
	}
	if r.recovery < 0 {
		// Caught up after the last look: the end of the run bounds it.
		if r.behindAtEnd = len(w.behind(rows, o.Lead+d)); r.behindAtEnd == 0 {
			r.recovery = clk.Now().Sub(out[0].End)
		}
	}
	return r, nil
}

// pacer drives an outage run's host clock through the paceStages and records
// the slowed stretches; safe for concurrent use.
type pacer struct {
	clk       *clock.ScaledClock
	o         OutageOptions
	completed func() int // the triggered queue's completed messages so far

	mu    sync.Mutex
	stage paceStage
	legs  []paceLeg // the slowed stretches, in order
}

// paceStage is where a run's clock is.
type paceStage int

const (
	paceOutage   paceStage = iota // TimeScale, until a second before the return
	paceRecovery                  // RecoveryScale, until the status changes caught up
	paceSettle                    // SettleScale, until every row is right
	paceDrain                     // TimeScale again
	paceNever                     // TimeScale throughout: never slowed
)

// paceLeg is one slowed stretch of a run.
type paceLeg struct {
	scale            float64
	from, to         time.Time // wall clock; to is zero while it lasts
	hostFrom, hostTo time.Time // on the host clock
	completed        int       // messages completed in it
	start            int       // the completed count at its start
}

func newPacer(clk *clock.ScaledClock, o OutageOptions, before bool, completed func() int) *pacer {
	p := &pacer{clk: clk, o: o, completed: completed}
	if before || o.RecoveryScale <= 0 {
		p.stage = paceNever
	}
	return p
}

// slowAtReturn slows the clock to RecoveryScale a second before the outage's end.
func (p *pacer) slowAtReturn(ctx context.Context, outages func() []devhost.OutageSummary) {
	if p.stage == paceNever {
		return
	}
	var end time.Time
	for end.IsZero() {
		if out := outages(); len(out) > 0 {
			end = out[0].End
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := clock.Sleep(ctx, p.clk, end.Add(-time.Second).Sub(p.clk.Now())); err != nil {
		return
	}
	p.to(paceOutage, paceRecovery, p.o.RecoveryScale)
}

// statusCaughtUp and recovered move the clock to SettleScale or TimeScale.
func (p *pacer) statusCaughtUp() { p.to(paceRecovery, paceSettle, p.o.SettleScale) }

func (p *pacer) recovered() {
	p.to(paceRecovery, paceDrain, p.o.TimeScale)
	p.to(paceSettle, paceDrain, p.o.TimeScale)
}

// to moves the clock from stage from to next at scale (0 keeps it), if it was at from.
func (p *pacer) to(from, next paceStage, scale float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stage != from {
		return
	}
	now, host, n := time.Now(), p.clk.Now(), p.completed()
	if len(p.legs) > 0 && p.legs[len(p.legs)-1].to.IsZero() {
		leg := &p.legs[len(p.legs)-1]
		leg.to, leg.hostTo, leg.completed = now, host, n-leg.start
	}
	if scale > 0 {
		p.clk.SetFactor(scale)
	}
	p.stage = next
	if next == paceRecovery || next == paceSettle {
		p.legs = append(p.legs, paceLeg{scale: p.clk.Factor(), from: now, hostFrom: host, start: n})
	}
}

// describe says, for the run's note, how its clock ran from the return.
func (p *pacer) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stage == paceNever {
		return fmt.Sprintf("the host clock at %gx throughout", p.o.TimeScale)
	}
	var parts []string
	for _, l := range p.legs {
		to, hostTo := l.to, l.hostTo
		n := l.completed
		if to.IsZero() {
			to, hostTo, n = time.Now(), p.clk.Now(), p.completed()-l.start
		}
		wall := to.Sub(l.from).Seconds()
		parts = append(parts, fmt.Sprintf("%gx for %.0f host s (%.0f s of wall time): %d messages completed, %.0f a wall second",
			l.scale, hostTo.Sub(l.hostFrom).Seconds(), wall, n, float64(n)/max(wall, 1e-9)))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("the host clock at %gx throughout (the table's return was never reached)", p.o.TimeScale)
	}
	return fmt.Sprintf("the host clock at %gx until a second before the table's return, then %s; then %gx again",
		p.o.TimeScale, strings.Join(parts, ", then "), p.o.TimeScale)
}
