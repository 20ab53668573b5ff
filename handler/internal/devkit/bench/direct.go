package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// rowStore is the slice of tablestore.Store the direct loops use.
type rowStore interface {
	Get(ctx context.Context, orderID string) (store.Row, error)
	Insert(ctx context.Context, orderID string, s order.State) (store.ETag, error)
	Replace(ctx context.Context, orderID string, s order.State, etag store.ETag) (store.ETag, error)
}

var _ rowStore = (*tablestore.Store)(nil)

// directResult is what a direct loop did.
type directResult struct {
	Elapsed                     time.Duration
	Applied, Duplicates, Stales int
	RoundTrips                  int64
}

// perOrder handles one order's messages in order: a design (limit or naive).
type perOrder func(ctx context.Context, s rowStore, o Order, r *counts) error

type counts struct {
	applied, duplicates, stales, trips atomic.Int64
}

// runDirect runs design over the workload with inFlight orders at a time.
func runDirect(ctx context.Context, s rowStore, w Workload, inFlight int, design perOrder) (directResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan Order)
	var (
		c    counts
		wg   sync.WaitGroup
		once sync.Once
		ferr error
	)
	start := time.Now()
	for range max(1, inFlight) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range next {
				if err := design(ctx, s, o, &c); err != nil {
					once.Do(func() { ferr = err; cancel() })
				}
			}
		}()
	}
	for _, o := range w.Orders {
		select {
		case next <- o:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	if ferr == nil {
		ferr = ctx.Err()
	}
	r := directResult{Elapsed: elapsed, Applied: int(c.applied.Load()), Duplicates: int(c.duplicates.Load()),
		Stales: int(c.stales.Load()), RoundTrips: c.trips.Load()}
	if ferr == nil && (r.Applied != w.Applied || r.Duplicates != w.Duplicates || r.Stales != w.Stales) {
		ferr = fmt.Errorf("bench: settled %d applied, %d duplicate, %d stale; the workload has %d, %d, %d",
			r.Applied, r.Duplicates, r.Stales, w.Applied, w.Duplicates, w.Stales)
	}
	return r, ferr
}

// limitOrder is the storage floor: the only writer knows every row's ETag
// and sequence, so each message that changes the order costs exactly one
// conditional write and the others nothing.
func limitOrder(ctx context.Context, s rowStore, o Order, c *counts) error {
	var (
		etag store.ETag
		last int64
	)
	now := time.Now()
	for _, m := range o.Messages {
		switch {
		case etag != "" && m.Update.Sequence == last:
			c.duplicates.Add(1)
			continue
		case etag != "" && m.Update.Sequence < last:
			c.stales.Add(1)
			continue
		}
		st := order.State{Status: m.Update.Status, LastSequence: m.Update.Sequence, OccurredAt: now, UpdatedAt: now}
		var err error
		c.trips.Add(1)
		if etag == "" {
			etag, err = s.Insert(ctx, o.ID, st)
		} else {
			etag, err = s.Replace(ctx, o.ID, st, etag)
		}
		if err != nil {
			return fmt.Errorf("bench: limit %s: %w", m.ID, err)
		}
		last = m.Update.Sequence
		c.applied.Add(1)
	}
	return nil
}

// naiveOrder is the obvious handler: per message, read, decide and write
// conditionally; nothing cached.
func naiveOrder(ctx context.Context, s rowStore, o Order, c *counts) error {
	for _, m := range o.Messages {
		c.trips.Add(1)
		row, err := s.Get(ctx, o.ID)
		var current *order.State
		switch {
		case err == nil:
			current = &row.State
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("bench: naive %s: %w", m.ID, err)
		}
		d := order.Decide(current, m.Update, time.Now())
		switch d.Result {
		case order.Duplicate:
			c.duplicates.Add(1)
			continue
		case order.Stale:
			c.stales.Add(1)
			continue
		case order.Applied:
		default:
			return fmt.Errorf("bench: naive %s: %s", m.ID, d.Result)
		}
		c.trips.Add(1)
		if current == nil {
			_, err = s.Insert(ctx, o.ID, d.Next)
		} else {
			_, err = s.Replace(ctx, o.ID, d.Next, row.ETag)
		}
		if err != nil {
			return fmt.Errorf("bench: naive %s: %w", m.ID, err)
		}
		c.applied.Add(1)
	}
	return nil
}
