package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/cpuprofile"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// oursRun is one run of the real system: bin/handler behind the dev host.
type oursRun struct {
	Elapsed  time.Duration
	Metrics  Scrape
	CPU      map[string]time.Duration // handler, devhost, azurite
	RSSIdle  int64                    // the handler's VmRSS before the load
	RSSAfter int64                    // and after it
}

// oursConfig is what one run of the real system varies.
type oursConfig struct {
	store      string // the handler's OrderStore__connectionString
	table      string
	sessions   int           // maxConcurrentSessions
	idle       time.Duration // sessionIdleTimeout; 0 keeps host.json's
	timeScale  float64       // the broker clock's speed
	profileDir string        // write devhost.pprof there, if set (Run creates it)
	// handlerProfile, if set, is the handler's ORDERSTATUS_CPU_PROFILE
	// prefix, in Options.ProfileDir: each handler process writes
	// <prefix>.<pid>.pprof on exit.
	handlerProfile string
	// instances is how many instances of the app start (0: one), each
	// with sessions slots.
	instances int
	// lock is the queues' lock duration in wall-clock time (0: one
	// minute, host.json's on the broker clock at the real speed).
	lock time.Duration
	// stdout receives every instance's handler output, both streams (the
	// handler writes warnings and failures, parked answers among them, to
	// stderr only); nil discards it.
	stdout io.Writer
	// logLevel replaces Options.LogLevel, if set.
	logLevel string
	// handler replaces bin/handler, if set (the limit through the host).
	handler string
	// settings are more app settings for the handler.
	settings map[string]string
	// outages are the dev host's OutageTargets.
	outages []string
	// clock, if set, is the host's clock instead of one at timeScale
	// (an outage run changes its speed while it runs).
	clock clock.Clock
	// reschedule runs the handler on its default retry policy
	// (ORDER_STATUS_RETRY_RESCHEDULE true): it then schedules each
	// order's PaymentTimeoutCheck itself when it applies the Created, one
	// more delivery per order, which runOurs waits for and checkSettled
	// counts. Without it the steady phases run today's policy.
	reschedule bool
}

// minWallBudget is the least in-call budget scaledRetry gives: a loaded
// Azurite answers no faster for a faster host clock.
const minWallBudget = 250 * time.Millisecond

// scaledRetry is the handler's retry settings for a host clock scale
// times faster than the wall clock: the defaults (production's) divided by
// scale, in the handler's real time, the budget at least minWallBudget.
// The handler knows nothing of the host's clock; its settings do.
func scaledRetry(scale float64) map[string]string {
	div := func(d, least time.Duration) string {
		return max(time.Duration(float64(d)/max(scale, 1)), least).String()
	}
	return map[string]string{
		config.EnvRetryBudget: div(config.DefaultRetryBudget, minWallBudget),
		config.EnvRetryBase:   div(config.DefaultRetryBase, time.Millisecond),
		config.EnvRetryCap:    div(config.DefaultRetryCap, time.Millisecond),
		config.EnvRetryWindow: div(config.DefaultRetryWindow, time.Millisecond),
	}
}

// startHost starts the dev host with the handler of the repository at
// root, its store on Azurite (through the fault proxy for the latency
// runs) and its timers stopped, so that only the workload runs.
func (b *runner) startHost(ctx context.Context, c oursConfig) (*devhost.Host, error) {
	scale := max(c.timeScale, 1)
	lock, level, handler := c.lock, c.logLevel, c.handler
	if lock <= 0 {
		lock = time.Minute
	}
	if level == "" {
		level = b.opts.LogLevel
	}
	if handler == "" {
		handler = b.handler
	}
	settings := map[string]string{
		devhost.SettingStoreConnection: c.store,
		devhost.SettingStoreServiceURI: "",
		"OrderStore__tableName":        c.table,
		"LOG_LEVEL":                    level,
		// Rescheduling off unless asked for: with it on, the handler
		// schedules a timeout check per order (one Service Bus
		// operation and one delivery each), which only runOurs (with
		// c.reschedule) and the phases that set the policy in
		// c.settings (cost, outage) model.
		config.EnvRetryReschedule: strconv.FormatBool(c.reschedule),
	}
	maps.Copy(settings, c.settings)
	if c.handlerProfile != "" {
		settings[cpuprofile.Env] = c.handlerProfile
	}
	h, err := devhost.New(devhost.Options{
		AppRoot:     b.opts.Root,
		HandlerPath: handler,
		HTTPAddr:    "127.0.0.1:0",
		TimeScale:   c.timeScale,
		Clock:       c.clock,
		// A faster clock must not shorten the lock or the messages'
		// lives in wall-clock time.
		Queues: devhost.QueueOverrides{
			LockDuration: time.Duration(scale * float64(lock)),
			TimeToLive:   time.Duration(scale * float64(24*time.Hour)),
		},
		Sessions:         devhost.SessionOverrides{MaxConcurrentSessions: c.sessions, SessionIdleTimeout: c.idle},
		Settings:         settings,
		OutageTargets:    c.outages,
		NoAzuriteInstall: true,
		Instances:        c.instances,
		Stdout:           c.stdout,
		Stderr:           c.stdout,
	})
	if err != nil {
		return nil, err
	}
	if err := h.Start(ctx); err != nil {
		return nil, err
	}
	h.StopTimers()
	return h, nil
}

// runOurs plays w through the real system and waits until it is handled:
// Elapsed is the time until every message of w was settled. With
// c.reschedule, the payment-timeout checks the handler schedules fall due
// 30 minutes on the broker clock after their Created, a fraction of a
// second at the throughput phases' speed: the broker holds them
// (membroker's HoldScheduled) until Elapsed is taken, as production's
// half hour keeps them out of the traffic that scheduled them, and they
// are handled after it, untimed, before the counts are checked. The
// schedule calls (one per Created) are inside the timed window.
func (b *runner) runOurs(ctx context.Context, c oursConfig, w Workload) (oursRun, error) {
	var r oursRun
	h, err := b.startHost(ctx, c)
	if err != nil {
		return r, err
	}
	defer h.Close()
	pid := h.HandlerPID()
	// Let the handler create its table and settle before measuring.
	if err := waitTable(ctx, "http://"+h.Addr()); err != nil {
		return r, err
	}
	if r.RSSIdle, err = RSS(pid); err != nil {
		return r, err
	}
	cpu, err := startCPU(map[string]int{"handler": pid, "devhost": 0, "azurite": b.az.PID()})
	if err != nil {
		return r, err
	}
	if c.profileDir != "" {
		f, err := os.Create(filepath.Join(c.profileDir, "devhost.pprof"))
		if err != nil {
			return r, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return r, err
		}
		defer pprof.StopCPUProfile()
	}
	lines := w.Lines()
	if c.reschedule {
		// The checks the handler schedules stay scheduled until the
		// timed window ends, as production's half hour keeps them out
		// of the traffic that created them; the schedule calls
		// themselves are timed.
		if err := h.Broker().HoldScheduled(h.Queue(), true); err != nil {
			return r, err
		}
	}
	start := time.Now()
	if err := h.Play(ctx, lines); err != nil {
		return r, err
	}
	// The host's WaitIdle waits for scheduled messages too: with the
	// checks held, the broker's (nothing visible, nothing locked: every
	// call answered and settled) ends the timed window.
	wait := h.WaitIdle
	if c.reschedule {
		wait = func(ctx context.Context) error { return h.Broker().WaitIdle(ctx, h.Queue()) }
	}
	if err := wait(ctx); err != nil {
		return r, err
	}
	r.Elapsed = time.Since(start)
	if r.CPU, err = cpu.since(); err != nil {
		return r, err
	}
	if r.RSSAfter, err = RSS(pid); err != nil {
		return r, err
	}
	if c.reschedule {
		if err := h.Broker().HoldScheduled(h.Queue(), false); err != nil {
			return r, err
		}
		if err := drainScheduled(ctx, h); err != nil {
			return r, err
		}
	}
	if r.Metrics, err = scrapeHandler(ctx, h); err != nil {
		return r, err
	}
	return r, checkSettled(r.Metrics, w, c.reschedule)
}

// drainScheduled waits until h's queue holds nothing scheduled and is
// idle (the handler's own payment-timeout checks delivered and settled),
// for at most 2 minutes of wall time.
func drainScheduled(ctx context.Context, h *devhost.Host) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := h.WaitIdle(ctx); err != nil {
			return err
		}
		if h.Broker().Quiet(h.Queue()) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %d messages still scheduled after 2 minutes", h.Broker().Stats(h.Queue()).Scheduled)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkSettled compares the handler's own counts with the workload's:
// its status changes settled exactly as the workload says, and, with
// checks (rescheduling on), the handler's own PaymentTimeoutChecks: at
// least one per order (each order's Created schedules one), at most one
// per schedule the handler counted (a redelivered Created schedules it
// again under the same MessageId, which duplicate detection may or may
// not drop), every one Stale (each order was paid long before its check
// fell due). Nothing else was settled.
func checkSettled(m Scrape, w Workload, checks bool) error {
	want := map[string]int{"Applied": w.Applied, "Duplicate": w.Duplicates, "Stale": w.Stales}
	total := 0
	for result, n := range want {
		got := int(m.Sum("orderstatus_messages_total", map[string]string{"subject": order.SubjectStatusChanged, "result": result}))
		total += got
		if got != n {
			return fmt.Errorf("bench: the handler settled %d status changes as %s, the workload has %d", got, result, n)
		}
	}
	if all := int(m.Sum("orderstatus_messages_total", map[string]string{"subject": order.SubjectStatusChanged})); all != total {
		return fmt.Errorf("bench: the handler settled %d status changes, %d of them neither Applied, Duplicate nor Stale", all, all-total)
	}
	timeout := map[string]string{"subject": order.SubjectPaymentTimeout}
	n := int(m.Sum("orderstatus_messages_total", timeout))
	stale := int(m.Sum("orderstatus_messages_total", map[string]string{"subject": order.SubjectPaymentTimeout, "result": string(order.Stale)}))
	scheduled := int(m.Sum("orderstatus_timeout_checks_total", map[string]string{"outcome": "scheduled"}))
	switch {
	case !checks && n+scheduled > 0:
		return fmt.Errorf("bench: rescheduling off, yet the handler scheduled %d payment-timeout checks and settled %d", scheduled, n)
	case checks && (n < len(w.Orders) || n > scheduled):
		return fmt.Errorf("bench: the handler settled %d payment-timeout checks for %d orders, having scheduled %d: want one per order at least, and no more than it scheduled",
			n, len(w.Orders), scheduled)
	case stale != n:
		return fmt.Errorf("bench: %d of %d payment-timeout checks settled other than Stale, for orders paid long before", n-stale, n)
	}
	if all := int(m.Sum("orderstatus_messages_total", nil)); all != total+n {
		return fmt.Errorf("bench: the handler settled %d messages, %d of them neither a status change nor a payment-timeout check", all, all-total-n)
	}
	return nil
}

// waitTable waits until the handler answers GetOrder for a missing order
// with 404, which it does once its table exists.
func waitTable(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, err := httpStatus(ctx, base+"/api/orders/bench-warmup")
		if err == nil && status == 404 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the handler's table is not ready: status %d, %v", status, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SlotRow is one row of the session-slot table.
type SlotRow struct {
	Sessions  int
	Idle      time.Duration
	Messages  int
	MsgsPerS  float64
	IdleShare float64 // share of slot time not spent in a handler call
	P99Delay  time.Duration
}

// runSlots measures the session-slot regime for one setting: a backlog of
// rounds*sessions orders with one available message each (as when an
// order's messages arrive minutes apart), on the real clock. Each slot
// handles its session's message, waits sessionIdleTimeout for another,
// and only then takes the next session. The run ends when the last
// session is closed, so every slot's cycle (call plus idle wait) counts.
func (b *runner) runSlots(ctx context.Context, c oursConfig, rounds int, prefix string) (SlotRow, error) {
	row := SlotRow{Sessions: c.sessions, Idle: c.idle}
	h, err := b.startHost(ctx, c)
	if err != nil {
		return row, err
	}
	defer h.Close()
	if err := waitTable(ctx, "http://"+h.Addr()); err != nil {
		return row, err
	}
	w := FirstOnly(prefix, rounds*c.sessions)
	row.Messages = w.Messages()
	var done []time.Duration // when the i-th message was completed, from the start
	start := time.Now()
	if err := h.Play(ctx, w.Lines()); err != nil {
		return row, err
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		s := h.Broker().Stats(h.Queue())
		at := time.Since(start)
		for completed := row.Messages - s.Active - s.Locked; len(done) < completed; {
			done = append(done, at)
		}
		if s.Active == 0 && s.Locked == 0 && s.LockedSessions == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return row, ctx.Err()
		case <-h.HandlerDone():
			return row, fmt.Errorf("bench: the handler stopped: %v", h.HandlerErr())
		case <-tick.C:
		}
	}
	elapsed := time.Since(start)
	m, err := scrapeHandler(ctx, h)
	if err != nil {
		return row, err
	}
	if err := checkSettled(m, w, c.reschedule); err != nil {
		return row, err
	}
	busy := m.Sum("orderstatus_handler_duration_seconds_sum", nil)
	row.MsgsPerS = float64(row.Messages) / elapsed.Seconds()
	row.IdleShare = math.Max(0, 1-busy/(float64(c.sessions)*elapsed.Seconds()))
	sort.Slice(done, func(i, j int) bool { return done[i] < done[j] })
	row.P99Delay = done[max(0, int(math.Ceil(0.99*float64(len(done))))-1)]
	return row, nil
}
