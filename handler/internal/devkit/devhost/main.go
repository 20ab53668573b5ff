package devhost

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/cli/clihelp"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// Exit codes of Main.
const (
	ExitOK      = 0 // done; with --exit-when-idle: every invariant holds
	ExitFailure = 1 // an invariant does not hold, or a runtime error
	ExitUsage   = 2 // a bad flag or scenario line
)

// The queue settings Service Bus accepts (--lock-duration, --max-delivery).
const (
	MinLockDuration       = 5 * time.Second
	MaxLockDuration       = 5 * time.Minute
	MaxDeliveryCountLimit = 2000
)

// checkAddr reports why addr is not a host:port to listen on.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port, such as 127.0.0.1:7071")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// checkWritable reports why a file cannot be written at path, before a run;
// it creates and removes a temporary file.
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return errors.New("is a directory")
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("folder %s does not exist", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	f, err := os.CreateTemp(dir, ".summary-check-*")
	if err != nil {
		return fmt.Errorf("folder %s is not writable", dir)
	}
	f.Close()
	return os.Remove(f.Name())
}

// usageLine ends every usage error.
const usageLine = "usage: orderstatus-dev dev [flags]; orderstatus-dev dev --help lists them"

// helpIntro and helpExit frame the flags in `orderstatus-dev dev --help`.
const (
	helpIntro = `usage: orderstatus-dev dev [flags]

Runs the whole system on this machine, as the Functions host runs it in
Azure: reads host.json, functions/*/function.json and the settings
(local.settings.json, else the template, then the environment), starts
bin/handler, backs it with an in-memory Service Bus and Azurite (started on
a free port unless an OrderStore__* setting names a store), plays a
workload (the built-in demo, or --scenario), prints a summary, and serves
the HTTP functions on the front until Ctrl-C (or exits, --exit-when-idle).
The scenario format is in docs/dev-host.md, the message contract in
docs/messages.md.

flags:
`
	helpExit = `
exit codes: 0 done (with --exit-when-idle: every invariant holds);
1 an invariant does not hold, or a runtime failure (the store or the
handler died); 2 a bad flag, a --summary-json path that cannot be
written, a missing scenario file or a bad scenario line (one line on
stderr says what).
`
)

// printHelp writes `orderstatus-dev dev --help`.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	io.WriteString(w, helpIntro)
	clihelp.Flags(w, fs)
	io.WriteString(w, helpExit)
}

type config struct {
	appRoot      string
	scenario     string
	exitWhenIdle bool
	summaryJSON  string
	seed         uint64
	orders       int
	timeScale    float64
	lockDuration time.Duration
	maxDelivery  int
	httpAddr     string
	httpAddrSet  bool
	handlerLog   string
	handler      string
	quiet        bool
	instances    InstanceCounts
	scale        []ScenarioLine
	outages      []ScenarioLine
}

// parseFlags returns the configuration, or an exit code >= 0 to return.
// defaultHTTPAddr is --http-addr's default.
func parseFlags(args []string, stdout, stderr io.Writer, defaultHTTPAddr string) (config, int) {
	var c config
	fs := flag.NewFlagSet("orderstatus-dev dev", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.appRoot, "app-root", ".", "`dir`ectory with host.json and the function folders")
	fs.StringVar(&c.scenario, "scenario", "", "JSON Lines `file` with the workload, one message a line, sent in order (default: the built-in demo)")
	fs.BoolVar(&c.exitWhenIdle, "exit-when-idle", false, "when the queues are drained, fire each timer once, drain again, print the summary and exit (1 if an invariant does not hold); idle time, such as the wait for a scheduled message, is skipped")
	fs.StringVar(&c.summaryJSON, "summary-json", "", "write the summary as JSON to `file`")
	fs.Uint64Var(&c.seed, "seed", 1, "seed `N` of the built-in demo: the same seed, the same messages")
	fs.IntVar(&c.orders, "orders", 300, "`N` orders in the built-in demo (3 to 5 events each, with duplicates, reordering, poison and unpaid orders)")
	fs.Float64Var(&c.timeScale, "time-scale", 0, fmt.Sprintf("run the broker clock `X` times faster, up to %d (default 1: real time)", MaxTimeScale))
	fs.DurationVar(&c.lockDuration, "lock-duration", 0, "queue lock duration `D`, 5s to 5m as in Service Bus (default 1m, as deployed)")
	fs.IntVar(&c.maxDelivery, "max-delivery", 0, "queue max delivery count `N`, 1 to 2000 as in Service Bus (default 5, as deployed)")
	fs.StringVar(&c.httpAddr, "http-addr", defaultHTTPAddr, "`addr`ess of the HTTP front (GetOrder, Metrics); with --exit-when-idle and no --http-addr, a free port when the default is in use")
	fs.StringVar(&c.handler, "handler", "", "the handler `binary` each instance runs with host.json's arguments (default: host.json's defaultExecutablePath; orderstatus-dev dev passes itself)")
	fs.StringVar(&c.handlerLog, "handler-log", "", "write the handler's output to `file`, started afresh (default: standard error); when a host already running in the app root writes that file, this run writes FILE-<pid> instead")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress lines: only the HTTP front's address, warnings, failures and the summary")
	instancesFlag := fs.String("instances", "1", fmt.Sprintf("`N` instances of OrderStatus (the function on the workload queue) at the start, or GROUP=N pairs such as OrderStatus=3,http=2: Flex Consumption scales each non-HTTP function on instances of its own and all HTTP functions together (groups http, OrderStatus, DeadLetterSweeper), each instance its own handler process, cache and session slots; a group not named runs one (1 to %d each)", MaxInstances))
	scaleFlag := fs.String("scale", "", "scale `events` during the run, comma-separated ACTION[:TARGET]@AFTER, such as add@2m,add:DeadLetterSweeper@3m,remove:2@4m,kill:OrderStatus-1@6m (TARGET a group, an instance id, or a number of an OrderStatus instance; default OrderStatus, its newest; AFTER on the host's clock since the workload started, like sendAfter); checked before the run")
	outageFlag := fs.String("outage", "", "make Table Storage or the handler's own Service Bus calls (parking, rescheduling) unreachable from the handler for a while, comma-separated TARGET@AFTER+DURATION: table@2m+30m, servicebus@1m+5m (every request refused; AFTER on the host's clock since the workload started; the trigger keeps delivering)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, fs)
			return c, ExitOK
		}
		fmt.Fprintf(stderr, "orderstatus-dev dev: %v (%s)\n", err, usageLine)
		return c, ExitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.httpAddrSet = set["http-addr"]
	bad := func(format string, args ...any) (config, int) {
		fmt.Fprintf(stderr, "orderstatus-dev dev: "+format+" (%s)\n", append(args, usageLine)...)
		return c, ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case c.orders < 1:
		return bad("--orders %d: want at least 1", c.orders)
	case set["time-scale"] && (!(c.timeScale > 0) || c.timeScale > MaxTimeScale):
		return bad("--time-scale %v: want a number above 0 and at most %d", c.timeScale, MaxTimeScale)
	case set["lock-duration"] && (c.lockDuration < MinLockDuration || c.lockDuration > MaxLockDuration):
		return bad("--lock-duration %s: Service Bus allows %s to %s", c.lockDuration, wording.Duration(MinLockDuration), wording.Duration(MaxLockDuration))
	case set["max-delivery"] && (c.maxDelivery < 1 || c.maxDelivery > MaxDeliveryCountLimit):
		return bad("--max-delivery %d: Service Bus allows 1 to %d", c.maxDelivery, MaxDeliveryCountLimit)
	}
	var err error
	if c.instances, err = ParseInstances(*instancesFlag); err != nil {
		return bad("--instances %v", err)
	}
	if *scaleFlag != "" {
		if c.scale, err = ParseScale(*scaleFlag); err != nil {
			return bad("--scale: %v", err)
		}
	}
	if *outageFlag != "" {
		if c.outages, err = scenario.ParseOutages(*outageFlag); err != nil {
			return bad("--outage: %v", err)
		}
	}
	if err := checkAddr(c.httpAddr); err != nil {
		return bad("--http-addr %s: %v", c.httpAddr, err)
	}
	if c.summaryJSON != "" {
		if err := checkWritable(c.summaryJSON); err != nil {
			return bad("--summary-json %s: %v", c.summaryJSON, err)
		}
	}
	if !set["time-scale"] {
		c.timeScale = 1
	}
	return c, -1
}

// Main is the `orderstatus-dev dev` command; args are the arguments after "dev".
// It plays the workload, prints the summary, then exits (--exit-when-idle, the
// clock fast-forwarded over idle stretches) or serves the HTTP functions until
// ctx ends. It returns ExitOK, ExitFailure or ExitUsage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, os.Environ(), stdout, stderr, DefaultHTTPAddr)
}

// run is Main with the environment the settings are read from and
// --http-addr's default as parameters.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer, defaultHTTPAddr string) int {
	// The handler's output, the progress lines and the logs share two streams.
	stdout, stderr = logging.Locked(stdout), logging.Locked(stderr)
	c, code := parseFlags(args, stdout, stderr, defaultHTTPAddr)
	if code >= 0 {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "orderstatus-dev dev: %v\n", err)
		return ExitFailure
	}
	// note: warnings and failures (stderr); say: progress (stdout, not with --quiet).
	note := func(format string, args ...any) {
		fmt.Fprintf(stderr, "orderstatus-dev dev: "+format+"\n", args...)
	}
	say := func(format string, args ...any) {
		if !c.quiet {
			fmt.Fprintf(stdout, format+"\n", args...)
		}
	}

	var lines []ScenarioLine
	workload := ""
	if c.scenario != "" {
		var err error
		// Warnings only for a file that is sent.
		var warnings []string
		warn := func(msg string) { warnings = append(warnings, msg) }
		if lines, err = scenario.ReadFile(c.scenario, &scenario.Options{Warn: warn}); err != nil {
			fmt.Fprintf(stderr, "orderstatus-dev dev: %v\n", err)
			return ExitUsage
		}
		for _, w := range warnings {
			note("warning: %s", w)
		}
		workload = fmt.Sprintf("scenario %s (%s)", c.scenario, wording.Count(messages(lines), "message"))
	} else {
		// The wall clock, so that no occurredAt is later than its updatedAt.
		lines = scenario.Demo(scenario.DemoOptions{Seed: c.seed, Orders: c.orders, Now: time.Now().UTC()})
		workload = fmt.Sprintf("built-in demo: %s, %s (seed %d)", wording.Count(c.orders, "order"), wording.Count(len(lines), "message"), c.seed)
	}
	if _, err := os.Stat(filepath.Join(c.appRoot, "host.json")); err != nil {
		fmt.Fprintf(stderr, "orderstatus-dev dev: --app-root %s: no host.json there (run from the repository root, or name it) (%s)\n", c.appRoot, usageLine)
		return ExitUsage
	}
	lines = mergeScale(mergeScale(lines, c.scale), c.outages)
	total := messages(lines)

	// One serving host owns an app root's .run/devhost.json, which the CLIs find;
	// a second --exit-when-idle run runs unannounced, with its own handler log.
	owner, second := devrun.Running(c.appRoot)
	if second && !c.exitWhenIdle {
		front := ""
		if owner.HTTPAddr != "" {
			front = ", HTTP front http://" + owner.HTTPAddr
		}
		fmt.Fprintf(stderr, "orderstatus-dev dev: a development host is running in %s already (pid %d%s): stop it first (Ctrl-C in its terminal), or add --exit-when-idle to run a workload next to it\n",
			c.appRoot, owner.PID, front)
		return ExitFailure
	}
	if second && c.handlerLog != "" && sameFile(c.handlerLog, owner.HandlerLog) {
		c.handlerLog = withPID(c.handlerLog, os.Getpid())
	}

	// stdout holds the progress and the summary; the logs go to stderr.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	handlerOut := io.Writer(stderr)
	if c.handlerLog != "" {
		if err := os.MkdirAll(filepath.Dir(c.handlerLog), 0o755); err != nil {
			return fail(err)
		}
		f, err := os.OpenFile(c.handlerLog, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		handlerOut = logging.Locked(f)
	}

	var h *Host
	opts := Options{
		AppRoot:        c.appRoot,
		Env:            environ,
		HandlerPath:    c.handler,
		Queues:         QueueOverrides{LockDuration: c.lockDuration, MaxDeliveryCount: int32(c.maxDelivery)},
		TimeScale:      c.timeScale,
		HTTPAddr:       c.httpAddr,
		Stdout:         handlerOut,
		Stderr:         handlerOut,
		Logger:         logger,
		FastForward:    c.exitWhenIdle,
		Instances:      c.instances.Default,
		GroupInstances: c.instances.ByGroup,
		OutageTargets:  OutageTargets(lines),
		OnOutage: func(target string, d time.Duration, err error) {
			if err != nil {
				note("outage %s: %v", target, err)
				return
			}
			note("outage: %s unreachable from the handler for %s (host clock)", target, wording.Duration(d))
		},
		OnScale: func(action, id string, err error) {
			if err != nil {
				note("scale %s: %v", action, err)
				return
			}
			note("scale %s: %s; running: %s", action, id, strings.Join(h.RunningInstances(), ", "))
		},
	}
	if c.exitWhenIdle {
		if !c.httpAddrSet {
			opts.FallbackHTTPAddr = "127.0.0.1:0" // a second run next to `make run` still works
		}
		opts.OnFastForward = func(by time.Duration, to string) {
			// Small steps are not worth a line.
			if to != JumpIdleSessions && time.Duration(float64(by)/c.timeScale) >= time.Second {
				say("idle: fast-forwarded the clock %s %s", wording.Duration(by), to)
			}
		}
	}
	h, err := New(opts)
	if err != nil {
		return fail(err)
	}
	// Check the scale events against the app's groups before anything starts.
	if err := h.CheckScale(lines); err != nil {
		fmt.Fprintf(stderr, "orderstatus-dev dev: %v (%s)\n", err, usageLine)
		return ExitUsage
	}
	say("orderstatus-dev dev: app %s, settings from %s", h.app.Root, h.app.SettingsSource)
	for _, d := range h.DisabledFunctions() {
		note("warning: function %s is disabled by %s: it is not invoked", d.Name, d.By)
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = h.Start(startCtx)
	cancel()
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	// stopped ends a run cut short by a signal, naming what is left running.
	var unannounce func()
	var stopOnce sync.Once
	stopped := func() {
		stopOnce.Do(func() {
			children := h.Processes()
			if unannounce != nil {
				unannounce()
			}
			h.Close()
			fmt.Fprintln(stdout, closingLine(children, c.appRoot))
		})
	}
	if addr := h.Addr(); addr != "" {
		if addr != c.httpAddr && opts.FallbackHTTPAddr != "" {
			note("warning: %s is in use; the HTTP front is on http://%s instead", c.httpAddr, addr)
		}
		// Where the functions are served: printed even with --quiet.
		fmt.Fprintf(stdout, "orderstatus-dev dev: HTTP front on http://%s\n", addr)
	}
	// `orderstatus deadletters` and `orderstatus publish` find this host here.
	ep := h.Endpoints()
	ep.StartedAt = time.Now().UTC()
	if c.handlerLog != "" {
		ep.HandlerLog, _ = filepath.Abs(c.handlerLog)
	}
	var re *devrun.RunningError
	switch remove, err := devrun.Write(h.app.Root, ep); {
	case errors.As(err, &re) && !c.exitWhenIdle: // another host started meanwhile
		return fail(fmt.Errorf("%v: stop it first, or add --exit-when-idle", err))
	case errors.As(err, &re):
		say("not announced to the CLIs: pid %d owns %s; they keep talking to it", re.Owner.PID, re.Path)
	case err != nil:
		note("warning: the CLI will not find this host: %v", err)
	default:
		unannounce = remove
		defer remove()
	}
	say("store: %s", h.storeSource)
	switch line, ok := h.StoreTables(); {
	case ok:
		say("store %s", line)
	case line != "":
		note("warning: %s", line)
	}
	say("broker: in memory, queues %s and %s (handler reaches it at %s)", h.Queue(), h.PoisonQueue(), h.BrokerURL())
	if c.handlerLog != "" {
		say("handler output: %s", c.handlerLog)
	}
	if groups := h.Groups(); len(groups) > 0 {
		say("%s", instancesLine(h.RunningInstances(), h.app.Host.ServiceBus.MaxConcurrentSessions, groups[0]))
	}
	say("workload: %s", workload)
	if c.timeScale != 1 {
		say("time scale %g: the broker clock runs %g times faster for the whole run; a message scheduled 30 min ahead comes after %s",
			c.timeScale, c.timeScale, (time.Duration(float64(30*time.Minute) / c.timeScale)).Round(100*time.Millisecond))
	}
	if c.exitWhenIdle {
		say("idle stretches are fast-forwarded: the clock jumps to the next scheduled message when nothing else runs")
	} else if latest := latestDue(lines); latest > 0 {
		if real := time.Duration(float64(latest) / c.timeScale); real > time.Minute {
			note("the last scheduled message is due %s after it is sent (%s of real time); use --time-scale to run faster, or --exit-when-idle to skip idle time",
				latest, real.Round(time.Second))
		}
	}

	var progress sync.WaitGroup
	progressCtx, stopProgress := context.WithCancel(context.Background())
	began := time.Now()
	printer := &progressPrinter{w: stdout}
	if !c.quiet {
		progress.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-progressCtx.Done():
					return
				case <-t.C:
					printer.print(h.progress(time.Since(began), total))
				}
			}
		})
	}
	finishProgress := func() {
		stopProgress()
		progress.Wait()
	}
	defer finishProgress()
	interrupted := func(err error) int {
		finishProgress()
		if ctx.Err() != nil {
			stopped()
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
		// No scheduled timer run may overlap the final drain and the summary.
		h.StopTimers()
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
		printer.print(h.progress(time.Since(began), total))
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
	if line := clockLine(h.Clock().Now(), time.Now(), c.timeScale); line != "" {
		say("%s", line)
	}
	if h.Addr() != "" {
		say("\nserving the HTTP functions until Ctrl-C:")
		for _, r := range h.routes {
			say("  %-10s http://%s/%s", r.fn, h.Addr(), strings.Join(r.segs, "/"))
		}
	}
	select {
	case <-ctx.Done():
		stopped()
		return ExitOK
	case <-h.HandlerDone():
		return fail(fmt.Errorf("the handler stopped: %v", h.HandlerErr()))
	case <-h.StoreDone():
		return fail(h.storeErr())
	}
}

// clockLine says where the broker's clock, which keeps its scale while the
// host serves, stands against the wall clock; "" on real time.
func clockLine(broker, wall time.Time, scale float64) string {
	if scale == 1 {
		return ""
	}
	return fmt.Sprintf("clock: the broker's clock says %s, %s ahead of your watch (%s), and keeps running %g times faster: the due times, enqueued times and ages the CLIs show for this host are on it (--time-scale 1 keeps the two together)",
		broker.UTC().Format("15:04:05Z"), wording.Duration(broker.Sub(wall)), wall.UTC().Format("15:04:05Z"), scale)
}

// closingLine says that a run cut short stopped, what it stopped and what still runs.
func closingLine(children []ChildProcess, appRoot string) string {
	var stoppedNames, left []string
	for _, c := range children {
		name := fmt.Sprintf("%s (pid %d)", c.Name, c.PID)
		if err := syscall.Kill(c.PID, 0); err == nil || errors.Is(err, syscall.EPERM) {
			left = append(left, name)
		} else {
			stoppedNames = append(stoppedNames, name)
		}
	}
	what := "nothing was running"
	if len(stoppedNames) > 0 {
		what = "stopped " + strings.Join(stoppedNames, ", ")
	}
	if len(left) > 0 {
		kill := "kill them by their pids"
		if len(left) == 1 {
			kill = "kill it by its pid"
		}
		return fmt.Sprintf("orderstatus-dev dev: interrupted: %s; STILL RUNNING: %s (%s)", what, strings.Join(left, ", "), kill)
	}
	file := ""
	if _, err := os.Stat(devrun.Path(appRoot)); errors.Is(err, os.ErrNotExist) {
		file = ", and " + filepath.Join(devrun.Dir, devrun.File) + " is gone"
	}
	return fmt.Sprintf("orderstatus-dev dev: interrupted: %s%s; nothing is left running", what, file)
}

// sameFile reports whether paths a and b name the same file.
func sameFile(a, b string) bool {
	if b == "" {
		return false
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	absA, _ := filepath.Abs(a)
	absB, _ := filepath.Abs(b)
	return absA == absB
}

// withPID returns path with pid before its extension (handler-4242.log).
func withPID(path string, pid int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(path, ext), pid, ext)
}

// latestDue is the longest ScheduleAfter plus SendAfter of the workload.
func latestDue(lines []ScenarioLine) time.Duration {
	var d time.Duration
	for _, l := range lines {
		d = max(d, l.SendAfter+l.ScheduleAfter)
	}
	return d
}

// instancesLine names the running instances and the default group's session slots.
func instancesLine(ids []string, slots int, group string) string {
	return fmt.Sprintf("instances: %s (per function, as Flex Consumption scales: each its own handler process and cache; %s on each %s instance; the HTTP front reaches the http group)",
		strings.Join(ids, ", "), wording.Count(slots, "session slot"), group)
}
