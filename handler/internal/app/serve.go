package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/internal/api"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/sbbroker"
	"github.com/orderstatus/orderstatus/handler/internal/circuit"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
	"github.com/orderstatus/orderstatus/handler/internal/fleetmetrics"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/orderfn"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// BrokerOpener returns the Service Bus port the settings name, or nil (poison then gets 5xx).
type BrokerOpener func(config.Config, azcore.TokenCredential) (broker.Broker, error)

// ServiceBus is the deployed opener (the namespace, with cred); it refuses a dev-host broker URL.
func ServiceBus(cfg config.Config, cred azcore.TokenCredential) (broker.Broker, error) {
	switch {
	case cfg.DevBrokerURL != "":
		return nil, fmt.Errorf("%s is set: this binary talks only to Service Bus; the development host runs bin/orderstatus-dev", config.EnvDevBrokerURL)
	case cfg.ServiceBusNamespace != "":
		return sbbroker.New(cfg.ServiceBusNamespace, cred, nil)
	}
	return nil, nil
}

// ServeOptions make a serve command.
type ServeOptions struct {
	Program    string // the binary's name, in messages
	Build      Build
	OpenBroker BrokerOpener
	// Before runs first (the dev kit starts its CPU profile); its result runs on the way out.
	Before func(getenv func(string) string) (func(), error)
}

// Serve is the serve command.
func Serve(o ServeOptions) Command {
	return Command{"serve", "serve the functions for the Functions host (the default; what Azure runs)", func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		if len(args) > 0 {
			if IsHelp(args[0]) {
				fmt.Fprintf(stdout, serveHelp, o.Program)
				return ExitOK
			}
			fmt.Fprintf(stderr, "%s serve: unexpected argument %q (serve takes no arguments; settings are environment variables, see %s serve --help)\n", o.Program, args[0], o.Program)
			return ExitUsage
		}
		if o.Before != nil {
			after, err := o.Before(os.Getenv)
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", o.Program, err)
				return ExitFailure
			}
			defer after()
		}
		return serve(ctx, stdout, stderr, o)
	}}
}

const serveHelp = `usage: %s serve

Serves the functions (OrderStatus, DeadLetterSweeper, GetOrder, Metrics) on
127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT, as the Functions host expects, until
SIGTERM, then finishes in-flight calls and exits 0. The Functions host starts
it; 'orderstatus-dev dev' runs it locally.

Settings (environment variables; the Configuration table of docs/configuration.md has them all):
  FUNCTIONS_CUSTOMHANDLER_PORT                  port, set by the host (required)
  ServiceBusConnection__fullyQualifiedNamespace Service Bus namespace (managed identity)
  OrderStore__serviceUri | OrderStore__connectionString   the order table's account
  ORDER_STATUS_QUEUE, POISON_QUEUE, OrderStore__tableName, ORDER_STATUS_RETRY_BUDGET, LOG_LEVEL
  DEAD_LETTER_SWEEP_SCHEDULE, DEAD_LETTER_REPLAY_COOLDOWN, DEAD_LETTER_MAX_REPLAYS,
  DEAD_LETTER_SWEEP_RATE, DEAD_LETTER_TABLE, DEAD_LETTER_RETENTION   (the DeadLetterSweeper)
  ORDER_STATUS_RETRY_RESCHEDULE, ORDER_STATUS_RETRY_BASE, ORDER_STATUS_RETRY_CAP, ORDER_STATUS_RETRY_WINDOW
                                                outages become scheduled retries (docs/outages.md)

exit codes: 0 stopped cleanly, 1 a bad setting or a failed start, 2 an argument was given.
`

// serve runs the custom handler until ctx is cancelled (SIGTERM).
func serve(ctx context.Context, stdout, stderr io.Writer, o ServeOptions) int {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, o.Program+":", err)
		return ExitFailure
	}
	log := logging.WithInstance(logging.New(stdout, stderr, cfg.LogLevel), logging.InstanceID(os.Getenv))

	reg := prometheus.NewRegistry()
	m := metrics.New(reg, o.Build.Version, &metrics.Options{Revision: o.Build.Revision()})
	fleet := fleetmetrics.New(reg, log, nil)
	defer fleet.Flush()

	cred, err := credential(cfg)
	if err != nil {
		log.Error("start-up failed: credential", "error", err.Error())
		return ExitFailure
	}

	tables, err := newTableStore(cfg, cred, m)
	if err != nil {
		log.Error("start-up failed: store", "error", err.Error())
		return ExitFailure
	}
	bus, err := o.OpenBroker(cfg, cred)
	if err != nil {
		log.Error("start-up failed: service bus", "error", err.Error())
		return ExitFailure
	}
	var sender parking.Sender
	if bus != nil {
		sender = bus
		defer func() {
			closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = bus.Close(closeCtx)
		}()
	} else {
		log.Warn("no Service Bus configured: poison messages will be answered 5xx instead of parked",
			"setting", config.EnvServiceBusNamespace)
	}

	orders := orderstate.New(tables, &orderstate.Options{PaymentTimeout: cfg.PaymentTimeout})
	// stopping ends in-call retry waits at shutdown: those calls answer 5xx.
	stopping, cancelStopping := context.WithCancel(context.Background())
	defer cancelStopping()
	fnOpts := orderfn.Options{
		Retry:          retry.Policy{Budget: cfg.RetryBudget},
		Stop:           stopping,
		PaymentTimeout: cfg.PaymentTimeout,
	}
	switch {
	case cfg.Retry.Reschedule && bus == nil:
		log.Warn("no Service Bus configured: transient failures are answered 5xx after the budget instead of rescheduled, and no payment timeout is scheduled",
			"setting", config.EnvRetryReschedule)
	case cfg.Retry.Reschedule:
		fnOpts.Reschedule = reschedule.New(bus, cfg.Queue,
			reschedule.Policy{Base: cfg.Retry.Base, Cap: cfg.Retry.Cap, Window: cfg.Retry.Window},
			&reschedule.Options{PaymentTimeout: cfg.PaymentTimeout})
		fnOpts.Breaker = orderfn.NewBreaker(m, log, circuit.Options{ProbeInterval: min(circuit.DefaultProbeInterval, cfg.Retry.Cap)})
	}
	orderStatus := orderfn.New(orders, parking.New(sender, cfg.PoisonQueue), m, log, fnOpts)
	var sweeper *deadletter.Sweeper
	if bus != nil {
		if sweeper, err = newSweeper(cfg, cred, bus, reg, log); err != nil {
			log.Error("start-up failed: dead-letter tables", "error", err.Error())
			return ExitFailure
		}
	}
	router := api.New(api.Options{
		Orders:   orders,
		Gatherer: reg,
		Functions: map[string]http.Handler{
			"OrderStatus":           orderStatus,
			deadletter.FunctionName: deadletter.Function(sweeper, log),
		},
		Logger: log,
	})

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("start-up failed: listen", "addr", addr, "error", err.Error())
		return ExitFailure
	}
	srv := &http.Server{
		Handler:           router,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// Listen first for the readiness probe; a message before the table exists is retried.
	go ensureTable(stopping, tables, cfg.StoreTable, log)
	go fleet.Run(stopping)
	log.Info("handler listening", "addr", addr, "queue", cfg.Queue, "poison_queue", cfg.PoisonQueue,
		"table", cfg.StoreTable, "retry_budget", cfg.RetryBudget.String(), "retry_reschedule", cfg.Retry.Reschedule,
		"retry_base", cfg.Retry.Base.String(), "retry_cap", cfg.Retry.Cap.String(), "retry_window", cfg.Retry.Window.String(), "version", o.Build.Version)

	select {
	case err := <-served:
		log.Error("server stopped", "error", err.Error())
		return ExitFailure
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight calls")
	cancelStopping()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.RetryBudget+15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Error("shutdown incomplete", "error", err.Error())
		return ExitFailure
	}
	log.Info("stopped")
	return ExitOK
}

// credential returns the Entra ID credential, or nil when no setting needs one.
func credential(cfg config.Config) (azcore.TokenCredential, error) {
	if cfg.StoreServiceURI == "" && cfg.ServiceBusNamespace == "" {
		return nil, nil
	}
	clientID := cfg.ClientID
	if clientID == "" {
		clientID = cfg.ServiceBusClientID
	}
	if clientID != "" {
		return azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ID: azidentity.ClientID(clientID)})
	}
	return azidentity.NewDefaultAzureCredential(nil)
}

func newTableStore(cfg config.Config, cred azcore.TokenCredential, m *metrics.Metrics) (*tablestore.Store, error) {
	opts := &tablestore.Options{Observe: m.ObserveStore}
	if cfg.StoreConnectionString != "" {
		return tablestore.NewFromConnectionString(cfg.StoreConnectionString, cfg.StoreTable, opts)
	}
	return tablestore.NewWithCredential(cfg.StoreServiceURI, cfg.StoreTable, cred, opts)
}

// ensureTable creates the table if absent, retrying transient failures until done or ctx
// ends; a 403 createRefused (Microsoft Learn, Azure Storage "Common REST API error codes")
// means infra owns the table (infra/app/storage.bicep): one line, no retry.
func ensureTable(ctx context.Context, s *tablestore.Store, table string, log *slog.Logger) {
	err := retry.Do(ctx, ctx, retry.Policy{Budget: 10 * time.Minute, Initial: 500 * time.Millisecond, Max: 30 * time.Second},
		func(err error) bool { return errors.Is(err, store.ErrTransient) && !createRefused(err) }, s.EnsureTable,
		func(a retry.Attempt) {
			log.Warn("table not ensured yet, retrying", "table", table, "attempt", a.Number, "error", a.Err.Error())
		})
	switch {
	case err == nil || ctx.Err() != nil:
	case createRefused(err):
		log.Info("table not created: this identity may not create tables; infra owns the table", "table", table, "error", err.Error())
	default:
		log.Error("could not ensure the table exists", "table", table, "error", err.Error())
	}
}

// createRefused reports a 403 AuthorizationPermissionMismatch or AuthorizationFailure: a refused create.
func createRefused(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusForbidden &&
		(re.ErrorCode == "AuthorizationPermissionMismatch" || re.ErrorCode == "AuthorizationFailure")
}

// newSweeper builds the dead-letter sweeper on bus and the order table's account.
func newSweeper(cfg config.Config, cred azcore.TokenCredential, bus broker.Broker, reg prometheus.Registerer, log *slog.Logger) (*deadletter.Sweeper, error) {
	var (
		svc *aztables.ServiceClient
		err error
	)
	if cfg.StoreConnectionString != "" {
		svc, err = aztables.NewServiceClientFromConnectionString(cfg.StoreConnectionString, nil)
	} else {
		svc, err = aztables.NewServiceClient(cfg.StoreServiceURI, cred, nil)
	}
	if err != nil {
		return nil, errors.New("table service client: check OrderStore__serviceUri / OrderStore__connectionString")
	}
	dl := cfg.DeadLetter
	st := dltable.New(svc, dl.Table, &dltable.Options{Logger: log})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.EnsureTable(ctx); err != nil {
			log.Info("dead-letter table not created (infra creates it; a table-scoped role may refuse the create)", "table", dl.Table, "error", err.Error())
		}
	}()
	return deadletter.New(bus, st, deadletter.Options{
		Queues:        deadletter.Queues{Queue: cfg.Queue, PoisonQueue: cfg.PoisonQueue},
		Policy:        deadletter.Policy{Cooldown: dl.Cooldown, MaxReplays: dl.MaxReplays},
		RatePerSecond: dl.SweepRate,
		Retention:     dl.Retention,
		Metrics:       deadletter.NewMetrics(reg),
		Logger:        log,
	}), nil
}
