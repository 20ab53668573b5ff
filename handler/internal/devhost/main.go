package devhost

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"orderstatus/handler/internal/devhost/scenario"
)

// Exit codes of Main.
const (
	ExitOK      = 0 // done; with --exit-when-idle: every invariant holds
	ExitFailure = 1 // an invariant does not hold, or a runtime error
	ExitUsage   = 2 // a bad flag or scenario line
)

// DemoTimeScale is the built-in demo's default clock scale: its 30 minute
// payment timeouts fire after 15 s.
const DemoTimeScale = 120

const usageLine = "usage: handler dev [--app-root DIR] [--scenario FILE] [--exit-when-idle] [--summary-json FILE] " +
	"[--seed N] [--orders N] [--time-scale F] [--lock-duration D] [--max-delivery N] [--http-addr ADDR] " +
	"[--handler-log FILE] [--quiet]"

type config struct {
	appRoot      string
	scenario     string
	exitWhenIdle bool
	summaryJSON  string
	seed         uint64
	orders       int
	timeScale    float64
	scaleSet     bool
	lockDuration time.Duration
	maxDelivery  int
	httpAddr     string
	handlerLog   string
	quiet        bool
}

// parseFlags returns the configuration, or an exit code >= 0 to return.
func parseFlags(args []string, stdout, stderr io.Writer) (config, int) {
	var c config
	fs := flag.NewFlagSet("handler dev", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.appRoot, "app-root", ".", "`dir`ectory with host.json and the function folders")
	fs.StringVar(&c.scenario, "scenario", "", "JSON Lines `file` with the workload (default: the built-in demo)")
	fs.BoolVar(&c.exitWhenIdle, "exit-when-idle", false, "when the queues are drained, fire each timer once, drain again, print the summary and exit (1 if an invariant does not hold)")
	fs.StringVar(&c.summaryJSON, "summary-json", "", "write the summary as JSON to `file`")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the built-in demo")
	fs.IntVar(&c.orders, "orders", 300, "orders in the built-in demo")
	fs.Float64Var(&c.timeScale, "time-scale", 0, fmt.Sprintf("run the broker clock this many times faster (default 1, or %d for the built-in demo)", DemoTimeScale))
	fs.DurationVar(&c.lockDuration, "lock-duration", 0, "queue lock duration (default 1m)")
	fs.IntVar(&c.maxDelivery, "max-delivery", 0, "queue max delivery count (default 5)")
	fs.StringVar(&c.httpAddr, "http-addr", DefaultHTTPAddr, "`address` of the HTTP front (GetOrder, Metrics)")
	fs.StringVar(&c.handlerLog, "handler-log", "", "append the handler's output to `file` instead of passing it through")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress lines, only warnings and the summary")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, usageLine)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return c, ExitOK
		}
		fmt.Fprintf(stderr, "handler dev: %v (%s)\n", err, usageLine)
		return c, ExitUsage
	}
	fs.Visit(func(f *flag.Flag) { c.scaleSet = c.scaleSet || f.Name == "time-scale" })
	bad := func(format string, args ...any) (config, int) {
		fmt.Fprintf(stderr, "handler dev: "+format+" (%s)\n", append(args, usageLine)...)
		return c, ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case c.orders < 1:
		return bad("--orders %d: want at least 1", c.orders)
	case c.scaleSet && (!(c.timeScale > 0) || c.timeScale > 1e6):
		return bad("--time-scale %v: want a number above 0 and at most 1000000", c.timeScale)
	case c.lockDuration < 0:
		return bad("--lock-duration %s: want a positive duration", c.lockDuration)
	case c.maxDelivery < 0 || c.maxDelivery > 2000:
		return bad("--max-delivery %d: want 1 to 2000", c.maxDelivery)
	}
	switch {
	case c.scaleSet:
	case c.scenario == "":
		c.timeScale = DemoTimeScale
	default:
		c.timeScale = 1
	}
	return c, -1
}

// Main is the `handler dev` command; args are the arguments after "dev".
// It runs the workload (the built-in demo, or --scenario), shows progress,
// prints the summary, and then either exits (--exit-when-idle) or keeps
// serving the HTTP functions until ctx ends (Ctrl-C). Exit codes: ExitOK,
// ExitFailure (an invariant failed with --exit-when-idle, or a runtime
// error), ExitUsage (a bad flag or scenario line, one line on stderr).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The handler's output, the progress lines and the logs share the
	// two streams.
	stdout, stderr = &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	c, code := parseFlags(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "handler dev: %v\n", err)
		return ExitFailure
	}

	var lines []ScenarioLine
	workload := ""
	if c.scenario != "" {
		var err error
		if lines, err = scenario.ReadFile(c.scenario); err != nil {
			var le *scenario.LineError
			if errors.As(err, &le) {
				fmt.Fprintf(stderr, "handler dev: %v\n", err)
				return ExitUsage
			}
			return fail(err)
		}
		workload = fmt.Sprintf("scenario %s (%d messages)", c.scenario, len(lines))
	} else {
		lines = scenario.Demo(scenario.DemoOptions{Seed: c.seed, Orders: c.orders, Start: time.Now().UTC()})
		workload = fmt.Sprintf("built-in demo: %d orders, %d messages (seed %d)", c.orders, len(lines), c.seed)
	}

	// The host's own log: warnings and errors (a restarted handler, a
	// failed call); what it uses is printed below.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	handlerOut, handlerErr := io.Writer(stdout), io.Writer(stderr)
	if c.handlerLog != "" {
		if err := os.MkdirAll(filepath.Dir(c.handlerLog), 0o755); err != nil {
			return fail(err)
		}
		f, err := os.OpenFile(c.handlerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		w := &lockedWriter{w: f}
		handlerOut, handlerErr = w, w
	}

	h, err := New(Options{
		AppRoot:   c.appRoot,
		Queues:    QueueOverrides{LockDuration: c.lockDuration, MaxDeliveryCount: int32(c.maxDelivery)},
		TimeScale: c.timeScale,
		HTTPAddr:  c.httpAddr,
		Stdout:    handlerOut,
		Stderr:    handlerErr,
		Logger:    logger,
	})
	if err != nil {
		return fail(err)
	}
	say := func(format string, args ...any) {
		if !c.quiet {
			fmt.Fprintf(stdout, format+"\n", args...)
		}
	}
	say("handler dev: app %s, settings from %s", h.app.Root, h.SettingsSource())
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = h.Start(startCtx)
	cancel()
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	say("store: %s", h.StoreSource())
	say("broker: in memory, queues %s and %s (handler reaches it at %s)", h.Queue(), h.PoisonQueue(), h.BrokerURL())
	if c.handlerLog != "" {
		say("handler output: %s", c.handlerLog)
	}
	say("workload: %s", workload)
	if c.timeScale != 1 {
		say("time scale %g: the broker clock runs %g times faster; a 30 min payment timeout fires after %s",
			c.timeScale, c.timeScale, (time.Duration(float64(30*time.Minute) / c.timeScale)).Round(100*time.Millisecond))
	}
	if latest := latestDue(lines); latest > 0 {
		if real := time.Duration(float64(latest) / c.timeScale); real > time.Minute {
			say("note: the last scheduled message is due %s after it is sent (%s of real time); use --time-scale to run faster", latest, real.Round(time.Second))
		}
	}

	var progress sync.WaitGroup
	stopProgress := make(chan struct{})
	began := time.Now()
	if !c.quiet {
		progress.Add(1)
		go func() {
			defer progress.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-t.C:
					fmt.Fprintln(stdout, h.progressLine(time.Since(began), len(lines)))
				}
			}
		}()
	}
	finishProgress := func() {
		select {
		case <-stopProgress:
		default:
			close(stopProgress)
			progress.Wait()
		}
	}
	defer finishProgress()
	interrupted := func(err error) int {
		finishProgress()
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "handler dev: interrupted")
			if c.exitWhenIdle {
				return ExitFailure
			}
			return ExitOK
		}
		return fail(err)
	}

	if err := h.Play(ctx, lines); err != nil {
		return interrupted(err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		return interrupted(err)
	}
	if c.exitWhenIdle && len(h.timers) > 0 {
		say("queues drained; firing each timer function once: %s", strings.Join(h.TimerFunctions(), ", "))
		if err := h.FireTimers(ctx); err != nil {
			logger.Warn("a timer function failed", slog.Any("error", err))
		}
		if err := h.WaitIdle(ctx); err != nil {
			return interrupted(err)
		}
	}
	finishProgress()
	if !c.quiet {
		fmt.Fprintln(stdout, h.progressLine(time.Since(began), len(lines)))
	}
	s, err := h.Summary(ctx)
	if err != nil {
		return interrupted(err)
	}
	fmt.Fprintln(stdout)
	if err := s.WriteTable(stdout); err != nil {
		return fail(err)
	}
	if c.summaryJSON != "" {
		if err := s.WriteJSON(c.summaryJSON); err != nil {
			return fail(err)
		}
		say("summary written to %s", c.summaryJSON)
	}
	if c.exitWhenIdle {
		if len(s.Violations) > 0 {
			return ExitFailure
		}
		return ExitOK
	}
	if h.Addr() != "" {
		say("\nserving the HTTP functions until Ctrl-C:")
		for _, r := range h.routes {
			say("  %-10s http://%s/%s", r.fn, h.Addr(), strings.Join(r.segs, "/"))
		}
	}
	select {
	case <-ctx.Done():
		return ExitOK
	case <-h.HandlerDone():
		return fail(fmt.Errorf("the handler stopped: %v", h.HandlerErr()))
	}
}

// latestDue is the longest ScheduleAfter plus SendAfter of the workload.
func latestDue(lines []ScenarioLine) time.Duration {
	var d time.Duration
	for _, l := range lines {
		d = max(d, l.SendAfter+l.ScheduleAfter)
	}
	return d
}

// progressLine is one line of progress: messages sent, settled by result,
// and the workload queue's state.
func (h *Host) progressLine(elapsed time.Duration, total int) string {
	sent, results := h.stats.snapshot()
	keys := make([]string, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "[%5.1fs] sent %d/%d | settled:", elapsed.Seconds(), sent, total)
	if len(keys) == 0 {
		b.WriteString(" none")
	}
	for _, k := range keys {
		fmt.Fprintf(&b, " %s %d", k, results[k])
	}
	q := h.broker.Stats(h.queue)
	p := h.broker.Stats(h.poisonQueue)
	fmt.Fprintf(&b, " | active %d, locked %d, scheduled %d | DLQ %d | poison %d", q.Active, q.Locked, q.Scheduled, q.DeadLettered, p.Active+p.Locked)
	return b.String()
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
