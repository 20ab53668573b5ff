// Package devhost is the development host behind `orderstatus-dev dev`: it
// runs the real custom handler as the Azure Functions host does, on an
// in-memory broker with Service Bus semantics (membroker) and Azurite for
// Table Storage. It emulates session-enabled serviceBusTrigger functions
// (maxConcurrentSessions workers POST /<Function> with each message encoded
// by hostenc; 2xx completes, anything else abandons; locks are renewed up to
// maxAutoLockRenewalDuration), timerTrigger on NCRONTAB schedules, httpTrigger
// forwarded from a front on 127.0.0.1:7071 (keys not checked, as with Core
// Tools), Flex Consumption's per-function instance groups, outages through
// fault proxies and the AzureWebJobs.<name>.Disabled kill switch. Main is the
// `orderstatus-dev dev` command; New and the Host methods are the library the
// simulation tests and the bench drive.
package devhost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	hcfg "github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/funcapp"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/ncrontab"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
)

// ScenarioLine is one message of a workload (see package scenario).
type ScenarioLine = scenario.Line

// Settings the development host reads or sets.
const (
	SettingQueue             = "ORDER_STATUS_QUEUE"
	SettingPoisonQueue       = "POISON_QUEUE"
	SettingStoreConnection   = "OrderStore__connectionString"
	SettingStoreServiceURI   = "OrderStore__serviceUri"
	SettingDevBrokerURL      = "ORDERSTATUS_DEV_BROKER_URL"
	SettingAppRootPath       = "FUNCTIONS_APP_ROOT_PATH"
	DefaultQueue             = "order-status"
	DefaultPoisonQueue       = "order-status-poison"
	DefaultHTTPAddr          = "127.0.0.1:7071"
	defaultServiceBusConnKey = "AzureWebJobsServiceBus" // the extension's default connection name
)

// PoisonQueueTTL is the poison queue's message time-to-live (the Bicep's).
const PoisonQueueTTL = 14 * 24 * time.Hour

// MaxTimeScale bounds Options.TimeScale, so that the clock cannot overflow time.Duration.
const MaxTimeScale = 10000

// What a fast-forward jumped to (see Options.OnFastForward).
const (
	JumpScheduled    = "to the next scheduled message"
	JumpSendAfter    = "to the next line held by sendAfter"
	JumpIdleSessions = "to let idle sessions close"
	JumpLockExpiry   = "to let a killed instance's session locks run out"
)

// advancer is a clock that can be moved forward (clock.ScaledClock).
type advancer interface {
	AdvanceTo(t time.Time) time.Duration
}

var _ advancer = (*clock.ScaledClock)(nil)

// QueueOverrides change the queues' settings from the Bicep's; zero keeps a
// setting. The poison queue takes all but TimeToLive (PoisonQueueTTL).
type QueueOverrides struct {
	LockDuration     time.Duration
	MaxDeliveryCount int32
	TimeToLive       time.Duration
}

// SessionOverrides replace host.json's extensions.serviceBus session
// settings for one run; zero keeps a setting.
type SessionOverrides struct {
	MaxConcurrentSessions int
	SessionIdleTimeout    time.Duration
}

// Options configure New; the zero value runs the app in the working directory.
type Options struct {
	// AppRoot holds host.json and the function folders (default ".").
	AppRoot string
	// HandlerPath replaces host.json's defaultExecutablePath.
	HandlerPath string
	// Settings override the app settings; "" removes one.
	Settings map[string]string
	// Env is the environment settings are read from (nil: os.Environ()).
	Env []string
	// Queues override the queue settings.
	Queues QueueOverrides
	// Sessions override host.json's session settings.
	Sessions SessionOverrides
	// TimeScale > 1 runs the host's clock that many times faster (at most MaxTimeScale).
	TimeScale float64
	// Clock replaces the clock TimeScale makes; FastForward needs AdvanceTo.
	Clock clock.Clock
	// FastForward moves the clock ahead at once whenever the host only waits
	// for time to pass (in WaitIdle and Play); it suits one driver.
	FastForward bool
	// OnFastForward, if set, is called after each jump (to: a Jump* phrase).
	OnFastForward func(by time.Duration, to string)
	// HTTPAddr is the front's address (default 127.0.0.1:7071); "off": none.
	HTTPAddr string
	// FallbackHTTPAddr, if set, is listened on when HTTPAddr is in use.
	FallbackHTTPAddr string
	// Stdout and Stderr receive the handler's output; nil discards it.
	Stdout, Stderr io.Writer
	// Logger receives the host's own events; nil discards them.
	Logger *slog.Logger
	// DisableLockRenewal stops renewing session locks (tests).
	DisableLockRenewal bool
	// DrainTimeout is how long Close lets running calls finish (default 10 s).
	DrainTimeout time.Duration
	// NoAzuriteInstall stops the host from running `npm ci` in tools/.
	NoAzuriteInstall bool
	// Instances is the default group's starting instances (default 1, at most MaxInstances).
	Instances int
	// GroupInstances sets other groups' starting instances by key (default
	// 1); an unknown key fails Start with ErrUnknownGroup.
	GroupInstances map[string]int
	// OutageTargets are the targets (OutageTable, OutageServiceBus) the run
	// may make unreachable; a table outage needs the store on Azurite.
	OutageTargets []string
	// OnOutage, if set, is called after each outage line Play applies.
	OnOutage func(target string, d time.Duration, err error)
	// OnScale, if set, is called after each scale event Play applies.
	OnScale func(action, id string, err error)
}

// Host is a development host (New, Start, Close); safe for concurrent use.
type Host struct {
	opts   Options
	app    *funcapp.App
	log    *slog.Logger
	clock  clock.Clock
	broker *membroker.Broker
	rec    *recorder
	stats  *stats

	queue, poisonQueue string
	triggered          []string // queues with a Service Bus trigger, sorted
	maxDelivery        int32    // the triggered queues' max delivery count
	sessions           []*sessionDispatcher
	timers             []*timerDispatcher
	routes             []route
	groups             []*group      // in the order the app's functions come
	ff                 advancer      // nil unless FastForward
	idleStep           time.Duration // longest fast-forward while sessions are held
	idleSessions       *idleTracker
	outages            *outages
	playMu             sync.Mutex
	playStart          time.Time // when Play first began, on the host's clock

	// Set by Start.
	started     atomic.Bool
	storeSource string
	// storeConn or storeServiceURI: where the handler's store is.
	storeConn, storeServiceURI string
	// tablesLine and tablesOK: what ensureTables did (StoreTables).
	tablesLine string
	tablesOK   bool
	// deadLetterTable is the dead-letter store's table (for the summary).
	deadLetterTable    string
	az                 *azurite.Server
	brokerSrv          *http.Server
	brokerURL          string
	pool               *pool
	handlerPath        string
	handlerEnv         []string     // every instance's environment but its id
	client             *http.Client // the summary's reads
	acceptCtx, callCtx context.Context
	scaleMu            sync.Mutex // one removal or kill at a time
	frontLn            net.Listener
	front              *http.Server
	frontAddr          string
	stopAccept         context.CancelFunc // stops taking new work
	stopCalls          context.CancelFunc // aborts running calls
	stopTimers         context.CancelFunc // stops the timer schedules
	workers            sync.WaitGroup     // Service Bus dispatchers
	timerRuns          sync.WaitGroup     // timer schedules
	closing            atomic.Bool
	closeOnce          sync.Once
	closeErr           error
}

// New reads the app and prepares the host; it starts nothing.
func New(opts Options) (*Host, error) {
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 10 * time.Second
	}
	opts.AppRoot, opts.HTTPAddr = cmp.Or(opts.AppRoot, "."), cmp.Or(opts.HTTPAddr, DefaultHTTPAddr)
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Stdout, opts.Stderr = cmp.Or(opts.Stdout, io.Discard), cmp.Or(opts.Stderr, io.Discard)
	opts.Instances = cmp.Or(opts.Instances, 1)
	if opts.Instances < 1 || opts.Instances > MaxInstances {
		return nil, fmt.Errorf("devhost: %d instances: want 1 to %d", opts.Instances, MaxInstances)
	}
	if opts.TimeScale < 0 || opts.TimeScale > MaxTimeScale {
		return nil, fmt.Errorf("devhost: time scale %v is outside 0 to %d", opts.TimeScale, MaxTimeScale)
	}
	app, err := funcapp.Load(opts.AppRoot, &funcapp.LoadOptions{
		Env:       opts.Env,
		Overrides: opts.Settings,
		Defaults:  map[string]string{SettingQueue: DefaultQueue, SettingPoisonQueue: DefaultPoisonQueue},
	})
	if err != nil {
		return nil, err
	}
	sb := &app.Host.ServiceBus
	sb.MaxConcurrentSessions = cmp.Or(opts.Sessions.MaxConcurrentSessions, sb.MaxConcurrentSessions)
	sb.SessionIdleTimeout = cmp.Or(opts.Sessions.SessionIdleTimeout, sb.SessionIdleTimeout)
	h := &Host{opts: opts, app: app, log: opts.Logger, stats: newStats(), idleSessions: newIdleTracker(), pool: newPool()}
	switch {
	case opts.Clock != nil:
		h.clock = opts.Clock
	case opts.TimeScale > 0 && opts.TimeScale != 1:
		h.clock = clock.Scaled(opts.TimeScale)
	case opts.FastForward:
		h.clock = clock.Scaled(1) // real time that can be advanced
	default:
		h.clock = clock.Real()
	}
	if opts.FastForward {
		adv, ok := h.clock.(advancer)
		if !ok {
			return nil, fmt.Errorf("devhost: FastForward needs a clock that can be advanced, not a %T", h.clock)
		}
		h.ff = adv
	}
	for _, t := range opts.OutageTargets {
		if !scenario.IsOutageTarget(t) {
			return nil, fmt.Errorf("devhost: outage target %q: want %s or %s", t, OutageTable, OutageServiceBus)
		}
	}
	h.outages = newOutages(h.clock)
	h.broker = membroker.New(&membroker.Options{Clock: h.clock, Logger: h.log})
	h.queue = app.Settings[SettingQueue]
	h.poisonQueue = app.Settings[SettingPoisonQueue]
	if h.queue == h.poisonQueue {
		return nil, fmt.Errorf("devhost: %s and %s are both %q", SettingQueue, SettingPoisonQueue, h.queue)
	}
	if err := h.plan(); err != nil {
		return nil, err
	}
	h.rec = newRecorder(h.broker, h.poisonQueue)
	return h, nil
}

// plan creates the queues and the dispatchers from the function folders.
func (h *Host) plan() error {
	base, o := membroker.DefaultQueueOptions(), h.opts.Queues
	base.LockDuration = cmp.Or(o.LockDuration, base.LockDuration)
	base.MaxDeliveryCount = cmp.Or(o.MaxDeliveryCount, base.MaxDeliveryCount)
	triggered := base
	triggered.DefaultTTL = cmp.Or(o.TimeToLive, base.DefaultTTL)
	h.maxDelivery = triggered.MaxDeliveryCount
	sb := h.app.Host.ServiceBus
	for _, fn := range h.app.Functions {
		t, ok := fn.Trigger()
		if !ok {
			h.log.Warn("function has no trigger; skipped", slog.String("function", fn.Name))
			continue
		}
		switch t.Type {
		case funcapp.TypeServiceBusTrigger:
			if t.QueueName == "" || !t.IsSessionsEnabled {
				return fmt.Errorf("devhost: %s: only session-enabled queue triggers are supported", fn.Path)
			}
			if !slices.Contains(h.triggered, t.QueueName) {
				opts := triggered
				opts.RequiresSession = true
				if err := h.broker.CreateQueue(t.QueueName, opts); err != nil {
					return fmt.Errorf("devhost: create queue %s: %w", t.QueueName, err)
				}
				h.triggered = append(h.triggered, t.QueueName)
			}
			g := h.groupOf(fn.Name)
			d := &sessionDispatcher{h: h, g: g, fn: fn.Name, binding: t.Name, queue: t.QueueName,
				workers: sb.MaxConcurrentSessions, callsPerSession: sb.MaxConcurrentCallsPerSession,
				idle: sb.SessionIdleTimeout, lock: triggered.LockDuration, maxRenew: sb.MaxAutoLockRenewalDuration}
			h.sessions = append(h.sessions, d)
			g.sessions = append(g.sessions, d)
			// No session lock may run out in a fast-forward.
			if step := triggered.LockDuration / 4; h.idleStep == 0 || step < h.idleStep {
				h.idleStep = step
			}
		case funcapp.TypeTimerTrigger:
			sched, err := ncrontab.Parse(t.Schedule)
			if err != nil {
				return fmt.Errorf("devhost: %s: binding %q: %w", fn.Path, t.Name, err)
			}
			g := h.groupOf(fn.Name)
			d := &timerDispatcher{h: h, g: g, fn: fn.Name, binding: t, sched: sched}
			h.timers = append(h.timers, d)
			g.timers = append(g.timers, d)
		case funcapp.TypeHTTPTrigger:
			if !h.app.Host.EnableForwardingHTTPRequest {
				h.log.Warn("HTTP function skipped: only enableForwardingHttpRequest is supported", slog.String("function", fn.Name))
				continue
			}
			r, err := newRoute(h.app.Host.RoutePrefix, fn.Name, t)
			if err != nil {
				return fmt.Errorf("devhost: %s: %w", fn.Path, err)
			}
			h.routes = append(h.routes, r)
			g := h.groupOf(HTTPGroup)
			g.routes = append(g.routes, r)
		default:
			h.log.Warn("trigger type not supported by the development host; function skipped",
				slog.String("function", fn.Name), slog.String("type", t.Type))
		}
	}
	// The workload and poison queues exist even without a function.
	if !slices.Contains(h.triggered, h.queue) {
		opts := triggered
		opts.RequiresSession = true
		if err := h.broker.CreateQueue(h.queue, opts); err != nil {
			return fmt.Errorf("devhost: create queue %s: %w", h.queue, err)
		}
	}
	if !slices.Contains(h.triggered, h.poisonQueue) {
		po := base
		po.DefaultTTL = PoisonQueueTTL
		if err := h.broker.CreateQueue(h.poisonQueue, po); err != nil {
			return fmt.Errorf("devhost: create queue %s: %w", h.poisonQueue, err)
		}
	}
	slices.Sort(h.triggered)
	slices.SortStableFunc(h.routes, bySpecificity)
	return nil
}

// Start binds the front's address, then starts the store, the broker's
// loopback server, the instances, the front and the dispatchers; on error it
// stops them all. ctx bounds the start only.
func (h *Host) Start(ctx context.Context) (err error) {
	if !h.started.CompareAndSwap(false, true) {
		return errors.New("devhost: Start called twice")
	}
	defer func() {
		if err != nil {
			_ = h.Close()
		}
	}()
	settings := maps.Clone(h.app.Settings)
	path := cmp.Or(h.opts.HandlerPath, h.app.Host.ExecutablePath)

	if h.opts.HTTPAddr != "off" {
		if h.frontLn, err = h.listenFront(); err != nil {
			return err
		}
		h.frontAddr = h.frontLn.Addr().String()
	}

	switch {
	case settings[SettingStoreConnection] != "":
		h.storeSource = SettingStoreConnection + " (from settings)"
		h.storeConn = settings[SettingStoreConnection]
	case settings[SettingStoreServiceURI] != "":
		h.storeSource = SettingStoreServiceURI + " " + settings[SettingStoreServiceURI]
		h.storeServiceURI = settings[SettingStoreServiceURI]
	default:
		dirs := azuriteDirs(h.app.Root, path)
		bin, err := azurite.FindFrom(dirs...)
		if errors.Is(err, azurite.ErrNotInstalled) && !h.opts.NoAzuriteInstall {
			// A fresh clone: install the pinned Azurite, as `make tools` would.
			h.log.Warn("Azurite is not installed; installing it with npm ci in tools/ (once)")
			if _, ierr := azurite.Install(ctx, h.opts.Stderr, dirs...); ierr != nil {
				err = fmt.Errorf("%w; installing it failed: %w", err, ierr)
			} else {
				bin, err = azurite.FindFrom(dirs...)
			}
		}
		if err != nil {
			return fmt.Errorf("devhost: no store configured (%s or %s) and no Azurite to start: %w",
				SettingStoreConnection, SettingStoreServiceURI, err)
		}
		az, err := azurite.Start(ctx, azurite.Options{Binary: bin})
		if err != nil {
			return fmt.Errorf("devhost: no store configured (%s or %s) and Azurite did not start: %w",
				SettingStoreConnection, SettingStoreServiceURI, err)
		}
		h.az = az
		settings[SettingStoreConnection] = az.ConnectionString()
		h.storeConn = az.ConnectionString()
		h.storeSource = "Azurite (in memory) on " + az.Addr
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("devhost: broker listener: %w", err)
	}
	h.brokerURL = "http://" + l.Addr().String()
	h.brokerSrv = &http.Server{Handler: loopback.NewServer(h.rec), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.brokerSrv.Serve(l) }()

	// The host is the handler's Service Bus: drop the trigger connections.
	for _, conn := range h.connections() {
		for k := range settings {
			if k == conn || strings.HasPrefix(k, conn+"__") || strings.HasPrefix(k, conn+":") {
				delete(settings, k)
			}
		}
	}
	settings[SettingDevBrokerURL] = h.brokerURL
	// What --outage can break, the handler reaches through a fault proxy.
	proxied, err := h.startProxies(settings[SettingStoreConnection], h.brokerURL)
	if err != nil {
		return err
	}
	maps.Copy(settings, proxied)
	h.deadLetterTable = cmp.Or(settings[hcfg.EnvDeadLetterTable], hcfg.DefaultDeadLetterTable)
	// The tables the functions read, before any of them runs.
	h.ensureTables(ctx, settings)
	settings[SettingAppRootPath] = h.app.Root
	// Each instance's id goes in CONTAINER_NAME (the host's
	// EnvironmentExtensions.GetInstanceId; logging.InstanceID), not settings.
	delete(settings, logging.EnvWebsitePodName)
	delete(settings, logging.EnvContainerName)
	delete(settings, logging.EnvWebsiteInstanceID)
	h.handlerPath, h.handlerEnv = path, settings.Environ()
	h.client = newLoopbackClient()

	acceptCtx, stopAccept := context.WithCancel(context.Background())
	callCtx, stopCalls := context.WithCancel(context.Background())
	timerCtx, stopTimers := context.WithCancel(acceptCtx)
	h.stopAccept, h.stopCalls, h.stopTimers = stopAccept, stopCalls, stopTimers
	h.acceptCtx, h.callCtx = acceptCtx, callCtx
	counts, err := h.startCounts()
	if err != nil {
		return err
	}
	for _, key := range h.Groups() { // the default group first: its ids come first
		g := h.group(key)
		for range counts[g] {
			if _, err := h.startInstance(ctx, g); err != nil {
				return err
			}
		}
	}
	if h.frontLn != nil {
		h.front = &http.Server{Handler: newFront(h.routes, groupReadier{h.pool, h.readGroup()}, h.log), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = h.front.Serve(h.frontLn) }()
	}
	for _, d := range h.timers {
		h.timerRuns.Go(func() { d.run(timerCtx, callCtx) })
	}
	h.log.Info("development host started", slog.String("handler", path), slog.String("instances", strings.Join(h.RunningInstances(), ",")), slog.String("store", h.storeSource),
		slog.String("broker", h.brokerURL), slog.String("front", h.frontAddr), slog.String("settings", h.app.SettingsSource))
	return nil
}

// listenFront listens on HTTPAddr, or on FallbackHTTPAddr when it is in use.
func (h *Host) listenFront() (net.Listener, error) {
	l, err := net.Listen("tcp", h.opts.HTTPAddr)
	if err != nil && h.opts.FallbackHTTPAddr != "" && errors.Is(err, syscall.EADDRINUSE) {
		h.log.Info("the front's address is in use; using the fallback", slog.String("addr", h.opts.HTTPAddr),
			slog.String("fallback", h.opts.FallbackHTTPAddr))
		l, err = net.Listen("tcp", h.opts.FallbackHTTPAddr)
	}
	if err != nil && errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("devhost: HTTP front on %s: the address is in use (another orderstatus-dev dev, from this clone or another?): "+
			"pick another with --http-addr 127.0.0.1:PORT (make run ARGS=\"--http-addr 127.0.0.1:PORT\"): %w", h.opts.HTTPAddr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("devhost: HTTP front on %s: %w", h.opts.HTTPAddr, err)
	}
	return l, nil
}

// azuriteDirs are the directories azurite.FindFrom searches upward from.
func azuriteDirs(appRoot, handlerPath string) []string {
	var dirs []string
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	dirs = append(dirs, appRoot)
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	if handlerPath != "" {
		if !filepath.IsAbs(handlerPath) {
			handlerPath = filepath.Join(appRoot, handlerPath)
		}
		dirs = append(dirs, filepath.Dir(handlerPath))
	}
	return dirs
}

// storeErr returns an error once the Azurite the host started has exited.
func (h *Host) storeErr() error {
	if h.az == nil {
		return nil
	}
	select {
	case <-h.az.Done():
		if h.closing.Load() {
			return errors.New("devhost: the host is closed")
		}
		return fmt.Errorf("devhost: Azurite, the store on %s, exited (%v); the run cannot go on", h.az.Addr, h.az.Err())
	default:
		return nil
	}
}

// StoreDone is closed when the Azurite the host started exits (nil without one).
func (h *Host) StoreDone() <-chan struct{} {
	if h.az == nil {
		return nil
	}
	return h.az.Done()
}

// connections returns the Service Bus triggers' connections, disabled included.
func (h *Host) connections() []string {
	var out []string
	fns := slices.Clone(h.app.Functions)
	for _, d := range h.app.Disabled { // their connections are the app's too
		fns = append(fns, funcapp.Function{Name: d.Name, Bindings: d.Bindings})
	}
	for _, fn := range fns {
		if t, ok := fn.Trigger(); ok && t.Type == funcapp.TypeServiceBusTrigger {
			if c := cmp.Or(t.Connection, defaultServiceBusConnKey); !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Close lets running calls finish for up to DrainTimeout, then stops
// everything. It is safe to call more than once, and before Start.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.closing.Store(true)
		if h.stopAccept != nil {
			h.stopAccept()
			done := make(chan struct{})
			go func() { h.workers.Wait(); h.timerRuns.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(h.opts.DrainTimeout):
				h.log.Warn("calls still running after the drain timeout; aborting them")
			}
			h.stopCalls()
			<-done
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var errs []error
		switch {
		case h.front != nil:
			errs = append(errs, h.front.Shutdown(ctx))
		case h.frontLn != nil:
			errs = append(errs, h.frontLn.Close())
		}
		h.pool.mu.Lock()
		all := slices.Clone(h.pool.all)
		h.pool.mu.Unlock()
		if h.client != nil {
			h.client.CloseIdleConnections()
		}
		var stopping sync.WaitGroup
		for _, in := range all {
			in.retired.Store(true)
			in.inv.close()
			stopping.Go(in.proc.Stop)
		}
		stopping.Wait()
		h.outages.close()
		if h.brokerSrv != nil {
			errs = append(errs, h.brokerSrv.Shutdown(ctx))
		}
		if h.az != nil {
			h.az.Stop()
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}

// Broker returns the in-memory broker.
func (h *Host) Broker() *membroker.Broker { return h.broker }

// Clock returns the host's clock (scaled when TimeScale > 1).
func (h *Host) Clock() clock.Clock { return h.clock }

// Queue returns the workload queue (ORDER_STATUS_QUEUE).
func (h *Host) Queue() string { return h.queue }

// PoisonQueue returns the poison queue (POISON_QUEUE).
func (h *Host) PoisonQueue() string { return h.poisonQueue }

// HandlerPID returns the default group's oldest running handler's pid, or 0.
func (h *Host) HandlerPID() int {
	if in := h.pool.first(h.defaultGroup()); in != nil {
		return in.proc.PID()
	}
	return 0
}

// HandlerStarts returns how many handler processes were started, restarts included.
func (h *Host) HandlerStarts() int {
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	n := 0
	for _, in := range h.pool.all {
		n += in.proc.Starts()
	}
	return n
}

// Addr returns the front's address (host:port), "" without a front.
func (h *Host) Addr() string { return h.frontAddr }

// BrokerURL returns the loopback broker's base URL given to the handler.
func (h *Host) BrokerURL() string { return h.brokerURL }

// Endpoints returns where this host's broker, store and front listen (devrun).
func (h *Host) Endpoints() devrun.Endpoints {
	return devrun.Endpoints{
		PID:                   os.Getpid(),
		BrokerURL:             h.brokerURL,
		StoreConnectionString: h.storeConn,
		StoreServiceURI:       h.storeServiceURI,
		HTTPAddr:              h.frontAddr,
		Queue:                 h.queue,
		PoisonQueue:           h.poisonQueue,
		TimeScale:             h.opts.TimeScale,
		AppRoot:               h.app.Root,
	}
}

// ChildProcess is a process the host started and stops in Close.
type ChildProcess struct {
	Name string // "OrderStatus-1's handler", "Azurite"
	PID  int
}

// Processes returns the running handlers, and Azurite if the host started it.
func (h *Host) Processes() []ChildProcess {
	h.pool.mu.Lock()
	all := slices.Clone(h.pool.all)
	h.pool.mu.Unlock()
	var out []ChildProcess
	for _, in := range all {
		if pid := in.proc.PID(); pid > 0 {
			out = append(out, ChildProcess{Name: in.id + "'s handler", PID: pid})
		}
	}
	if h.az != nil {
		select {
		case <-h.az.Done():
		default:
			out = append(out, ChildProcess{Name: "Azurite", PID: h.az.PID()})
		}
	}
	return out
}

// HandlerDone is closed when a running instance's handler failed for good;
// HandlerErr says why. Removals, kills and Close do not close it.
func (h *Host) HandlerDone() <-chan struct{} { return h.pool.fail }

// HandlerErr returns why an instance's handler is no longer supervised.
func (h *Host) HandlerErr() error {
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	return h.pool.failErr
}

// Send sends a workload message now, or scheduled ScheduleAfter from now;
// SendAfter is ignored (see Play). A dropped duplicate is no error.
func (h *Host) Send(ctx context.Context, l ScenarioLine) error {
	msg := l.Message()
	var err error
	if l.ScheduleAfter > 0 {
		_, err = h.broker.Schedule(ctx, h.queue, msg, h.clock.Now().Add(l.ScheduleAfter))
	} else {
		err = h.broker.Send(ctx, h.queue, msg)
	}
	if err != nil {
		if l.Pos != "" {
			return fmt.Errorf("devhost: send %s (%s): %w", l.MessageID, l.Pos, err)
		}
		return fmt.Errorf("devhost: send %s: %w", l.MessageID, err)
	}
	h.stats.sent(l)
	return nil
}

// Play sends lines in order, each once SendAfter has passed since Play began;
// scale lines go to Scale (a failure is a warning), outage lines to
// StartOutage. It fails when Send does, ctx ends, or the store died.
func (h *Host) Play(ctx context.Context, lines []ScenarioLine) error {
	start := h.clock.Now()
	h.playMu.Lock()
	if h.playStart.IsZero() {
		h.playStart = start
	}
	h.playMu.Unlock()
	for _, l := range lines {
		if l.SendAfter > 0 {
			if err := h.sleepUntil(ctx, start.Add(l.SendAfter)); err != nil {
				return err
			}
		}
		if err := h.storeErr(); err != nil {
			return err
		}
		if l.Scale != "" {
			id, err := h.Scale(ctx, l.Scale, l.Instance)
			if err != nil {
				h.log.Warn("scale event not applied", slog.String("action", l.Scale), slog.String("at", l.Pos), slog.Any("error", err))
			}
			if h.opts.OnScale != nil {
				h.opts.OnScale(l.Scale, id, err)
			}
			continue
		}
		if l.Outage != "" {
			err := h.StartOutage(l.Outage, l.Duration)
			if h.opts.OnOutage != nil {
				h.opts.OnOutage(l.Outage, l.Duration, err)
			}
			if err != nil {
				return fmt.Errorf("%w (%s)", err, l.Pos)
			}
			continue
		}
		if err := h.Send(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// sleepUntil waits until the clock reaches wake, fast-forwarding when it may.
func (h *Host) sleepUntil(ctx context.Context, wake time.Time) error {
	var poll <-chan time.Time
	if h.ff != nil {
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		poll = t.C
	}
	for {
		if err := h.storeErr(); err != nil {
			return err
		}
		if !h.clock.Now().Before(wake) {
			return nil
		}
		h.fastForward(wake)
		t := h.clock.NewTimer(wake.Sub(h.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-h.StoreDone():
		case <-t.C():
		case <-poll:
		}
		t.Stop()
	}
}

// pollInterval is how often WaitIdle looks at the queues (wall clock).
const pollInterval = 20 * time.Millisecond

// WaitIdle blocks until no triggered queue has active, locked or scheduled
// messages, no call runs and no outage is under way, or ctx ends. It fails
// when the handler is no longer supervised or the store the host started died.
func (h *Host) WaitIdle(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if err := h.storeErr(); err != nil {
			return err
		}
		if h.idle() {
			return nil
		}
		h.fastForward(time.Time{})
		select {
		case <-ctx.Done():
			return fmt.Errorf("devhost: wait idle: %w", ctx.Err())
		case <-h.HandlerDone():
			if err := h.HandlerErr(); err != nil {
				return fmt.Errorf("devhost: wait idle: %w", err)
			}
		case <-h.StoreDone():
		case <-h.stats.callEnded: // the last call may have ended
		case <-h.outages.ended:
		case <-t.C:
		}
	}
}

// CallsRunning is how many Service Bus and timer calls run now.
func (h *Host) CallsRunning() int { return int(h.stats.inFlight.Load()) }

// idle reports whether no call runs, no outage is under way and every triggered queue is quiet.
func (h *Host) idle() bool {
	return h.stats.inFlight.Load() == 0 && !h.outages.anyUnended() &&
		!slices.ContainsFunc(h.triggered, func(q string) bool { return !h.broker.Quiet(q) })
}

// fastForward moves the clock, with FastForward and nothing running, to the
// next due time: a scheduled message, a killed instance's lock expiry, limit
// (zero: none), an outage's end or an idle session's wait end.
func (h *Host) fastForward(limit time.Time) {
	if h.ff == nil || h.stats.inFlight.Load() != 0 {
		return
	}
	var next time.Time
	to := JumpScheduled
	earlier := func(t time.Time, why string) { // t, if set and before next, is next
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next, to = t, why
		}
	}
	anyHeld := false
	var orphanEnd time.Time // the first lock a killed instance left that runs out
	for _, q := range h.triggered {
		orphans, orphanMsgs, end := h.pool.orphansOf(q, h.clock.Now())
		s := h.broker.Stats(q)
		if s.Locked != orphanMsgs {
			return
		}
		held, allWaiting := h.idleSessions.state(q)
		switch {
		case s.LockedSessions != held+orphans || !allWaiting: // a session starts, or a receiver is about to receive
			return
		case s.Active != 0 && held < h.slots(q): // a free worker takes it now
			return
		}
		anyHeld = anyHeld || held > 0
		at, _ := h.broker.NextDue(q) // zero: none
		earlier(at, JumpScheduled)
		if !end.IsZero() && (orphanEnd.IsZero() || end.Before(orphanEnd)) {
			orphanEnd = end
		}
	}
	if !orphanEnd.IsZero() && (next.IsZero() || !next.Before(orphanEnd)) {
		next, to = orphanEnd.Add(time.Millisecond), JumpLockExpiry
	}
	earlier(limit, JumpSendAfter)
	end, _ := h.outages.nextEnd(h.clock.Now())
	earlier(end, JumpOutageEnd)
	if anyHeld {
		end, _ := h.idleSessions.firstWaitEnd()
		earlier(end, JumpIdleSessions)
		if step := h.clock.Now().Add(h.idleStep); h.idleStep > 0 && !next.IsZero() && step.Before(next) {
			next, to = step, JumpIdleSessions
		}
	}
	if next.IsZero() {
		return
	}
	if by := h.ff.AdvanceTo(next); by > 0 {
		h.log.Debug("fast-forwarded the clock", slog.Duration("by", by), slog.String("to", to))
		if h.opts.OnFastForward != nil {
			h.opts.OnFastForward(by, to)
		}
	}
}

// FireTimers invokes every timer function once, now; failures are joined.
func (h *Host) FireTimers(ctx context.Context) error {
	if h.stopTimers == nil {
		return errors.New("devhost: FireTimers before Start")
	}
	var errs []error
	for _, d := range h.timers {
		errs = append(errs, d.fire(ctx, false))
	}
	return errors.Join(errs...)
}

// StopTimers stops the timer schedules and waits for a running scheduled
// invocation; FireTimers still works. It does nothing before Start.
func (h *Host) StopTimers() {
	if h.stopTimers == nil {
		return
	}
	h.stopTimers()
	h.timerRuns.Wait()
}

// TimerFunctions returns the names of the timer functions.
func (h *Host) TimerFunctions() []string {
	var out []string
	for _, d := range h.timers {
		out = append(out, d.fn)
	}
	return out
}
