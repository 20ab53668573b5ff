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
	// handlerProfile, if set, is the handler's ORDERSTATUS_CPU_PROFILE prefix.
	handlerProfile string
	// instances is how many instances of the app start (0: one).
	instances int
	// lock is the queues' lock duration in wall-clock time (0: one minute).
	lock time.Duration
	// stdout receives both streams of every instance's handler; nil discards.
	stdout io.Writer
	// logLevel replaces Options.LogLevel, if set.
	logLevel string
	// handler replaces bin/handler, if set (the limit through the host).
	handler string
	// settings are more app settings for the handler.
	settings map[string]string
	// outages are the dev host's OutageTargets.
	outages []string
	// clock, if set, is the host's clock instead of one at timeScale.
	clock clock.Clock
	// reschedule runs the default retry policy (the handler schedules checks).
	reschedule bool
}

// minWallBudget is the least in-call budget scaledRetry gives.
const minWallBudget = 250 * time.Millisecond

// scaledRetry is production's retry settings divided by scale, the budget at least minWallBudget.
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

// startHost starts the dev host with the handler, store cs and timers
// stopped, and waits for the handler's table.
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
		// Rescheduling off unless asked for (runOurs, cost, outage model it).
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
		// A faster clock must not shorten the lock or TTL in wall-clock time.
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
	if err := waitTable(ctx, "http://"+h.Addr()); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// runOurs plays w through the real system; Elapsed is until every message
// settled, the handler's own checks held (HoldScheduled) and handled after.
func (b *runner) runOurs(ctx context.Context, c oursConfig, w Workload) (oursRun, error) {
	var r oursRun
	h, err := b.startHost(ctx, c)
	if err != nil {
		return r, err
	}
	defer h.Close()
	pid := h.HandlerPID()
	if r.RSSIdle, err = RSS(pid); err != nil {
		return r, err
	}
	pids := map[string]int{"handler": pid, "devhost": 0, "azurite": b.az.PID()}
	cpu0, err := cpuTimes(pids)
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
		// Hold the handler's checks until the timed window ends.
		if err := h.Broker().HoldScheduled(h.Queue(), true); err != nil {
			return r, err
		}
	}
	start := time.Now()
	if err := h.Play(ctx, lines); err != nil {
		return r, err
	}
	// With the checks held, the broker's WaitIdle ends the timed window.
	wait := h.WaitIdle
	if c.reschedule {
		wait = func(ctx context.Context) error { return h.Broker().WaitIdle(ctx, h.Queue()) }
	}
	if err := wait(ctx); err != nil {
		return r, err
	}
	r.Elapsed = time.Since(start)
	if r.CPU, err = cpuTimes(pids); err != nil {
		return r, err
	}
	for p, d := range cpu0 {
		r.CPU[p] -= d
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

// drainScheduled waits, at most 2 minutes, until nothing is scheduled and h is idle.
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

// checkSettled compares the handler's counts with the workload's: the
// status changes exactly; with checks, Stale PaymentTimeoutChecks, at least
// one per order and at most one per schedule. Nothing else was settled.
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

// waitTable waits until the handler answers GetOrder with 404: its table exists.
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

// runSlots measures the session-slot regime for one setting on the real
// clock, until the last session is closed.
func (b *runner) runSlots(ctx context.Context, c oursConfig, rounds int, prefix string) (SlotRow, error) {
	row := SlotRow{Sessions: c.sessions, Idle: c.idle}
	h, err := b.startHost(ctx, c)
	if err != nil {
		return row, err
	}
	defer h.Close()
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
	row.P99Delay = done[max(0, int(math.Ceil(0.99*float64(len(done))))-1)] // done is in time order
	return row, nil
}
