// Package memoutbox is an in-memory outbox.Store: the fake for the relay's
// tests and outboxtest, and a model Store (its transaction a lock).
package memoutbox

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/publish/outbox"
)

// Store keeps records in memory. It is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	parts map[string]*partition
	now   func() time.Time
	ver   int64
}

type partition struct {
	next     int64
	recs     map[string]*outbox.Record // by ID
	timeouts map[string]string         // schedule MessageId -> ID of its record
}

var _ outbox.Store = (*Store)(nil)

// New returns an empty store; now is its clock (nil: time.Now).
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{parts: map[string]*partition{}, now: now}
}

// Commit runs own (the producer's writes, if any; it must not call s) and
// stores the intents' records, all or none; a repeated check is ErrConflict.
func (s *Store) Commit(ctx context.Context, partitionKey string, own func() error, intents ...outbox.Intent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	recs, err := outbox.Encode(partitionKey, s.now(), intents...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[partitionKey]
	if p == nil {
		p = &partition{recs: map[string]*outbox.Record{}, timeouts: map[string]string{}}
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Kind == outbox.KindSchedule {
			id := r.Message.MessageID
			if _, dup := p.timeouts[id]; dup || seen[id] {
				return fmt.Errorf("memoutbox: commit %s: timeout %s scheduled already: %w", partitionKey, id, outbox.ErrConflict)
			}
			seen[id] = true
		}
	}
	if own != nil {
		if err := own(); err != nil {
			return err
		}
	}
	s.parts[partitionKey] = p
	for _, r := range recs {
		p.next++
		r.Seq, r.ID = p.next, fmt.Sprintf("r:%020d", p.next)
		r.Version = s.version()
		if r.Kind == outbox.KindSchedule {
			p.timeouts[r.Message.MessageID] = r.ID
		}
		p.recs[r.ID] = &r
	}
	return nil
}

func (s *Store) version() string {
	s.ver++
	return strconv.FormatInt(s.ver, 10)
}

// Pending implements outbox.Store: by partition key, then Seq.
func (s *Store) Pending(ctx context.Context, max int) ([]outbox.Record, error) {
	return s.list(ctx, max, func(r *outbox.Record) bool { return r.State == outbox.Pending })
}

func (s *Store) list(ctx context.Context, max int, keep func(*outbox.Record) bool) ([]outbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []outbox.Record
	for _, k := range slices.Sorted(maps.Keys(s.parts)) {
		p := s.parts[k]
		for _, id := range slices.Sorted(maps.Keys(p.recs)) {
			if len(out) >= max {
				return out, nil
			}
			if r := p.recs[id]; keep(r) {
				out = append(out, *r)
			}
		}
	}
	return out, nil
}

// Timeouts implements outbox.Store.
func (s *Store) Timeouts(ctx context.Context, partitionKey, orderID string) ([]outbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []outbox.Record
	if p := s.parts[partitionKey]; p != nil {
		for _, id := range p.timeouts {
			if r := p.recs[id]; r.OrderID == orderID {
				out = append(out, *r)
			}
		}
	}
	slices.SortFunc(out, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Mark implements outbox.Store.
func (s *Store) Mark(ctx context.Context, partitionKey string, marks []outbox.Mark) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(marks) > outbox.MaxMarks {
		return fmt.Errorf("memoutbox: mark %d: at most %d: %w", len(marks), outbox.MaxMarks, outbox.ErrTooLarge)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[partitionKey]
	for _, m := range marks {
		if m.State != outbox.Sent && m.State != outbox.Failed {
			return fmt.Errorf("memoutbox: mark %s/%s: state %q", partitionKey, m.ID, m.State)
		}
		if p == nil || p.recs[m.ID] == nil {
			return fmt.Errorf("memoutbox: mark %s/%s: %w", partitionKey, m.ID, outbox.ErrNotFound)
		}
		if m.Version != "" && p.recs[m.ID].Version != m.Version {
			return fmt.Errorf("memoutbox: mark %s/%s: version %s, is %s: %w", partitionKey, m.ID, m.Version, p.recs[m.ID].Version, outbox.ErrConflict)
		}
	}
	for _, m := range marks {
		r := p.recs[m.ID]
		r.State, r.DoneAt, r.Version = m.State, m.DoneAt.UTC(), s.version()
		if m.SequenceNumber != 0 {
			r.SequenceNumber = m.SequenceNumber
		}
		if m.Error != "" {
			r.Error = m.Error
		}
	}
	return nil
}

// Purge implements outbox.Store.
func (s *Store) Purge(ctx context.Context, before time.Time, max int) (int, error) {
	old, err := s.list(ctx, max, func(r *outbox.Record) bool { return r.State == outbox.Sent && r.DoneAt.Before(before) })
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range old {
		p := s.parts[r.Partition]
		delete(p.recs, r.ID)
		if r.Kind == outbox.KindSchedule && p.timeouts[r.Message.MessageID] == r.ID {
			delete(p.timeouts, r.Message.MessageID)
		}
	}
	return len(old), nil
}
