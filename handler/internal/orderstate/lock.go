package orderstate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Lock names the session lock a message was delivered under, as the
// handler sees it: the host's SessionActions.SessionLockedUntil. Two
// messages of one order with the same Lock were delivered while one
// instance held the order's session without a break in between, so no
// other instance can have written the order's row since the first (short
// of a lock lost mid-call, which the ETag still catches). A renewal moves
// the time, and so starts a new Lock. The zero Lock is unknown.
type Lock struct{ Until time.Time }

// IsZero reports whether the lock is unknown.
func (l Lock) IsZero() bool { return l.Until.IsZero() }

// CacheTrust says when Apply writes with a cached ETag instead of reading
// the row first. A cached LastSequence settles duplicates and stale
// messages without a round trip under every policy, since it is a lower
// bound of the stored one; what differs is the bet on the cached ETag,
// which wins one round trip when no other instance wrote since (one
// write) and loses two when one did (the failed write and a reread, then
// the write) against reading first (a read and a write).
type CacheTrust int

const (
	// TrustAlways bets on every cached ETag. Best with one instance,
	// where the cache is never stale.
	TrustAlways CacheTrust = iota
	// TrustWithinLock bets only on an ETag cached under the message's
	// own session lock, and reads first otherwise. It never pays for a
	// stale cache, but also reads first when the session came back to
	// the same instance, so it costs a round trip per session pick-up on
	// one instance.
	TrustWithinLock
	// TrustAdaptive bets within the lock, and across locks while the
	// bets across locks this process made lately lost less than half
	// the time (an exponentially weighted rate over about the last 32);
	// while they lose more often, it reads first, and still bets once in
	// 16 times to notice when that changes.
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

// ApplyUnder is Apply for a message delivered under lock: the cache
// remembers the lock each entry was written or read under, and the
// Options.CacheTrust policy decides from it whether the cached ETag is
// worth a write. Apply is ApplyUnder with the zero Lock, under which every
// policy bets as TrustAlways does.
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

// bet reports whether to write with an ETag cached under another lock
// than the message's.
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
