// Package devhost is the development host behind `orderstatus-dev dev`: it runs the
// real custom handler exactly as the Azure Functions host does, backed by an
// in-memory broker with Service Bus semantics (membroker) and Azurite for
// Table Storage. Production never uses it.
//
// A Host reads host.json, the function folders and the app settings
// (funcapp), starts the handler as a child process with
// FUNCTIONS_CUSTOMHANDLER_PORT and restarts it when it dies (child), and
// dispatches:
//   - serviceBusTrigger: per function, maxConcurrentSessions workers accept
//     sessions and POST /<Function> with each message encoded as the host
//     encodes it (hostenc); a 2xx answer completes the message, anything
//     else, or no answer, abandons it; the session lock is renewed while a
//     session is held, up to maxAutoLockRenewalDuration after a message was
//     received;
//   - timerTrigger: six-field NCRONTAB schedules (ncrontab) on the host's
//     clock, POST /<Function> with the timer payload;
//   - httpTrigger with enableForwardingHttpRequest: a front on
//     127.0.0.1:7071 forwards /api/... to the handler (function keys are
//     not checked, as with the Core Tools).
//
// Settings come from local.settings.json (in a fresh clone, from
// local.settings.json.template), the environment, which wins, and
// Options.Settings; ORDER_STATUS_QUEUE and POISON_QUEUE default to
// order-status and order-status-poison. The handler inherits them as its
// environment, except the Service Bus trigger connections' settings
// (ServiceBusConnection__*): the development host is its Service Bus, which
// it reaches over loopback HTTP (ORDERSTATUS_DEV_BROKER_URL). When no store
// is configured (OrderStore__connectionString or OrderStore__serviceUri)
// the host starts Azurite itself, in memory on a free port, and a run whose
// Azurite dies fails. On that Azurite, or a store a connection string
// names, it creates the tables the functions read (the order table and the
// dead-letter store's) before it starts them (StoreTables says how that
// went). On Linux the handler and that Azurite die with the host, even
// when it is killed with SIGKILL.
//
// The host runs the app as Flex Consumption does, per function (group.go):
// one group of instances for every HTTP function and one for each other
// function, each instance with its own handler process (its id in
// CONTAINER_NAME), its own cache and, for a Service Bus function, its own
// session slots, on the one broker and store. A group scales out and in
// on its own (Options.Instances and GroupInstances, AddInstance,
// RemoveInstance, KillInstance, scale lines in a workload); the front
// takes the HTTP group's running instances in turn, and a timer runs on
// the oldest running instance of its group (instance.go).
//
// Outages (Options.OutageTargets, StartOutage, outage lines in a
// workload; outage.go) make Table Storage or the handler's own Service Bus
// calls unreachable from the handler processes for a while: a fault proxy
// between them refuses every request. Functions disabled by the host's
// kill switch, the app setting AzureWebJobs.<name>.Disabled, are left out
// as the Functions host leaves them out (funcapp.DisabledBy).
//
// Time runs on the host's clock: real time, TimeScale times faster, and
// with FastForward moved ahead at once over stretches in which the host
// only waits for a scheduled message.
//
// Main is the `orderstatus-dev dev` command; New and the Host methods are the
// library the simulation tests drive.
package devhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
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

// MaxTimeScale bounds Options.TimeScale: a faster clock would overflow
// time.Duration within a long run (at 10 000 times, after 29 years).
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

// QueueOverrides change the queues' settings from those of the Bicep (max
// delivery 5, lock 1 minute, duplicate window 10 minutes, TTL 7 days); zero
// keeps a setting. All apply to the triggered queues; LockDuration,
// MaxDeliveryCount and DuplicateWindow also to the poison queue, whose TTL
// stays PoisonQueueTTL.
type QueueOverrides struct {
	LockDuration     time.Duration
	MaxDeliveryCount int32
	TimeToLive       time.Duration
	DuplicateWindow  time.Duration
}

// SessionOverrides replace host.json's session settings of the Service Bus
// extension (extensions.serviceBus) for one run, as an operator tuning them
// would edit host.json; zero keeps a setting. The benchmark's session-slot
// measurements use them.
type SessionOverrides struct {
	MaxConcurrentSessions int
	SessionIdleTimeout    time.Duration
}

// Options configure New. The zero value runs the app in the working
// directory.
type Options struct {
	// AppRoot holds host.json and the function folders (default ".").
	AppRoot string
	// HandlerPath replaces host.json's defaultExecutablePath.
	HandlerPath string
	// Settings override the app settings; "" removes one.
	Settings map[string]string
	// Env is the environment settings are read from and the handler
	// inherits; nil means os.Environ().
	Env []string
	// Queues override the queue settings.
	Queues QueueOverrides
	// Sessions override host.json's maxConcurrentSessions and
	// sessionIdleTimeout.
	Sessions SessionOverrides
	// TimeScale > 1 runs the broker, schedules and timers that many times
	// faster than the wall clock (0 or 1: real time); at most MaxTimeScale.
	TimeScale float64
	// Clock replaces the clock TimeScale would make. With FastForward it
	// must also have AdvanceTo(time.Time) time.Duration, as
	// clock.ScaledClock has.
	Clock clock.Clock
	// FastForward moves the clock forward at once, instead of waiting,
	// whenever the host has nothing to do but wait for time to pass (in
	// WaitIdle and Play): no call runs, no message is locked, and every
	// session held waits idle for its next message, while a scheduled
	// message is due later, Play holds its next line for SendAfter, or
	// the held sessions' sessionIdleTimeout keeps visible messages from
	// the workers. The clock then jumps to the earliest such time, at
	// most a quarter of the lock duration while sessions are held, so
	// that no lock runs out in a jump. Everything else on the clock (timer
	// schedules, the duplicate detection window, time-to-live) sees the
	// jump as time that passed. It suits one driver that plays a workload
	// and waits for the end (`orderstatus-dev dev --exit-when-idle`); the timer
	// schedules keep running, on the jumping clock, until StopTimers.
	FastForward bool
	// OnFastForward, if set, is called after each jump with its size and
	// what it jumped to (one of the Jump* phrases).
	OnFastForward func(by time.Duration, to string)
	// HTTPAddr is the front's address (default 127.0.0.1:7071; use
	// 127.0.0.1:0 in tests). "off" serves no front.
	HTTPAddr string
	// FallbackHTTPAddr, if set, is listened on when HTTPAddr is in use
	// (Addr tells which one the front got).
	FallbackHTTPAddr string
	// AzuriteBinary is the azurite-table executable for the Azurite the
	// host starts when no store is configured; empty: azurite.FindFrom
	// the working directory, AppRoot, the running executable's directory
	// and the handler's.
	AzuriteBinary string
	// Stdout and Stderr receive the handler's output; nil discards it.
	Stdout, Stderr io.Writer
	// Logger receives the host's own events; nil discards them.
	Logger *slog.Logger
	// DisableLockRenewal stops renewing session locks, so that a call
	// running longer than the lock duration loses its lock (tests).
	DisableLockRenewal bool
	// ReadyTimeout bounds each wait for the handler to answer GET /
	// (default 60 s).
	ReadyTimeout time.Duration
	// DrainTimeout is how long Close lets running calls finish (default
	// 10 s).
	DrainTimeout time.Duration
	// AzuriteLog receives Azurite's output when the host starts it, and
	// npm's when it installs Azurite first.
	AzuriteLog io.Writer
	// NoAzuriteInstall stops the host from running `npm ci` in tools/
	// when no store is configured and Azurite is not installed.
	NoAzuriteInstall bool
	// Instances is how many instances the default group runs at the
	// start (default 1, at most MaxInstances): the group of the function
	// on the workload queue, the one that scales out on a backlog. Each
	// has its own handler process and its own session slots, on the one
	// broker and store (see AddInstance, RemoveInstance, KillInstance).
	Instances int
	// GroupInstances sets how many instances other groups start with, by
	// key (HTTPGroup, or a non-HTTP function's name; see group.go); a
	// group named nowhere starts with one. A key the app does not have
	// fails Start with ErrUnknownGroup (CheckScale tells before).
	GroupInstances map[string]int
	// OutageTargets are the targets (OutageTable, OutageServiceBus) the
	// run may make unreachable (StartOutage, outage lines in Play): for
	// each, a fault proxy stands between the handler processes and the
	// target from the start. A table outage needs the store on loopback
	// HTTP (Azurite): Start fails otherwise. Without them the handler
	// reaches both directly.
	OutageTargets []string
	// OnOutage, if set, is called after each outage line Play applies,
	// with the error if it failed.
	OnOutage func(target string, d time.Duration, err error)
	// OnScale, if set, is called after each scale event Play applies:
	// the action, the instance's id, and the error if it failed.
	OnScale func(action, id string, err error)
}

// Host is a development host. Create it with New, then Start; Close stops
// everything. Its methods are safe for concurrent use.
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
	plain              []*queueDispatcher
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
	// deadLetterTable is the dead-letter store's table, whose archived
	// and discarded entries the summary's archived key lists.
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

// New reads the app and prepares the host; it starts nothing. Errors name
// the file or setting at fault (an unresolved %NAME%, a bad schedule).
func New(opts Options) (*Host, error) {
	if opts.AppRoot == "" {
		opts.AppRoot = "."
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = DefaultHTTPAddr
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 10 * time.Second
	}
	if opts.Instances == 0 {
		opts.Instances = 1
	}
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
	if n := opts.Sessions.MaxConcurrentSessions; n > 0 {
		app.Host.ServiceBus.MaxConcurrentSessions = n
	}
	if d := opts.Sessions.SessionIdleTimeout; d > 0 {
		app.Host.ServiceBus.SessionIdleTimeout = d
	}
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
	h.queue = app.Settings.Get(SettingQueue)
	h.poisonQueue = app.Settings.Get(SettingPoisonQueue)
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
	base := membroker.DefaultQueueOptions()
	o := h.opts.Queues
	if o.LockDuration > 0 {
		base.LockDuration = o.LockDuration
	}
	if o.MaxDeliveryCount > 0 {
		base.MaxDeliveryCount = o.MaxDeliveryCount
	}
	if o.DuplicateWindow > 0 {
		base.DuplicateWindow = o.DuplicateWindow
	}
	triggered := base
	if o.TimeToLive > 0 {
		triggered.DefaultTTL = o.TimeToLive
	}
	h.maxDelivery = triggered.MaxDeliveryCount
	sessionQueues := map[string]bool{}
	sb := h.app.Host.ServiceBus
	for _, fn := range h.app.Functions {
		t, ok := fn.Trigger()
		if !ok {
			h.log.Warn("function has no trigger; skipped", slog.String("function", fn.Name))
			continue
		}
		switch t.Type {
		case funcapp.TypeServiceBusTrigger:
			if t.QueueName == "" {
				return fmt.Errorf("devhost: %s: only queue triggers are supported (topic %q)", fn.Path, t.TopicName)
			}
			if prev, seen := sessionQueues[t.QueueName]; seen && prev != t.IsSessionsEnabled {
				return fmt.Errorf("devhost: %s: queue %s is used with and without sessions", fn.Path, t.QueueName)
			}
			if _, seen := sessionQueues[t.QueueName]; !seen {
				opts := triggered
				opts.RequiresSession = t.IsSessionsEnabled
				if err := h.broker.CreateQueue(t.QueueName, opts); err != nil {
					return fmt.Errorf("devhost: create queue %s: %w", t.QueueName, err)
				}
				h.triggered = append(h.triggered, t.QueueName)
			}
			sessionQueues[t.QueueName] = t.IsSessionsEnabled
			if t.IsSessionsEnabled {
				d := &sessionDispatcher{h: h, fn: fn.Name, binding: t.Name, queue: t.QueueName,
					workers: sb.MaxConcurrentSessions, callsPerSession: sb.MaxConcurrentCallsPerSession,
					idle: sb.SessionIdleTimeout, lock: triggered.LockDuration, maxRenew: sb.MaxAutoLockRenewalDuration}
				h.sessions = append(h.sessions, d)
				g := h.groupOf(fn.Name)
				g.sessions = append(g.sessions, d)
				d.g = g
				// A fast-forward while sessions are held moves at most a
				// quarter of the lock duration, so that no session lock
				// runs out between its renewals.
				if step := triggered.LockDuration / 4; h.idleStep == 0 || step < h.idleStep {
					h.idleStep = step
				}
			} else {
				d := &queueDispatcher{h: h, fn: fn.Name, binding: t.Name, queue: t.QueueName,
					workers: sb.MaxConcurrentCalls}
				h.plain = append(h.plain, d)
				g := h.groupOf(fn.Name)
				g.plain = append(g.plain, d)
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
	// The workload queue and the poison queue exist even without a
	// function on them.
	if _, ok := sessionQueues[h.queue]; !ok {
		opts := triggered
		opts.RequiresSession = true
		if err := h.broker.CreateQueue(h.queue, opts); err != nil {
			return fmt.Errorf("devhost: create queue %s: %w", h.queue, err)
		}
	} else if !sessionQueues[h.queue] {
		return fmt.Errorf("devhost: queue %s (%s) must have sessions", h.queue, SettingQueue)
	}
	if _, ok := sessionQueues[h.poisonQueue]; !ok {
		po := base
		po.RequiresSession = false
		po.RequiresDuplicateDetection = true
		po.DefaultTTL = PoisonQueueTTL
		if err := h.broker.CreateQueue(h.poisonQueue, po); err != nil {
			return fmt.Errorf("devhost: create queue %s: %w", h.poisonQueue, err)
		}
	}
	sort.Strings(h.triggered)
	sort.Slice(h.routes, func(i, j int) bool { return h.routes[i].less(h.routes[j]) })
	return nil
}

// Start binds the front's address, starts the store (Azurite when none is
// configured), the broker's loopback server, the handler (waiting until it
// answers), the front and the dispatchers. ctx bounds the start only. On
// error everything started is stopped again. The front's address is bound
// first, so a busy address fails the start before anything else runs.
func (h *Host) Start(ctx context.Context) (err error) {
	if !h.started.CompareAndSwap(false, true) {
		return errors.New("devhost: Start called twice")
	}
	defer func() {
		if err != nil {
			_ = h.Close()
		}
	}()
	settings := h.app.Settings.Clone()
	path := h.app.Host.ExecutablePath
	if h.opts.HandlerPath != "" {
		path = h.opts.HandlerPath
	}

	// Front address.
	if h.opts.HTTPAddr != "off" {
		if h.frontLn, err = h.listenFront(); err != nil {
			return err
		}
		h.frontAddr = h.frontLn.Addr().String()
	}

	// Store.
	switch {
	case settings.Get(SettingStoreConnection) != "":
		h.storeSource = SettingStoreConnection + " (from settings)"
		h.storeConn = settings.Get(SettingStoreConnection)
	case settings.Get(SettingStoreServiceURI) != "":
		h.storeSource = SettingStoreServiceURI + " " + settings.Get(SettingStoreServiceURI)
		h.storeServiceURI = settings.Get(SettingStoreServiceURI)
	default:
		bin := h.opts.AzuriteBinary
		if bin == "" {
			dirs := azuriteDirs(h.app.Root, path)
			bin, err = azurite.FindFrom(dirs...)
			if errors.Is(err, azurite.ErrNotInstalled) && !h.opts.NoAzuriteInstall {
				// A fresh clone: install the pinned Azurite once, as
				// `make tools` would, rather than fail.
				h.log.Warn("Azurite is not installed; installing it with npm ci in tools/ (once)")
				if _, ierr := azurite.Install(ctx, h.installLog(), dirs...); ierr != nil {
					err = fmt.Errorf("%w; installing it failed: %w", err, ierr)
				} else {
					bin, err = azurite.FindFrom(dirs...)
				}
			}
			if err != nil {
				return fmt.Errorf("devhost: no store configured (%s or %s) and no Azurite to start: %w",
					SettingStoreConnection, SettingStoreServiceURI, err)
			}
		}
		az, err := azurite.Start(ctx, azurite.Options{Binary: bin, Log: h.opts.AzuriteLog})
		if err != nil {
			return fmt.Errorf("devhost: no store configured (%s or %s) and Azurite did not start: %w",
				SettingStoreConnection, SettingStoreServiceURI, err)
		}
		h.az = az
		settings[SettingStoreConnection] = az.ConnectionString()
		h.storeConn = az.ConnectionString()
		h.storeSource = "Azurite (in memory) on " + az.Addr
	}

	// Broker over loopback HTTP.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("devhost: broker listener: %w", err)
	}
	h.brokerURL = "http://" + l.Addr().String()
	h.brokerSrv = &http.Server{Handler: loopback.NewServer(h.rec), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.brokerSrv.Serve(l) }()

	// The handler. The development host is the Service Bus: the trigger
	// connections' settings are not passed on, so the handler talks to
	// the loopback broker.
	for _, conn := range h.connections() {
		for k := range settings {
			if k == conn || strings.HasPrefix(k, conn+"__") || strings.HasPrefix(k, conn+":") {
				delete(settings, k)
			}
		}
	}
	settings[SettingDevBrokerURL] = h.brokerURL
	// What --outage can make unreachable, the handler reaches through a
	// fault proxy.
	proxied, err := h.startProxies(settings.Get(SettingStoreConnection), h.brokerURL)
	if err != nil {
		return err
	}
	for k, v := range proxied {
		settings[k] = v
	}
	h.deadLetterTable = settings.Get(hcfg.EnvDeadLetterTable)
	if h.deadLetterTable == "" {
		h.deadLetterTable = hcfg.DefaultDeadLetterTable
	}
	// The tables the functions read, before any of them runs.
	h.ensureTables(ctx, settings)
	settings[SettingAppRootPath] = h.app.Root
	// Each instance's handler learns its id from CONTAINER_NAME, as the
	// host reads it on Linux Consumption (EnvironmentExtensions.GetInstanceId:
	// WEBSITE_POD_NAME first, then CONTAINER_NAME; logging.InstanceID). An id
	// from the settings would name them all, so none is passed on.
	delete(settings, logging.EnvWebsitePodName)
	delete(settings, logging.EnvContainerName)
	delete(settings, logging.EnvWebsiteInstanceID)
	h.handlerPath, h.handlerEnv = path, settings.Environ()
	h.client = newLoopbackClient()

	// The instances, each with its handler and its dispatchers; the
	// front; the timers, which run on one instance at a time.
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
		d.start(timerCtx, callCtx, &h.timerRuns)
	}
	h.log.Info("development host started", slog.String("handler", path), slog.String("instances", strings.Join(h.RunningInstances(), ",")), slog.String("store", h.storeSource),
		slog.String("broker", h.brokerURL), slog.String("front", h.frontAddr), slog.String("settings", h.app.SettingsSource))
	return nil
}

// listenFront listens on HTTPAddr, or on FallbackHTTPAddr when HTTPAddr
// is in use.
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

// installLog is where npm's output goes when the host installs Azurite.
func (h *Host) installLog() io.Writer {
	if h.opts.AzuriteLog != nil {
		return h.opts.AzuriteLog
	}
	return h.opts.Stderr
}

// azuriteDirs are the directories azurite.FindFrom searches upward from:
// the working directory, the app root, the running executable's directory
// and the handler's, so that `bin/orderstatus-dev dev` finds the repository's
// tools/ from anywhere.
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

// storeErr returns an error once the Azurite the host started has exited,
// nil while it runs (or with a store from settings).
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

// StoreDone is closed when the Azurite the host started has exited: on
// its own (a failed run; WaitIdle, Play and Summary then fail) or by
// Close. It is nil, never ready, with a store from settings.
func (h *Host) StoreDone() <-chan struct{} {
	if h.az == nil {
		return nil
	}
	return h.az.Done()
}

// connections returns the setting prefixes of the Service Bus triggers,
// disabled ones' included.
func (h *Host) connections() []string {
	seen := map[string]bool{}
	var out []string
	fns := slices.Clone(h.app.Functions)
	for _, d := range h.app.Disabled { // their connections are the app's too
		fns = append(fns, funcapp.Function{Name: d.Name, Bindings: d.Bindings})
	}
	for _, fn := range fns {
		if t, ok := fn.Trigger(); ok && t.Type == funcapp.TypeServiceBusTrigger {
			c := t.Connection
			if c == "" {
				c = defaultServiceBusConnKey
			}
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// Close stops taking new work, lets running calls finish for up to
// DrainTimeout, then stops the dispatchers, the front, the handler (closing
// the connections to it), the broker server and Azurite. It is safe to call more than once and on a
// host that was never started.
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

// HandlerPID returns the process id of the handler of the default group's
// oldest running instance, 0 while none runs.
func (h *Host) HandlerPID() int {
	if in := h.pool.first(h.defaultGroup()); in != nil {
		return in.proc.PID()
	}
	return 0
}

// HandlerStarts returns how many handler processes were started, over all
// instances (one per instance, plus one per restart after a crash).
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

// Endpoints returns where this host's broker, store and front listen, as
// `orderstatus deadletters` and `orderstatus publish` find them (package devrun).
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

// Processes returns the child processes running now: each instance's
// handler, and Azurite when the host started it.
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

// StoreSource says which store the handler uses.
func (h *Host) StoreSource() string { return h.storeSource }

// SettingsSource says which settings file was read ("environment" if
// none).
func (h *Host) SettingsSource() string { return h.app.SettingsSource }

// HandlerDone is closed when the handler of a running instance failed for
// good (it kept dying and is no longer restarted); HandlerErr says why.
// Instances removed or killed on purpose, and Close, do not close it.
func (h *Host) HandlerDone() <-chan struct{} { return h.pool.fail }

// HandlerErr returns why an instance's handler is no longer supervised,
// nil while every running one is.
func (h *Host) HandlerErr() error {
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	return h.pool.failErr
}

// Send sends one workload message to the workload queue: at once, or
// scheduled ScheduleAfter from now on the host's clock. SendAfter is
// ignored here (see Play). A message dropped by duplicate detection is no
// error.
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

// Play sends lines in order, holding each line until SendAfter has passed
// on the host's clock since Play began. A scale line (Scale set) adds,
// removes or kills an instance instead (see Scale); one that cannot be
// applied, such as removing the last instance, is a warning. An outage line
// (Outage set) starts an outage (see StartOutage); one whose target is
// not in Options.OutageTargets fails Play. With FastForward, a hold during
// which the host has nothing else to do is skipped by moving the clock.
// It fails when Send does, ctx ends, or the store the host started died.
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

// sleepUntil waits until the clock reaches wake, fast-forwarding when it
// may, or until ctx ends or the store died.
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

// WaitIdle blocks until every triggered queue has no active, locked or
// scheduled messages and no call (Service Bus or timer) is running, or ctx
// ends. Scheduled messages make it wait until they are due and handled
// (with FastForward, the clock jumps to them when nothing else is left to
// do); the dead-letter subqueues and the poison queue do not count. An
// outage under way (StartOutage) keeps it waiting until its end (with
// FastForward, the clock jumps there when nothing else is left to do). It
// fails when the handler is no longer supervised or the store the host
// started died.
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

// CallsRunning is how many calls to the app's handlers run now: Service
// Bus trigger and timer calls (a DeadLetterSweeper run is one call from
// its start to its answer, however many messages it replays meanwhile).
func (h *Host) CallsRunning() int { return int(h.stats.inFlight.Load()) }

func (h *Host) idle() bool {
	if h.stats.inFlight.Load() != 0 || h.outages.anyUnended() {
		return false
	}
	for _, q := range h.triggered {
		if !h.broker.Quiet(q) {
			return false
		}
	}
	return true
}

// fastForward moves the clock, if FastForward is set and nothing runs, to
// the next time something falls due. Nothing runs when no call runs, no
// message is locked (but by a killed instance), every session the
// dispatchers hold waits idle for its next message, and no visible message
// waits for a free worker. What falls due: a scheduled message, the end of
// a session lock a killed instance left, limit (Play's next line; zero for
// none), the end of an outage, or the end of an idle session's wait (so that its worker moves on
// to the next session); while sessions are held, the clock moves a quarter
// of the lock duration at most. It assumes one driver: what starts
// between its look at the queues and the jump can only be what falls due
// by the jump's target.
func (h *Host) fastForward(limit time.Time) {
	if h.ff == nil || h.stats.inFlight.Load() != 0 {
		return
	}
	var next time.Time
	anyHeld := false
	var orphanEnd time.Time // the first lock a killed instance left that runs out
	for _, q := range h.triggered {
		orphans, orphanMsgs, end := h.pool.orphansOf(q, h.clock.Now())
		s := h.broker.Stats(q)
		if s.Locked != orphanMsgs {
			return
		}
		workers, sessions := h.slots(q)
		held, allWaiting := h.idleSessions.state(q)
		switch {
		case !sessions && s.Active != 0: // a receiver takes it now
			return
		case s.LockedSessions != held+orphans || !allWaiting: // a session starts, or a receiver is about to receive
			return
		case s.Active != 0 && held < workers: // a free worker takes it now
			return
		}
		anyHeld = anyHeld || held > 0
		if at, ok := h.broker.NextDue(q); ok && (next.IsZero() || at.Before(next)) {
			next = at
		}
		if !end.IsZero() && (orphanEnd.IsZero() || end.Before(orphanEnd)) {
			orphanEnd = end
		}
	}
	to := JumpScheduled
	if !orphanEnd.IsZero() && (next.IsZero() || !next.Before(orphanEnd)) {
		next, to = orphanEnd.Add(time.Millisecond), JumpLockExpiry
	}
	if !limit.IsZero() && (next.IsZero() || limit.Before(next)) {
		next, to = limit, JumpSendAfter
	}
	if end, ok := h.outages.nextEnd(h.clock.Now()); ok && (next.IsZero() || end.Before(next)) {
		next, to = end, JumpOutageEnd
	}
	if anyHeld {
		if end, ok := h.idleSessions.firstWaitEnd(); ok && (next.IsZero() || end.Before(next)) {
			next, to = end, JumpIdleSessions
		}
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

// FireTimers invokes every timer function once, now, in name order, and
// returns when all have answered. Failed invocations are joined into the
// error. Without timer functions it does nothing.
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

// StopTimers stops running the timer functions on their schedules and
// returns once a scheduled invocation that is running has finished;
// FireTimers still invokes them. It does nothing before Start. `orderstatus-dev dev
// --exit-when-idle` calls it before its final drain, so that no scheduled
// run overlaps the drain or the summary.
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

// deadLetters returns the broker.Source of a queue's dead-letter subqueue.
func deadLetters(queue string) broker.Source { return broker.Source{Queue: queue, DeadLetter: true} }
