// Package memstore is the in-memory order-row backend with tablestore's
// contract, for tests and the development host; production never uses it.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// Store holds order rows in memory, safe for concurrent use; call New.
type Store struct {
	mu      sync.Mutex
	rows    map[string]store.Row
	version uint64
}

// New returns an empty Store.
func New() *Store {
	return &Store{rows: make(map[string]store.Row)}
}

// errUnconditional is returned by Replace for the empty or wildcard ETag.
var errUnconditional = errors.New("unconditional write refused: an ETag from a read or write is required")

// Get returns the row of orderID, or an error wrapping store.ErrNotFound.
func (s *Store) Get(ctx context.Context, orderID string) (store.Row, error) {
	if err := check(ctx, orderID); err != nil {
		return store.Row{}, fmt.Errorf("memstore: get %s: %w", orderID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row, ok := s.rows[orderID]
	if !ok {
		return store.Row{}, fmt.Errorf("memstore: get %s: %w", orderID, store.ErrNotFound)
	}
	return row, nil
}

// Insert creates the row of orderID with st and returns its ETag;
// store.ErrConflict if it exists.
func (s *Store) Insert(ctx context.Context, orderID string, st order.State) (store.ETag, error) {
	if err := check(ctx, orderID); err != nil {
		return "", fmt.Errorf("memstore: insert %s: %w", orderID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.rows[orderID]; ok {
		return "", fmt.Errorf("memstore: insert %s: %w", orderID, store.ErrConflict)
	}
	return s.put(orderID, st), nil
}

// Replace overwrites orderID's row if its ETag is etag and returns the new
// one; else store.ErrConflict or store.ErrNotFound. "" and "*" are refused.
func (s *Store) Replace(ctx context.Context, orderID string, st order.State, etag store.ETag) (store.ETag, error) {
	if etag == "" || etag == "*" {
		return "", fmt.Errorf("memstore: replace %s: %w", orderID, errUnconditional)
	}
	if err := check(ctx, orderID); err != nil {
		return "", fmt.Errorf("memstore: replace %s: %w", orderID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row, ok := s.rows[orderID]
	switch {
	case !ok:
		return "", fmt.Errorf("memstore: replace %s: %w", orderID, store.ErrNotFound)
	case row.ETag != etag:
		return "", fmt.Errorf("memstore: replace %s: %w", orderID, store.ErrConflict)
	}
	return s.put(orderID, st), nil
}

// put stores st under a fresh ETag. The caller holds s.mu.
func (s *Store) put(orderID string, st order.State) store.ETag {
	s.version++
	etag := store.ETag(`W/"` + strconv.FormatUint(s.version, 10) + `"`)
	s.rows[orderID] = store.Row{OrderID: orderID, State: normalize(st), ETag: etag}
	return etag
}

// normalize keeps times as Table Storage does: UTC, 100 ns ticks.
func normalize(st order.State) order.State {
	st.OccurredAt = tick(st.OccurredAt)
	st.UpdatedAt = tick(st.UpdatedAt)
	st.Deadline = tick(st.Deadline)
	return st
}

func tick(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(100 * time.Nanosecond)
}

func check(ctx context.Context, orderID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if orderID == "" {
		return errors.New("empty order id")
	}
	return nil
}
