// Package dlmem is the in-memory dlstore.Store for unit tests of the sweeper
// and the CLI; Fail injects outages.
package dlmem

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Operations Fail can target.
const (
	OpPut        = "put"
	OpGet        = "get"
	OpList       = "list"
	OpTransition = "transition"
	OpHistory    = "history"
	OpPurge      = "purge"
)

// Store keeps entries in memory. The zero value is not usable; call New.
type Store struct {
	mu      sync.Mutex
	entries map[string]dlstore.Entry
	audit   map[string][]dlstore.AuditEntry // by entry id
	version int
	fail    map[string]int
}

var _ dlstore.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{entries: map[string]dlstore.Entry{}, audit: map[string][]dlstore.AuditEntry{}, fail: map[string]int{}}
}

// Fail makes the next n calls of op fail with dlstore.ErrUnavailable.
func (s *Store) Fail(op string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[op] = n
}

// lock checks ctx, locks s and takes an injected failure of op; on nil the
// caller holds s.mu.
func (s *Store) lock(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.fail[op] > 0 {
		s.fail[op]--
		s.mu.Unlock()
		return fmt.Errorf("dlmem: %s: injected: %w", op, dlstore.ErrUnavailable)
	}
	return nil
}

func (s *Store) etag() string {
	s.version++
	return "v" + strconv.Itoa(s.version)
}

func clone(e dlstore.Entry) dlstore.Entry {
	e.Body = slices.Clone(e.Body)
	e.Properties = maps.Clone(e.Properties)
	return e
}

// Put stores e unless an entry with its id exists (see dlstore.Store).
func (s *Store) Put(ctx context.Context, e dlstore.Entry, actor string) (bool, error) {
	e, audit, err := dlstore.Stored(clone(e), actor)
	if err != nil {
		return false, fmt.Errorf("dlmem: put %q: %w", e.ID, err)
	}
	if err := s.lock(ctx, OpPut); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if _, ok := s.entries[e.ID]; ok {
		return false, nil
	}
	e.ETag = s.etag()
	s.entries[e.ID] = e
	s.audit[e.ID] = []dlstore.AuditEntry{audit}
	return true, nil
}

// Get returns the entry with id.
func (s *Store) Get(ctx context.Context, id string) (dlstore.Entry, error) {
	if err := s.lock(ctx, OpGet); err != nil {
		return dlstore.Entry{}, err
	}
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		return dlstore.Entry{}, fmt.Errorf("dlmem: get %s: %w", id, dlstore.ErrNotFound)
	}
	return clone(e), nil
}

// List returns the entries matching f, by StoredAt then id.
func (s *Store) List(ctx context.Context, f dlstore.Filter) ([]dlstore.Entry, error) {
	if err := s.lock(ctx, OpList); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []dlstore.Entry{}
	for _, e := range s.entries {
		if f.Matches(e) {
			out = append(out, clone(e))
		}
	}
	dlstore.SortEntries(out)
	return out, nil
}

// Transition changes e conditionally on its ETag (see dlstore.Store).
func (s *Store) Transition(ctx context.Context, e dlstore.Entry, t dlstore.Transition) (dlstore.Entry, error) {
	if t.Audit == nil && !dlstore.NeedsNoAudit(e.State, t.To) {
		return dlstore.Entry{}, fmt.Errorf("dlmem: transition %s to %s: an audit entry is required", e.ID, t.To)
	}
	if err := s.lock(ctx, OpTransition); err != nil {
		return dlstore.Entry{}, err
	}
	defer s.mu.Unlock()
	cur, ok := s.entries[e.ID]
	if !ok {
		return dlstore.Entry{}, fmt.Errorf("dlmem: transition %s: %w", e.ID, dlstore.ErrNotFound)
	}
	if cur.ETag != e.ETag {
		return dlstore.Entry{}, fmt.Errorf("dlmem: transition %s (etag %s, stored %s): %w", e.ID, e.ETag, cur.ETag, dlstore.ErrConflict)
	}
	next := dlstore.Apply(cur, t)
	next.ETag = s.etag()
	if t.Audit != nil {
		s.audit[e.ID] = append(s.audit[e.ID], dlstore.AuditFor(cur, t))
	}
	s.entries[e.ID] = next
	return clone(next), nil
}

// History returns one order's audit entries (all for ""), in time order.
func (s *Store) History(ctx context.Context, orderID string) ([]dlstore.AuditEntry, error) {
	if err := s.lock(ctx, OpHistory); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []dlstore.AuditEntry{}
	for _, as := range s.audit {
		for _, a := range as {
			if orderID == "" || a.OrderID == orderID {
				out = append(out, a)
			}
		}
	}
	dlstore.SortAudit(out)
	return out, nil
}

// Purge deletes up to limit closed entries updated before before.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.lock(ctx, OpPurge); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var ids []string
	for id, e := range s.entries {
		if e.State.Closed() && e.UpdatedAt.Before(before) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = ids[:max(0, min(limit, len(ids)))]
	for _, id := range ids {
		delete(s.entries, id)
		delete(s.audit, id)
	}
	return len(ids), nil
}
