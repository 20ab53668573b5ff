package orderstate

import (
	"context"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Lock is the session lock a message was delivered under (the host's
// SessionActions.SessionLockedUntil); the zero Lock is unknown.
type Lock struct{ Until time.Time }

// IsZero reports whether the lock is unknown.
func (l Lock) IsZero() bool { return l.Until.IsZero() }

// ApplyUnder is Apply for a message delivered under lock: within the cached entry's lock
// it writes with the cached ETag at once, across locks as bet says. Apply uses the zero Lock.
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
