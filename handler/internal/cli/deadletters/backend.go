package deadletters

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/connect"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlops"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// The dead-letter store's settings, as the function app reads them.
const (
	EnvDeadLetterTable     = config.EnvDeadLetterTable
	EnvDeadLetterRetention = config.EnvDeadLetterRetention

	DefaultDeadLetterTable = config.DefaultDeadLetterTable
)

// OrderRows reads one order's row in the order table (find --order).
type OrderRows interface {
	Get(ctx context.Context, orderID string) (store.Row, error)
}

// Backend is what the commands work on (Env.Connect's in tests).
type Backend struct {
	Broker deadletter.Broker
	// NoBroker says why Broker is nil (connect.Resolve).
	NoBroker error
	Store    dlstore.Store
	// Orders reads order rows; nil when the account has none (find says so).
	Orders OrderRows
	Queues deadletter.Queues
	// Now is the clock (nil: time.Now); ReceiveWait, a sweep's receive wait.
	Now         func() time.Time
	ReceiveWait time.Duration
	// Close releases the connections (nil: nothing to release).
	Close func()
}

// openStore opens the dead-letter store; infra creates the table.
func openStore(svc *aztables.ServiceClient, table string) (dlstore.Store, error) {
	return dltable.New(svc, table, nil), nil
}

// connect resolves the backend: Env.Connect, else package connect.
func (c *cli) connect() (*Backend, error) {
	if c.env.Connect != nil {
		return c.env.Connect(c.ctx)
	}
	t, err := connect.Resolve(connect.Options{Namespace: c.namespace, Tables: c.tables, Getenv: c.env.Getenv, Dir: c.env.Dir})
	if err != nil {
		return nil, err
	}
	closeBroker := func() {
		if t.Broker == nil {
			return
		}
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
	b := &Backend{
		NoBroker: t.NoBroker,
		Store:    st,
		Orders:   tablestore.NewFromService(svc, orDefault(c.env.Getenv(config.EnvStoreTable), config.DefaultTable), nil),
		Queues:   deadletter.Queues{Queue: t.Queue, PoisonQueue: t.PoisonQueue},
		Close:    closeBroker,
	}
	if t.Broker != nil {
		b.Broker = t.Broker
	}
	return b, nil
}

// use is what a command does; only sending needs Service Bus.
type use int

const (
	// reads: the store, and Service Bus where it can, at one instant.
	reads use = iota
	// changesStore: archive, discard, restore, each change stamped when made.
	changesStore
	// sends: replay and sweep; they need Service Bus.
	sends
)

// session is one connected command (or MCP server): the backend, the
// settings and, for a command, its sweeper.
type session struct {
	*Backend
	dl        config.DeadLetter
	retention time.Duration
	// logger gets the sweeper's log lines (nil: none).
	logger *slog.Logger
	sw     dlops.Ops
}

func (s *session) close() {
	if s.Close != nil {
		s.Close()
	}
}

// open reads the settings, connects and builds the sweeper for u.
func (c *cli) open(u use) (*session, error) {
	s, err := c.connectSession()
	if err != nil {
		return nil, err
	}
	if s.sw, err = s.ops(u); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// connectSession reads the settings and connects.
func (c *cli) connectSession() (*session, error) {
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
	return &session{Backend: b, dl: dl, retention: retention}, nil
}

// ops builds the sweeper for u: reads see one instant and wait for Service
// Bus once; sends need it.
func (s *session) ops(u use) (dlops.Ops, error) {
	var bus deadletter.Broker = absentBroker{why: s.NoBroker}
	switch {
	case s.Broker != nil:
		bus = s.Broker
	case u == sends:
		return dlops.Ops{}, cmp.Or(s.NoBroker, connect.ErrNoTarget)
	}
	now := s.Now
	if now == nil {
		now = time.Now
	}
	if u == reads {
		at := now()
		bus, now = &waitOnce{Broker: bus}, func() time.Time { return at }
	}
	return dlops.Ops{Sweeper: deadletter.New(bus, s.Store, deadletter.Options{
		Queues:        s.Queues,
		Policy:        deadletter.Policy{Cooldown: s.dl.Cooldown, MaxReplays: s.dl.MaxReplays},
		RatePerSecond: s.dl.SweepRate,
		Retention:     s.retention,
		ReceiveWait:   s.ReceiveWait,
		Now:           now,
		Logger:        s.logger,
	})}, nil
}

// waitOnce fails peeks at once after a transient failure: one timeout.
type waitOnce struct {
	deadletter.Broker
	mu     sync.Mutex
	silent error
}

func (w *waitOnce) Peek(ctx context.Context, src broker.Source, max int, from int64) ([]broker.Received, error) {
	w.mu.Lock()
	silent := w.silent
	w.mu.Unlock()
	if silent != nil {
		return nil, fmt.Errorf("not tried after an earlier call did not answer: %w", silent)
	}
	msgs, err := w.Broker.Peek(ctx, src, max, from)
	if errors.Is(err, broker.ErrTransient) {
		w.mu.Lock()
		w.silent = err
		w.mu.Unlock()
	}
	return msgs, err
}

// absentBroker stands in for a missing Service Bus: calls fail with why.
type absentBroker struct{ why error }

var _ deadletter.Broker = absentBroker{}

func (a absentBroker) err() error {
	return fmt.Errorf("Service Bus: %w", cmp.Or(a.why, connect.ErrNoTarget))
}

func (a absentBroker) Send(context.Context, string, broker.Message) error { return a.err() }
func (a absentBroker) Receive(context.Context, broker.Source, int, time.Duration) ([]broker.Received, error) {
	return nil, a.err()
}
func (a absentBroker) Peek(context.Context, broker.Source, int, int64) ([]broker.Received, error) {
	return nil, a.err()
}
func (a absentBroker) Complete(context.Context, broker.Source, broker.Received) error { return a.err() }
func (a absentBroker) Abandon(context.Context, broker.Source, broker.Received) error  { return a.err() }

func orDefault(v, def string) string {
	if v = strings.TrimSpace(v); v != "" {
		return v
	}
	return def
}
