package deadletters

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/connect"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// The dead-letter store's settings, as the function app reads them
// (package config).
const (
	EnvDeadLetterTable     = config.EnvDeadLetterTable
	EnvDeadLetterRetention = config.EnvDeadLetterRetention

	DefaultDeadLetterTable = config.DefaultDeadLetterTable
)

// OrderRows reads one order's row in the order table (find --order).
type OrderRows interface {
	Get(ctx context.Context, orderID string) (store.Row, error)
}

// Backend is what the commands work on: the broker, the dead-letter store
// and the order rows, and the queues. Env.Connect returns one in tests;
// otherwise connect builds it.
type Backend struct {
	Broker deadletter.Broker
	Store  dlstore.Store
	// Orders reads order rows; nil when the account has none to read
	// (find then says so).
	Orders OrderRows
	Queues deadletter.Queues
	// Now is the clock when the broker has none of its own (nil:
	// time.Now); ReceiveWait is how long a sweep's receive waits on an
	// empty source (0: the sweeper's default).
	Now         func() time.Time
	ReceiveWait time.Duration
	// TimeScale is how many times faster than real time the broker's
	// clock runs: the development host's --time-scale (devrun.Endpoints),
	// 0 or 1 for real time, as for Service Bus in Azure. Above 1, the
	// reading commands say on stderr which clock their times are on.
	TimeScale float64
	// Close releases the connections (nil: nothing to release).
	Close func()
}

// openStore opens the dead-letter store in table of the account svc. It
// must not create the table: infra does (a table-scoped role may refuse
// CreateTable), and a dry run writes nothing.
func openStore(svc *aztables.ServiceClient, table string) (dlstore.Store, error) {
	return dltable.New(svc, table, nil), nil
}

// connect resolves where the command works: Env.Connect, else package
// connect's broker and Table Storage account.
func (c *cli) connect() (*Backend, error) {
	if c.env.Connect != nil {
		return c.env.Connect(c.ctx)
	}
	t, err := connect.ServiceBus(connect.Options{Namespace: c.namespace, Tables: c.tables, Getenv: c.env.Getenv, Dir: c.env.Dir})
	if err != nil {
		return nil, err
	}
	closeBroker := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = t.Broker.Close(ctx)
	}
	svc, _, err := t.Tables()
	if err != nil {
		closeBroker()
		return nil, err
	}
	open := openStore
	if c.env.OpenStore != nil {
		open = c.env.OpenStore
	}
	st, err := open(svc, orDefault(c.env.Getenv(EnvDeadLetterTable), DefaultDeadLetterTable))
	if err != nil {
		closeBroker()
		return nil, err
	}
	scale := 0.0
	if t.DevHost != nil {
		scale = t.DevHost.TimeScale
	}
	return &Backend{
		TimeScale: scale,
		Broker:    t.Broker,
		Store:     st,
		Orders:    tablestore.NewFromService(svc, orDefault(c.env.Getenv(config.EnvStoreTable), config.DefaultTable), nil),
		Queues:    deadletter.Queues{Queue: t.Queue, PoisonQueue: t.PoisonQueue},
		Close:     closeBroker,
	}, nil
}

// session is one connected command: the backend and the sweeper on it
// with the policy settings.
type session struct {
	*Backend
	sw *deadletter.Sweeper
}

func (s *session) close() {
	if s.Close != nil {
		s.Close()
	}
}

// open reads the settings, connects and builds the sweeper.
func (c *cli) open() (*session, error) {
	dl, err := config.LoadDeadLetter(c.env.Getenv)
	if err != nil {
		return nil, err
	}
	retention := time.Duration(0) // the sweeper's default
	if v := strings.TrimSpace(c.env.Getenv(EnvDeadLetterRetention)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: want a Go duration above 0, such as 720h", EnvDeadLetterRetention, v)
		}
		retention = d
	}
	b, err := c.connect()
	if err != nil {
		return nil, err
	}
	sw := deadletter.New(b.Broker, b.Store, deadletter.Options{
		Queues:        b.Queues,
		Policy:        deadletter.Policy{Cooldown: dl.Cooldown, MaxReplays: dl.MaxReplays},
		RatePerSecond: dl.SweepRate,
		Retention:     retention,
		ReceiveWait:   b.ReceiveWait,
		Now:           b.Now,
	})
	return &session{Backend: b, sw: sw}, nil
}

func orDefault(v, def string) string {
	if v = strings.TrimSpace(v); v != "" {
		return v
	}
	return def
}
