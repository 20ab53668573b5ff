package membroker

import (
	"context"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// Session is a session locked by its acceptor until Close or lock expiry,
// which redelivers its unsettled messages and makes every method return
// broker.ErrLockLost. It is safe for concurrent use.
type Session struct {
	b    *Broker
	q    *queue
	lock *sessionLock
}

// AcceptNextSession locks and returns the unheld session whose first message
// is oldest, waiting for one. ErrInvalid for a queue without sessions.
func (b *Broker) AcceptNextSession(ctx context.Context, queue string) (*Session, error) {
	b.ops.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		q, now, err := b.queueLocked("accept session", queue)
		if err != nil {
			return nil, err
		}
		if !q.opts.RequiresSession {
			return nil, fmt.Errorf("membroker: accept session %s: the queue has no sessions: %w", queue, broker.ErrInvalid)
		}
		if g := q.nextSession(); g != nil {
			l := q.holdSession(g, now)
			q.notify()
			return &Session{b: b, q: q, lock: l}, nil
		}
		if err := b.wait(ctx, q, time.Time{}); err != nil {
			return nil, fmt.Errorf("membroker: accept session %s: %w", queue, err)
		}
	}
}

// ID returns the session id.
func (s *Session) ID() string { return s.lock.g.id }

// check applies the transitions due; ErrLockLost if the lock is gone.
func (s *Session) check(op string) (time.Time, error) {
	now := s.b.clock.Now()
	s.q.advance(now)
	if s.lock.released {
		return now, fmt.Errorf("membroker: %s %s session %s: session lock lost: %w",
			op, s.q.name, s.lock.g.id, broker.ErrLockLost)
	}
	return now, nil
}

// Receive returns the session's next message, waiting up to wait (broker
// time): (nil, nil) when none came, ErrLockLost once the lock is lost.
func (s *Session) Receive(ctx context.Context, wait time.Duration) (*broker.Received, error) {
	s.b.ops.Add(1)
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	now, err := s.check("receive")
	if err != nil {
		return nil, err
	}
	deadline := now.Add(wait)
	for {
		if got := s.lock.g.msgs.firstUnlocked(1); len(got) == 1 {
			e := got[0]
			s.q.lock(e, now, s.lock)
			s.q.notify()
			r := e.out()
			return &r, nil
		}
		if !now.Before(deadline) {
			return nil, nil
		}
		if err := s.b.wait(ctx, s.q, deadline); err != nil {
			return nil, fmt.Errorf("membroker: receive %s session %s: %w", s.q.name, s.lock.g.id, err)
		}
		if now, err = s.check("receive"); err != nil {
			return nil, err
		}
	}
}

// Complete removes m; ErrLockLost if the session no longer holds it.
func (s *Session) Complete(ctx context.Context, m *broker.Received) error {
	return s.settle(ctx, "complete", m, (*queue).settle)
}

// Abandon releases m with its delivery count raised (dead-lettered past
// MaxDeliveryCount); ErrLockLost as for Complete.
func (s *Session) Abandon(ctx context.Context, m *broker.Received) error {
	return s.settle(ctx, "abandon", m, func(q *queue, e *entry) { q.unlock(e, true) })
}

// settle applies done to m's entry if this session still holds it.
func (s *Session) settle(ctx context.Context, op string, m *broker.Received, done func(*queue, *entry)) error {
	s.b.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("membroker: %s %s session %s: %w", op, s.q.name, s.lock.g.id, err)
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, err := s.check(op); err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("membroker: %s %s session %s: nil message: %w", op, s.q.name, s.lock.g.id, broker.ErrInvalid)
	}
	e := s.q.locks[m.LockToken]
	if e == nil || e.holder != s.lock {
		return fmt.Errorf("membroker: %s %s session %s seq %d: not held by this session: %w",
			op, s.q.name, s.lock.g.id, m.SequenceNumber, broker.ErrLockLost)
	}
	done(s.q, e)
	s.q.notify()
	return nil
}

// RenewLock extends the session lock by LockDuration; ErrLockLost if lost.
func (s *Session) RenewLock(ctx context.Context) error {
	s.b.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("membroker: renew %s session %s: %w", s.q.name, s.lock.g.id, err)
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	now, err := s.check("renew")
	if err != nil {
		return err
	}
	s.lock.until = now.Add(s.q.opts.LockDuration)
	for _, e := range s.lock.g.msgs.items {
		if e.holder == s.lock {
			e.lockedUntil = s.lock.until
		}
	}
	s.q.touchSession(s.lock)
	s.q.notify()
	return nil
}

// LockedUntil returns when the session lock expires (or expired).
func (s *Session) LockedUntil() time.Time {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.lock.until
}

// Close releases the session lock as losing it would; again, a no-op.
func (s *Session) Close() error {
	s.b.ops.Add(1)
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.lock.released {
		return nil
	}
	s.q.releaseSession(s.lock, s.b.clock.Now())
	s.q.notify()
	return nil
}
