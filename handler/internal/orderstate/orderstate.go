// Package orderstate applies order messages to the stored order rows: it
// reads, decides with the pure rules of package order, and writes with ETag
// conditions, looping on lost races. It keeps a bounded per-process cache so
// that the steady state costs one storage round trip per applied message and
// duplicates or stale messages cost none, and it inserts an order's first
// message without reading (one round trip; a 409 falls back to a read).
//
// The cache is trusted for two things only: a cached LastSequence is a lower
// bound of the stored one (sequences never decrease), and a cached ETag is a
// guess the store checks on every write. Anything consequential concluded
// from cached state (an InvalidTransition, which parks the message) is
// confirmed by a fresh read first.
//
// When the app runs on several instances, a session can move to another
// instance and back, leaving this process's entry stale: a write with its
// ETag then loses (a conflict) and costs a reread. ApplyUnder knows the
// session lock a message came under, and Options.CacheTrust decides whether
// an ETag cached under an earlier lock is worth that bet (see CacheTrust).
package orderstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// Backend is the order-row storage the Service needs. memstore.Store and
// tablestore.Store implement it. Implementations classify their failures
// into the store sentinels: Insert of an existing row and Replace with a
// stale ETag fail with store.ErrConflict, Get and Replace of a missing row
// with store.ErrNotFound, and retryable failures wrap store.ErrTransient.
// Replace never writes unconditionally.
type Backend interface {
	Get(ctx context.Context, orderID string) (store.Row, error)
	Insert(ctx context.Context, orderID string, s order.State) (store.ETag, error)
	Replace(ctx context.Context, orderID string, s order.State, etag store.ETag) (store.ETag, error)
}

// Defaults for Options.
const (
	DefaultCacheSize    = 10000
	DefaultMaxConflicts = 10
)

// Options tune a Service. A nil *Options or the zero value gives defaults.
type Options struct {
	// CacheSize bounds the cache (entries, least recently used evicted
	// first). 0 means DefaultCacheSize; a negative value disables the
	// cache, so every call starts with a read.
	CacheSize int
	// MaxConflicts bounds how often one call rereads after a lost
	// conditional write (or a row that vanished) before giving up with
	// ErrContention. 0 means DefaultMaxConflicts.
	MaxConflicts int
	// Now returns the current time, used for UpdatedAt (and OccurredAt when
	// a message has none). nil means time.Now.
	Now func() time.Time
	// CacheTrust is when ApplyUnder writes with a cached ETag (default
	// TrustAlways; see CacheTrust).
	CacheTrust CacheTrust
	// PaymentTimeout is how long after its Created an order may be paid
	// (default contract.PaymentTimeout): ExpireIfUnpaid records the
	// Created's OccurredAt plus it as the cancellation's Deadline.
	PaymentTimeout time.Duration
}

// ErrContention is returned, wrapped, when a call lost more than
// Options.MaxConflicts conditional writes in a row. The error also matches
// store.ErrConflict and store.ErrTransient: nothing was decided, and the
// caller should retry the message like any transient failure.
var ErrContention = errors.New("orderstate: too many conflicting writes")

// Outcome reports what Apply or ExpireIfUnpaid did.
type Outcome struct {
	// Result is Applied, Duplicate, Stale or InvalidTransition.
	Result order.Result
	// Gap is how many sequence numbers an applied update skipped.
	Gap int64
	// State is the state written (Applied) or the stored state the decision
	// was made against; for Duplicate and Stale settled from the cache it
	// is the cached state. The zero State means the order has no row.
	State order.State
	// RoundTrips counts the storage calls made (reads and writes, failed
	// ones included).
	RoundTrips int
	// CacheHit reports that the order was in the cache when the call began.
	CacheHit bool
	// Conflicts counts conditional writes lost to another writer (HTTP 409
	// or 412), each followed by a reread.
	Conflicts int
	// Poison explains an InvalidTransition; nil otherwise. It is returned as
	// an outcome, not an error: the message must be parked, not retried.
	Poison *order.PoisonError
}

// Service applies messages to order rows. It is safe for concurrent use,
// also by several goroutines on the same order and by several processes on
// the same storage: every write is conditional, so a lost race costs a
// reread, never a wrong write.
type Service struct {
	backend      Backend
	cache        *lru
	maxConflicts int
	now          func() time.Time
	trust        CacheTrust
	timeout      time.Duration
	bets         betStats
}

// New returns a Service over backend.
func New(backend Backend, opts *Options) *Service {
	var o Options
	if opts != nil {
		o = *opts
	}
	size := o.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	if o.MaxConflicts <= 0 {
		o.MaxConflicts = DefaultMaxConflicts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PaymentTimeout <= 0 {
		o.PaymentTimeout = contract.PaymentTimeout
	}
	return &Service{backend: backend, cache: newLRU(size), maxConflicts: o.MaxConflicts, now: o.Now, trust: o.CacheTrust, timeout: o.PaymentTimeout}
}

// Apply applies the validated update u (see order.ParseUpdate) to its order
// and reports the outcome. It does not retry transient failures: an error
// is a storage error (errors.Is matches store.ErrTransient when a retry may
// succeed) or the context's error, and the message's effect is then unknown
// until a retry settles it; a retry after a write whose answer was lost
// settles as Duplicate. An InvalidTransition is an Outcome with Poison set,
// never an error.
//
// With u.Sequence at or below the cached LastSequence, Apply answers
// Duplicate or Stale without any storage call. Otherwise it decides against
// the cached state and writes with the cached ETag (one round trip). With
// nothing cached, an update with sequence 1 (an order's first message, as a
// rule) is inserted if absent straight away, and anything else reads first;
// after a failed write of unknown effect the next call reads first. A lost
// conditional write (an insert answered 409 included) is followed by a
// reread and a new decision, at most Options.MaxConflicts times.
func (s *Service) Apply(ctx context.Context, u order.Update) (Outcome, error) {
	return s.apply(ctx, u, Lock{})
}

func (s *Service) apply(ctx context.Context, u order.Update, lock Lock) (Outcome, error) {
	var (
		out    Outcome
		row    store.Row // the state decisions are made against
		exists bool      // row is a stored row (false: the order has none)
		known  bool      // row and exists are set
		fresh  bool      // row was read by this call
		lost   int       // writes lost to other writers
		// betting: the first write uses an ETag cached under an
		// earlier lock (its outcome feeds TrustAdaptive).
		betting bool
	)
	c, ok := s.cache.get(u.OrderID)
	switch {
	case ok && c.Unsure:
		// A write of unknown effect: read before deciding anything.
	case ok:
		out.CacheHit = true
		switch {
		case u.Sequence == c.State.LastSequence:
			out.Result, out.State = order.Duplicate, c.State
			return out, nil
		case u.Sequence < c.State.LastSequence:
			out.Result, out.State = order.Stale, c.State
			return out, nil
		}
		if s.bet(c.Lock, lock) {
			row, exists, known = store.Row{OrderID: u.OrderID, State: c.State, ETag: c.ETag}, true, true
			betting = !lock.IsZero() && c.Lock != lock
		}
	case u.Sequence == 1:
		// Most likely the order's first message: try insert-if-absent at
		// once (one round trip, as a new order costs at the floor), and
		// on 409 read and decide like after any lost write.
		exists, known = false, true
	}
	for {
		if !known {
			r, found, err := s.readUnder(ctx, u.OrderID, lock, &out)
			if err != nil {
				return out, fmt.Errorf("orderstate: apply %s seq %d: %w", u.OrderID, u.Sequence, err)
			}
			row, exists, known, fresh = r, found, true, true
		}
		var current *order.State
		if exists {
			current = &row.State
		}
		d := order.Decide(current, u, s.now())
		switch d.Result {
		case order.Duplicate, order.Stale:
			out.Result, out.State = d.Result, row.State
			return out, nil
		case order.InvalidTransition:
			if !fresh {
				// Parking a message is consequential: confirm with the
				// stored row rather than the cached one.
				known = false
				continue
			}
			out.Result, out.State, out.Poison = d.Result, row.State, d.Poison
			return out, nil
		}

		etag, err := s.write(ctx, u.OrderID, d.Next, row.ETag, exists, &out)
		if betting && (err == nil || errors.Is(err, store.ErrConflict)) {
			s.settle(err != nil)
		}
		betting = false
		switch {
		case err == nil:
			s.cache.put(u.OrderID, cached{ETag: etag, State: d.Next, Lock: lock})
			out.Result, out.State, out.Gap = order.Applied, d.Next, d.Gap
			return out, nil
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			// Someone else wrote (409/412) or removed the row (404): reread.
			s.cache.drop(u.OrderID)
			known = false
			if lost++; lost > s.maxConflicts {
				return out, s.contention("apply", u.OrderID, u.Sequence, lost)
			}
		default:
			// The write may or may not have happened: the next attempt
			// must read first (not even insert-first).
			s.cache.markUnsure(u.OrderID)
			return out, fmt.Errorf("orderstate: apply %s seq %d: %w", u.OrderID, u.Sequence, err)
		}
	}
}

// ExpireIfUnpaid handles a PaymentTimeoutCheck of the Created with
// sequence createdSeq (0: a check of the older form, which names none): an
// order still at that Created becomes Cancelled (LastSequence kept) with
// one conditional write, so a Created applied since (the order created
// again) is never cancelled by an older check; any other order, an unknown
// one included, is Stale and nothing is written (order.DecideExpireOf). It
// always reads the stored row first, because a cached status is not a lower
// bound of anything. Errors are as for Apply.
func (s *Service) ExpireIfUnpaid(ctx context.Context, orderID string, createdSeq int64) (Outcome, error) {
	var out Outcome
	if c, ok := s.cache.get(orderID); ok && !c.Unsure {
		out.CacheHit = true
	}
	for lost := 0; ; {
		row, found, err := s.read(ctx, orderID, &out)
		if err != nil {
			return out, fmt.Errorf("orderstate: expire %s: %w", orderID, err)
		}
		if !found {
			out.Result = order.Stale
			return out, nil
		}
		d := order.DecideExpireOf(&row.State, order.TimeoutCheck{OrderID: orderID, CreatedSequence: createdSeq}, s.timeout, s.now())
		if d.Result != order.Applied {
			out.Result, out.State = d.Result, row.State
			return out, nil
		}
		etag, err := s.write(ctx, orderID, d.Next, row.ETag, true, &out)
		switch {
		case err == nil:
			s.cache.put(orderID, cached{ETag: etag, State: d.Next})
			out.Result, out.State = order.Applied, d.Next
			return out, nil
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			s.cache.drop(orderID)
			if lost++; lost > s.maxConflicts {
				return out, s.contention("expire", orderID, 0, lost)
			}
		default:
			s.cache.markUnsure(orderID)
			return out, fmt.Errorf("orderstate: expire %s: %w", orderID, err)
		}
	}
}

// Get reads the stored row of orderID (never the cache, which it refreshes).
// A missing order fails with an error wrapping store.ErrNotFound.
func (s *Service) Get(ctx context.Context, orderID string) (store.Row, error) {
	var out Outcome
	row, found, err := s.read(ctx, orderID, &out)
	switch {
	case err != nil:
		return store.Row{}, fmt.Errorf("orderstate: get %s: %w", orderID, err)
	case !found:
		return store.Row{}, fmt.Errorf("orderstate: get %s: %w", orderID, store.ErrNotFound)
	}
	return row, nil
}

// read fetches the stored row and refreshes the cache. found is false when
// the order has no row; err is any other failure.
func (s *Service) read(ctx context.Context, orderID string, out *Outcome) (row store.Row, found bool, err error) {
	return s.readUnder(ctx, orderID, Lock{}, out)
}

// readUnder is read for a message delivered under lock.
func (s *Service) readUnder(ctx context.Context, orderID string, lock Lock, out *Outcome) (row store.Row, found bool, err error) {
	out.RoundTrips++
	row, err = s.backend.Get(ctx, orderID)
	switch {
	case err == nil:
		s.cache.put(orderID, cached{ETag: row.ETag, State: row.State, Lock: lock})
		return row, true, nil
	case errors.Is(err, store.ErrNotFound):
		s.cache.drop(orderID)
		return store.Row{}, false, nil
	}
	return store.Row{}, false, err
}

// write inserts (exists false) or conditionally replaces the row.
func (s *Service) write(ctx context.Context, orderID string, next order.State, etag store.ETag, exists bool, out *Outcome) (store.ETag, error) {
	out.RoundTrips++
	var err error
	if exists {
		etag, err = s.backend.Replace(ctx, orderID, next, etag)
	} else {
		etag, err = s.backend.Insert(ctx, orderID, next)
	}
	if errors.Is(err, store.ErrConflict) {
		out.Conflicts++
	}
	return etag, err
}

func (s *Service) contention(op, orderID string, seq int64, lost int) error {
	key := orderID
	if seq > 0 {
		key = fmt.Sprintf("%s seq %d", orderID, seq)
	}
	return fmt.Errorf("orderstate: %s %s: %d writes lost to other writers: %w (%w, %w)",
		op, key, lost, ErrContention, store.ErrConflict, store.ErrTransient)
}
