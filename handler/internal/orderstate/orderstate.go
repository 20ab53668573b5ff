// Package orderstate applies order messages to the stored order rows: it reads,
// decides with package order's rules, and writes with ETag conditions, rereading
// on lost races. A bounded per-process cache is trusted only for lower bounds of
// LastSequence and for ETags the store checks; an InvalidTransition from it is reread.
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

// Defaults for Options.
const (
	DefaultCacheSize    = 10000
	DefaultMaxConflicts = 10
)

// Options tune a Service. A nil *Options or the zero value gives defaults.
type Options struct {
	// CacheSize bounds the LRU cache (0: DefaultCacheSize; < 0: no cache).
	CacheSize int
	// MaxConflicts bounds rereads after lost writes (0: DefaultMaxConflicts).
	MaxConflicts int
	// Now is the clock for UpdatedAt and missing OccurredAt (nil: time.Now).
	Now func() time.Time
	// PaymentTimeout (default contract.PaymentTimeout) sets a timeout cancellation's Deadline.
	PaymentTimeout time.Duration
}

// ErrContention (with store.ErrConflict and ErrTransient) follows over MaxConflicts lost writes in a row.
var ErrContention = errors.New("orderstate: too many conflicting writes")

// Outcome reports what Apply or ExpireIfUnpaid did.
type Outcome struct {
	Result order.Result
	// Gap is how many sequence numbers an applied update skipped.
	Gap int64
	// State is the state written (Applied) or decided against; zero: no row.
	State order.State
	// RoundTrips counts the storage calls made, failed ones included.
	RoundTrips int
	// CacheHit reports that the order was in the cache when the call began.
	CacheHit bool
	// Conflicts counts conditional writes lost to other writers (409, 412).
	Conflicts int
	// Poison explains an InvalidTransition: park the message, do not retry.
	Poison *order.PoisonError
}

// Service applies messages to order rows. It is safe for concurrent use, also
// by processes sharing the storage: every write is conditional.
type Service struct {
	backend      store.Backend
	cache        *lru
	maxConflicts int
	now          func() time.Time
	timeout      time.Duration
	bets         betStats
}

// New returns a Service over backend.
func New(backend store.Backend, opts *Options) *Service {
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
	return &Service{backend: backend, cache: newLRU(size), maxConflicts: o.MaxConflicts, now: o.Now, timeout: o.PaymentTimeout}
}

// Apply applies the validated update u to its order, without retrying: after an
// error (store.ErrTransient if a retry may help, or ctx's) the effect is
// unknown. An InvalidTransition is an Outcome with Poison set.
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
		// betting: the first write bets on an ETag cached under an earlier lock.
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
		// Likely the first message: insert at once (a 409 rereads).
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
				// Parking is consequential: confirm on the stored row.
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
			s.cache.drop(u.OrderID)
			known = false
			if lost++; lost > s.maxConflicts {
				return out, s.contention("apply", u.OrderID, u.Sequence, lost)
			}
		default:
			s.cache.markUnsure(u.OrderID)
			return out, fmt.Errorf("orderstate: apply %s seq %d: %w", u.OrderID, u.Sequence, err)
		}
	}
}

// ExpireIfUnpaid reads, then cancels an order still at the Created of sequence createdSeq
// (0: the one in effect) with one conditional write; else Stale (order.DecideExpireOf).
// Errors are as for Apply.
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

// Get reads orderID's stored row, never the cache (store.ErrNotFound if none).
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

// read fetches the stored row and refreshes the cache (found false: no row).
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
