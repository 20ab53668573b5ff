package sim

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"slices"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/publish"
)

// Env is what Run needs around it.
type Env struct {
	// HandlerPath is the handler binary.
	HandlerPath string
	// AppRoot holds host.json and the function folders.
	AppRoot string
	// ShortIdleAppRoot is the same app with sessionIdleTimeout ShortSessionIdle.
	ShortIdleAppRoot string
	// Storage is host:port of Azurite's Table service, behind a fault proxy.
	Storage string
	// Tables reaches the same service directly (no faults).
	Tables *aztables.ServiceClient
	// ProcessEnv is the environment the handler inherits (nil: none).
	ProcessEnv []string
}

// Stats count what the faults did in one run.
type Stats struct {
	Kills          int   // handler processes killed after a write
	LostAnswers    int64 // write answers the proxy withheld
	OutageRequests int64 // requests failed by an outage (ServerBusy or Drop)
	ShortOutages   int
	LongOutages    int
	LockExpiry     bool // a lock-expiry window ran
	// ConcurrentCalls counts overlapping calls of one message; LockLost late answers.
	ConcurrentCalls int
	LockLost        int
	Abandoned       int
	Restarts        int // handler restarts
	DeadLettered    int // messages dead-lettered by the broker
	Replays         int // dead-lettered messages replayed
	Writes          int // successful entity writes
	Answers         int
	// RacesPaid and RacesCancelled count the timeout races by which came first.
	RacesPaid, RacesCancelled int
	// Instances counts OrderStatus's instances started; ScaleEvents those applied.
	Instances, ScaleEvents int
	// Moves counts the calls whose session last ran on another instance.
	Moves int
	// Elsewhere counts the messages answered on more than one instance.
	Elsewhere int
	// Conflicts, StaleConflicts and StaleRoundTrips are CacheCost's.
	Conflicts, StaleConflicts, StaleRoundTrips int
	// RoundTrips is the storage round trips of all answers; Applied the Applied.
	RoundTrips, Applied int
}

// Result is what Run saw.
type Result struct {
	Observation Observation
	Stats       Stats
	// Violations are Check's verdict plus what the run found wrong.
	Violations []string
	// HandlerStdout and HandlerStderr are the handler's output, HostLog the host's.
	HandlerStdout, HandlerStderr, HostLog []byte
}

// Timeouts of a run (wall clock).
const (
	idleTimeout = 60 * time.Second
	runTimeout  = 3 * time.Minute
)

// Run plays s against a real handler behind a development host and a fault
// proxy, injecting the schedule's faults. An error means the run failed;
// invariant violations are in Result.Violations.
func Run(ctx context.Context, env Env, s Schedule) (res Result, err error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	r := &run{env: env, s: s, clk: clock.Scaled(max(1, s.Faults.TimeScale))}
	defer func() {
		res.HandlerStdout, res.HandlerStderr, res.HostLog = r.stdout.Bytes(), r.stderr.Bytes(), r.hostLog.Bytes()
	}()
	if err := r.setUp(ctx); err != nil {
		r.tearDown()
		return res, err
	}
	err = r.play(ctx)
	if err == nil {
		res, err = r.observe(ctx)
	}
	r.tearDown()
	return res, err
}

type run struct {
	env Env
	s   Schedule

	table   string
	proxy   *faultproxy.Proxy
	host    atomic.Pointer[devhost.Host]
	wire    WireLog
	timers  []*time.Timer
	stdout  SyncBuffer
	stderr  SyncBuffer
	hostLog SyncBuffer

	// clk is the host's clock; observe moves it past the lock between sweeps.
	clk       *clock.ScaledClock
	kills     atomic.Int64
	killArmed atomic.Bool
	scaled    int      // scale events applied (set by play)
	scaleErrs []string // scale events that failed (set by play)
	writeReqs atomic.Int64
	replays   map[string]string
	// start is the broker clock at the run's start; cancelled the checks Cancel removed.
	start     time.Time
	cancelMu  sync.Mutex
	cancelled map[string]bool
}

func (r *run) setUp(ctx context.Context) error {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	r.table = fmt.Sprintf("sim%dx%x", r.s.Seed, suffix)
	if _, err := r.env.Tables.CreateTable(ctx, r.table, nil); err != nil {
		return fmt.Errorf("sim: create table %s: %w", r.table, err)
	}
	p, err := faultproxy.Start("http://" + r.env.Storage)
	if err != nil {
		return fmt.Errorf("sim: fault proxy: %w", err)
	}
	r.proxy = p
	kills := map[int]bool{}
	for _, n := range r.s.Faults.Kills {
		kills[n] = true
	}
	r.killArmed.Store(true)
	p.OnAnswer(func(req *http.Request, status int) {
		if !r.orderTable(req.URL.Path) {
			return // the sweeper's tables: no order's
		}
		w, ok := r.wire.Record(req.Method, req.URL.Path, status, faultproxy.RequestBody(req),
			req.Header.Get("If-Match"), faultproxy.AnswerHeader(req).Get("ETag"))
		if !ok || !kills[w.N] || !r.killArmed.Load() {
			return
		}
		// The write is durable; its answer has not reached the handler.
		if h := r.host.Load(); h != nil {
			// The handler of the instance holding the order's session.
			pid := h.HandlerPIDFor(w.Order)
			if pid == 0 {
				pid = h.HandlerPID()
			}
			if pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				r.kills.Add(1)
			}
		}
	})

	f := r.s.Faults
	appRoot := r.env.AppRoot
	if f.SessionIdleTimeout > 0 {
		if r.env.ShortIdleAppRoot == "" {
			return errors.New("sim: the schedule needs Env.ShortIdleAppRoot")
		}
		appRoot = r.env.ShortIdleAppRoot
	}
	h, err := devhost.New(devhost.Options{
		Instances:   max(1, f.Instances),
		AppRoot:     appRoot,
		HandlerPath: r.env.HandlerPath,
		Env:         append([]string{}, r.env.ProcessEnv...),
		Settings: map[string]string{
			devhost.SettingStoreConnection: azurite.ConnectionString(p.Addr),
			devhost.SettingStoreServiceURI: "",
			config.EnvStoreTable:           r.table,
			config.EnvRetryBudget:          f.wall(f.RetryBudget, MinWallBudget).String(),
			config.EnvRetryBase:            f.wall(durationOr(f.RetryBase, RetryBase), 0).String(),
			config.EnvRetryCap:             f.wall(durationOr(f.RetryCap, RetryCap), 0).String(),
			config.EnvRetryWindow:          f.wall(durationOr(f.RetryWindow, RetryWindow), 0).String(),
			config.EnvLogLevel:             "info",
			// The real sweeper replays at first sight, into tables of this run.
			config.EnvDeadLetterCooldown:  "0s",
			config.EnvDeadLetterSweepRate: "1000",
			config.EnvDeadLetterTable:     r.table + "d",
		},
		Queues:             devhost.QueueOverrides{LockDuration: f.LockDuration, MaxDeliveryCount: f.MaxDelivery},
		TimeScale:          1,
		Clock:              r.clk,
		HTTPAddr:           "off",
		Stdout:             &r.stdout,
		Stderr:             &r.stderr,
		Logger:             slog.New(slog.NewJSONHandler(&r.hostLog, &slog.HandlerOptions{Level: slog.LevelInfo})),
		DisableLockRenewal: f.LockExpiry != nil,
		DrainTimeout:       5 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("sim: development host: %w", err)
	}
	r.host.Store(h)
	if err := h.Start(ctx); err != nil {
		return fmt.Errorf("sim: start the development host: %w", err)
	}
	return nil
}

// play injects the faults on the schedule's clock and sends the messages.
func (r *run) play(ctx context.Context) error {
	f := r.s.Faults
	lose := map[int64]bool{}
	for _, n := range f.LoseAnswers {
		lose[int64(n)] = true
	}
	t0 := time.Now()
	r.start = r.clk.Now()
	c0 := r.start
	outages := f.Outages
	// Outages are on the broker's clock, as the handler's backoffs are.
	r.proxy.SetRule(func(req *http.Request) faultproxy.Mode {
		now := r.clk.Now()
		for _, o := range outages {
			from := c0.Add(o.Start)
			if !now.Before(from) && now.Before(from.Add(o.Duration)) &&
				(!o.WritesOnly || (req.Method != http.MethodGet && req.Method != http.MethodHead)) {
				return o.Mode
			}
		}
		if IsEntityWrite(req.Method, req.URL.Path) && r.orderTable(req.URL.Path) && lose[r.writeReqs.Add(1)] {
			return faultproxy.LoseAnswer
		}
		return faultproxy.Pass
	})
	if e := f.LockExpiry; e != nil {
		r.timers = append(r.timers,
			time.AfterFunc(e.Start, func() { r.proxy.SetDelay(e.Delay) }),
			time.AfterFunc(e.Start+e.Duration, func() { r.proxy.SetDelay(0) }))
	}
	h := r.host.Load()
	scaled := make(chan struct{})
	go func() {
		defer close(scaled)
		for _, e := range f.Scale {
			if pause := time.Until(t0.Add(e.At)); pause > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(pause):
				}
			}
			r.scale(ctx, h, e)
		}
	}()
	cancels := make(chan struct{})
	go func() {
		defer close(cancels)
		r.cancelChecks(ctx, h)
	}()
	held := make(chan struct{})
	go func() {
		defer close(held)
		r.holdAfterReturn(ctx, h)
	}()
	lines, err := r.lines()
	if err != nil {
		return err
	}
	err = h.Play(ctx, lines)
	<-scaled // every scale event is applied before the drain
	<-cancels
	<-held // the returning wave is released before the drain
	if err != nil {
		return fmt.Errorf("sim: play: %w", err)
	}
	// Let the rescheduled copies come back, not yet the later payment timeouts.
	if err := r.quiesce(ctx); err != nil {
		return err
	}
	if f.ReplayRetryWindow {
		// The sweeper replays what was parked RetryWindowExceeded (cool-down 0).
		for _, o := range f.Outages {
			r.clk.AdvanceTo(r.start.Add(o.Start + o.Duration))
		}
		if err := r.fireTimers(ctx, h); err != nil {
			return fmt.Errorf("sim: fire the sweeper for the parked retries: %w", err)
		}
		if err := r.quiesce(ctx); err != nil {
			return err
		}
	}
	if err := r.fireTimers(ctx, h); err != nil {
		return fmt.Errorf("sim: fire timers: %w", err)
	}
	// Everything, the payment timeouts included.
	return r.waitIdle(ctx)
}

// holdAfterReturn holds the scheduled messages after the first outage (Faults.HoldAfterReturn).
func (r *run) holdAfterReturn(ctx context.Context, h *devhost.Host) {
	f := r.s.Faults
	if f.HoldAfterReturn <= 0 || len(f.Outages) == 0 {
		return
	}
	o := f.Outages[0]
	if clock.Sleep(ctx, r.clk, r.start.Add(o.Start+o.Duration).Sub(r.clk.Now())) != nil {
		return
	}
	b, q := h.Broker(), h.Queue()
	if err := b.HoldScheduled(q, true); err != nil {
		return
	}
	_ = clock.Sleep(ctx, r.clk, f.HoldAfterReturn)
	_ = b.HoldScheduled(q, false) // the queue exists: the hold was taken
}

// checkAfter is when the payment timeout of an order not overdue falls due.
const checkAfter = 20 * time.Minute

// lines returns the workload with each event's occurredAt on the broker's clock.
func (r *run) lines() ([]scenario.Line, error) {
	var lines []scenario.Line
	for _, m := range r.s.Messages {
		if m.Manual {
			continue
		}
		l := m.Line
		switch m.Kind {
		case KindEvent, KindDuplicateSend, KindLateReplay:
			base := r.start.Add(checkAfter - contract.PaymentTimeout)
			if ord, _ := r.s.Order(m.Order); ord.Overdue {
				base = r.start.Add(-contract.PaymentTimeout - time.Minute)
			}
			msg, err := publish.StatusMessage(contract.StatusChanged{OrderID: m.Order, Status: m.Status, Sequence: m.Sequence,
				OccurredAt: base.Add(time.Duration(m.Sequence) * time.Second)})
			if err != nil {
				return nil, fmt.Errorf("sim: event %s: %w", m.Line.MessageID, err)
			}
			l.Body = msg.Body
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// cancelChecks plays the schedule's Cancels as a producer does, through the
// loopback broker.
func (r *run) cancelChecks(ctx context.Context, h *devhost.Host) {
	r.cancelMu.Lock()
	r.cancelled = map[string]bool{}
	r.cancelMu.Unlock()
	if len(r.s.Cancels) == 0 {
		return
	}
	bus, err := loopback.NewClient(h.BrokerURL(), nil)
	if err != nil {
		return
	}
	defer bus.Close(ctx)
	type action struct {
		at     time.Duration
		c      Cancel
		cancel bool
	}
	var acts []action
	for _, c := range r.s.Cancels {
		acts = append(acts, action{c.Schedule, c, false}, action{c.At, c, true})
	}
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].at < acts[j].at })
	seqs := map[string]int64{}
	for _, a := range acts {
		if err := clock.Sleep(ctx, r.clk, r.start.Add(a.at).Sub(r.clk.Now())); err != nil {
			return
		}
		m, err := publish.TimeoutMessageFor(a.c.Order, 1)
		if err != nil {
			continue
		}
		if !a.cancel {
			if seq, err := bus.Schedule(ctx, h.Queue(), broker.Message(m), r.clk.Now().Add(a.c.After)); err == nil {
				seqs[a.c.Order] = seq
			}
			continue
		}
		if seq, ok := seqs[a.c.Order]; ok && bus.CancelScheduled(ctx, h.Queue(), seq) == nil {
			r.cancelMu.Lock()
			r.cancelled[m.MessageID] = true
			r.cancelMu.Unlock()
		}
	}
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// fireTimers fires every timer function once, as the host does at idle,
// again if a kill cut it short.
func (r *run) fireTimers(ctx context.Context, h *devhost.Host) error {
	const attempts = 5
	var err error
	for i := range attempts {
		if err = h.FireTimers(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		// Let the host restart the handler, then fire again.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i+1) * 200 * time.Millisecond):
		}
		if werr := r.waitIdle(ctx); werr != nil {
			return werr
		}
	}
	return fmt.Errorf("%d attempts: %w", attempts, err)
}

// orderTable reports whether a request path names the run's order table.
func (r *run) orderTable(path string) bool {
	seg := path[strings.LastIndex(path, "/")+1:]
	if i := strings.IndexByte(seg, '('); i >= 0 {
		seg = seg[:i]
	}
	return seg == r.table
}

// scale applies one scale event to its group's instances.
func (r *run) scale(ctx context.Context, h *devhost.Host, e ScaleEvent) {
	id := e.Group // add: the group
	if running := h.RunningIn(e.Group); e.Action != scenario.ScaleAdd && len(running) > 0 {
		id = running[e.Pick%len(running)]
	}
	if _, err := h.Scale(ctx, e.Action, id); err != nil {
		r.scaleErrs = append(r.scaleErrs, fmt.Sprintf("scale %s %s at %s: %v", e.Action, id, e.At, err))
		return
	}
	r.scaled++
}

// waitIdle waits until nothing is left, fast-forwarding over scheduled messages.
func (r *run) waitIdle(ctx context.Context) error { return r.settle(ctx, 0) }

// quiesce is waitIdle for everything due within four backoff caps.
func (r *run) quiesce(ctx context.Context) error {
	return r.settle(ctx, 4*durationOr(r.s.Faults.RetryCap, RetryCap))
}

// settle waits for the queue to drain, skipping waits for scheduled
// messages due within horizon (all when 0).
func (r *run) settle(ctx context.Context, horizon time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, idleTimeout)
	defer cancel()
	h := r.host.Load()
	for {
		wait, waitCancel := context.WithTimeout(ctx, 25*time.Millisecond)
		err := h.WaitIdle(wait)
		waitCancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("sim: %w", err)
		case !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("sim: %w", err)
		}
		// Work under way is waited for in real time: a jump could reorder a sweep's replays.
		st := h.Broker().Stats(h.Queue())
		if st.Active != 0 || st.Locked != 0 || st.Scheduled == 0 || h.CallsRunning() != 0 {
			continue
		}
		next, ok := h.Broker().NextDue(h.Queue())
		if !ok {
			continue
		}
		if horizon > 0 && next.After(r.clk.Now().Add(horizon)) {
			return nil // only later messages remain
		}
		r.clk.AdvanceTo(next)
	}
}

// observe lets the real DeadLetterSweeper replay what dead-lettered, round
// after round, and collects the observation.
func (r *run) observe(ctx context.Context) (Result, error) {
	h := r.host.Load()
	var res Result
	o := &res.Observation
	o.MaxDelivery = r.s.Faults.MaxDelivery
	dlq := broker.Source{Queue: h.Queue(), DeadLetter: true}
	dls := r.deadLetterStore()
	for round := 0; ; round++ {
		dead, err := broker.PeekAll(ctx, h.Broker(), dlq)
		if err != nil {
			return res, err
		}
		// Entries the sweeper drained and has not closed count as dead-lettered.
		open, err := dls.List(ctx, dlstore.Filter{Source: dlstore.DLQ, States: dlstore.NotClosed().States})
		if err != nil {
			return res, fmt.Errorf("sim: dead-letter store: %w", err)
		}
		if len(dead) == 0 && len(open) == 0 {
			break
		}
		if round == 3 {
			o.LeftInDLQ = append(deadLetters(dead), openDeadLetters(open)...)
			break
		}
		if round > 0 {
			// The next sweep comes minutes later: a killed sweep's locks expired.
			lock := r.s.Faults.LockDuration
			if lock == 0 {
				lock = time.Minute
			}
			r.clk.Advance(lock + time.Second)
		}
		if err := r.fireTimers(ctx, h); err != nil {
			return res, fmt.Errorf("sim: fire the sweeper: %w", err)
		}
		if err := r.waitIdle(ctx); err != nil {
			return res, err
		}
	}
	// The faults are over: no more kills while the summary reads.
	r.killArmed.Store(false)
	r.proxy.SetRule(nil)
	r.proxy.SetDelay(0)

	audit, err := dls.History(ctx, "")
	if err != nil {
		return res, fmt.Errorf("sim: audit entries: %w", err)
	}
	all, err := dls.List(ctx, dlstore.Filter{})
	if err != nil {
		return res, fmt.Errorf("sim: dead-letter store: %w", err)
	}
	entries := map[string]dlstore.Entry{}
	for _, e := range all {
		entries[e.ID] = e
	}
	r.replays = map[string]string{}
	for _, a := range audit {
		if a.Action == string(deadletter.ActionReplay) || a.Action == string(deadletter.ActionResubmit) {
			// A replay of a parked copy stands for the message it copied.
			from := a.MessageID
			if e, ok := entries[a.EntryID]; ok && e.Source != dlstore.DLQ {
				if orig := stringProp(e.Properties, parking.PropOriginalMessageID); orig != "" {
					from = orig
				}
			}
			r.replays[a.NewMessageID] = from
		}
	}
	o.Replays = r.replays
	r.cancelMu.Lock()
	o.CancelledChecks = r.cancelled
	r.cancelMu.Unlock()

	sum, err := h.Summary(ctx)
	if err != nil {
		return res, fmt.Errorf("sim: summary: %w", err)
	}
	o.Host = sum.Violations
	left := map[string]bool{}
	for _, d := range o.LeftInDLQ {
		left[d.MessageID] = true
	}
	for _, e := range sum.DeadLettered {
		if !left[e.MessageID] || e.Removed {
			o.DeadLettered = append(o.DeadLettered, DeadLetter{MessageID: e.MessageID, SessionID: e.SessionID, Reason: e.Reason, DeliveryCount: e.DeliveryCount})
		}
	}
	if o.Rows, err = r.rows(ctx); err != nil {
		return res, err
	}
	parked, err := broker.PeekAll(ctx, h.Broker(), broker.Source{Queue: h.PoisonQueue()})
	if err != nil {
		return res, err
	}
	inQueue := map[string]bool{}
	for _, m := range parked {
		inQueue[m.MessageID] = true
		if stringProp(m.ApplicationProperties, parking.PropReason) == order.ReasonRetryWindowExceeded {
			// An outage outlasted the retry window; not replayed by now: lost.
			o.LeftInDLQ = append(o.LeftInDLQ, DeadLetter{MessageID: m.MessageID, SessionID: stringProp(m.ApplicationProperties, parking.PropOriginalSessionID),
				Reason: order.ReasonRetryWindowExceeded, DeliveryCount: m.DeliveryCount})
			continue
		}
		o.Parked = append(o.Parked, Parked{
			ParkedID:          m.MessageID,
			OriginalMessageID: stringProp(m.ApplicationProperties, parking.PropOriginalMessageID),
			Reason:            stringProp(m.ApplicationProperties, parking.PropReason),
		})
	}
	// What the sweeper drained from the poison queue was parked too.
	drained, err := dls.List(ctx, dlstore.Filter{Source: dlstore.Poison})
	if err != nil {
		return res, fmt.Errorf("sim: dead-letter store: %w", err)
	}
	for _, e := range drained {
		if e.Reason == order.ReasonRetryWindowExceeded {
			// Replayed by the sweeper; one not replayed is lost.
			if !e.State.Closed() && !inQueue[e.MessageID] {
				o.LeftInDLQ = append(o.LeftInDLQ, DeadLetter{MessageID: e.MessageID, SessionID: e.OrderID, Reason: e.Reason, DeliveryCount: e.DeliveryCount})
			}
			continue
		}
		if !inQueue[e.MessageID] {
			o.Parked = append(o.Parked, Parked{ParkedID: e.MessageID, OriginalMessageID: stringProp(e.Properties, parking.PropOriginalMessageID), Reason: e.Reason})
		}
	}
	o.Writes = r.wire.Writes()
	// Closing the host flushes the handler's output.
	instances := h.Instances()
	restarts := h.HandlerStarts() - len(instances)
	if err := h.Close(); err != nil {
		return res, fmt.Errorf("sim: close the development host: %w", err)
	}
	o.Answers = ParseAnswers(r.stdout.Bytes(), r.stderr.Bytes())

	res.Violations = Check(r.s, *o)
	for _, e := range r.wire.Errors() {
		res.Violations = append(res.Violations, "wire: a write could not be read: "+e)
	}
	for _, e := range r.scaleErrs {
		res.Violations = append(res.Violations, "run: a scale event failed: "+e)
	}
	// Per-function groups, as Flex Consumption scales.
	for _, in := range instances {
		if in.Invocations > 0 && in.Group != "function:OrderStatus" {
			res.Violations = append(res.Violations, fmt.Sprintf("run: %s (%s) took %d message calls", in.ID, in.Group, in.Invocations))
		}
		if in.TimerRuns > 0 && in.Group != "function:"+SweeperGroup {
			res.Violations = append(res.Violations, fmt.Sprintf("run: %s (%s) ran the timer %d times", in.ID, in.Group, in.TimerRuns))
		}
	}
	f := r.s.Faults
	st := &res.Stats
	st.Kills = int(r.kills.Load())
	st.LostAnswers = r.proxy.Count(faultproxy.LoseAnswer)
	st.OutageRequests = r.proxy.Count(faultproxy.ServerBusy) + r.proxy.Count(faultproxy.Drop)
	for _, ou := range f.Outages {
		if ou.Long {
			st.LongOutages++
		} else {
			st.ShortOutages++
		}
	}
	st.LockExpiry = f.LockExpiry != nil
	st.ConcurrentCalls = ConcurrentCalls(o.Answers)
	st.LockLost = sum.Results[devhost.ResultLockLost]
	st.Abandoned = sum.Results[devhost.ResultAbandoned]
	st.Restarts = restarts
	st.DeadLettered = len(o.DeadLettered)
	st.Replays = len(r.replays)
	st.Writes = len(o.Writes)
	st.Answers = len(o.Answers)
	st.Instances = len(h.InstancesIn(""))
	st.ScaleEvents = r.scaled
	c := CacheCost(o.Answers)
	st.Moves, st.Conflicts, st.StaleConflicts, st.StaleRoundTrips = c.Moves, c.Conflicts, c.StaleConflicts, c.StaleRoundTrips
	st.RoundTrips, st.Applied, st.Elsewhere = c.RoundTrips, c.Applied, c.Elsewhere
	for _, ord := range r.s.Orders {
		if ord.Timeout != RaceTimeout {
			continue
		}
		if slices.ContainsFunc(o.Writes, func(w Write) bool { return w.Order == ord.ID && w.Status == order.Cancelled }) {
			st.RacesCancelled++
		} else {
			st.RacesPaid++
		}
	}
	return res, nil
}

// rows reads every order row of the run's table directly (RowKey "status").
func (r *run) rows(ctx context.Context) (map[string]Row, error) {
	rows := map[string]Row{}
	pager := r.env.Tables.NewClient(r.table).NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: to.Ptr("RowKey eq 'status'")})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("sim: list %s: %w", r.table, err)
		}
		for _, e := range page.Entities {
			id, row, err := ParseEntity(e)
			if err != nil {
				return nil, fmt.Errorf("sim: list %s: %w", r.table, err)
			}
			rows[id] = row
		}
	}
	return rows, nil
}

// tearDown stops the host, the proxy and the timers, and deletes the table.
func (r *run) tearDown() {
	for _, t := range r.timers {
		t.Stop()
	}
	if h := r.host.Load(); h != nil {
		_ = h.Close()
	}
	if r.proxy != nil {
		_ = r.proxy.Close()
	}
	if r.table != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, t := range []string{r.table, r.table + "a", r.table + "u"} {
			_, _ = r.env.Tables.DeleteTable(ctx, t, nil)
		}
	}
}

func deadLetters(ms []broker.Received) []DeadLetter {
	out := make([]DeadLetter, len(ms))
	for i, m := range ms {
		out[i] = DeadLetter{MessageID: m.MessageID, SessionID: m.SessionID, Reason: m.DeadLetterReason, DeliveryCount: m.DeliveryCount}
	}
	return out
}

// openDeadLetters are the store's entries of dead letters not yet closed.
func openDeadLetters(es []dlstore.Entry) []DeadLetter {
	out := make([]DeadLetter, len(es))
	for i, e := range es {
		out[i] = DeadLetter{MessageID: e.MessageID, SessionID: e.SessionID, Reason: e.Reason, DeliveryCount: e.DeliveryCount}
	}
	return out
}

// deadLetterStore is the dead-letter store the run's sweeper drains into.
func (r *run) deadLetterStore() dlstore.Store {
	return dltable.New(r.env.Tables, r.table+"d", nil)
}

func stringProp(props map[string]any, key string) string {
	s, _ := props[key].(string)
	return s
}

// Tail returns the last n lines of out, each cut to at most width bytes.
func Tail(out []byte, n, width int) string {
	text := strings.TrimRight(string(out), "\n")
	if text == "" {
		return ""
	}
	lines := strings.Split(text, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > width {
			lines[i] = l[:width] + "..."
		}
	}
	return strings.Join(lines, "\n")
}
