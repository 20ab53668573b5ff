package orderstate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Lock is the session lock a message was delivered under, the host's
// SessionActions.SessionLockedUntil: messages under one Lock came while one
// instance held the session, so no other wrote since. The zero Lock is unknown.
type Lock struct{ Until time.Time }

// IsZero reports whether the lock is unknown.
func (l Lock) IsZero() bool { return l.Until.IsZero() }

// CacheTrust says when Apply bets on a cached ETag instead of reading first: it
// wins a round trip if no other instance wrote since, loses two if one did.
type CacheTrust int

const (
	// TrustAlways bets on every cached ETag: best with one instance.
	TrustAlways CacheTrust = iota
	// TrustWithinLock bets only within the message's own session lock: never
	// pays for a stale cache, but reads on every session pick-up.
	TrustWithinLock
	// TrustAdaptive bets across locks while such bets lost less than half the
	// time lately, and otherwise once in 16 to notice a change.
	TrustAdaptive
)

func (c CacheTrust) String() string {
	switch c {
	case TrustAlways:
		return "TrustAlways"
	case TrustWithinLock:
		return "TrustWithinLock"
	case TrustAdaptive:
		return "TrustAdaptive"
	}
	return fmt.Sprintf("CacheTrust(%d)", int(c))
}

// ApplyUnder is Apply for a message delivered under lock, weighed against the
// cached entry's lock by Options.CacheTrust; Apply uses the zero Lock.
func (s *Service) ApplyUnder(ctx context.Context, u order.Update, lock Lock) (Outcome, error) {
	return s.apply(ctx, u, lock)
}

// betStats tracks the bets on ETags cached under an earlier lock.
type betStats struct {
	mu    sync.Mutex
	loss  float64 // weighted rate of lost bets
	skips int     // bets skipped since the last one made
}

// betWeight is the weight of the newest bet in the loss rate.
const betWeight = 1.0 / 32

// bet reports whether to write with an ETag cached under another lock.
func (s *Service) bet(cachedUnder, lock Lock) bool {
	if lock.IsZero() || cachedUnder == lock {
		return true
	}
	switch s.trust {
	case TrustWithinLock:
		return false
	case TrustAdaptive:
		b := &s.bets
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.loss < 0.5 || b.skips >= 15 {
			b.skips = 0
			return true
		}
		b.skips++
		return false
	}
	return true
}

// settle records the outcome of a bet across locks.
func (s *Service) settle(lost bool) {
	b := &s.bets
	b.mu.Lock()
	defer b.mu.Unlock()
	x := 0.0
	if lost {
		x = 1
	}
	b.loss += betWeight * (x - b.loss)
}
