package devhost

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// Results the development host counts besides the handler's ReturnValue.result.
const (
	// ResultAbandoned: the call failed (non-2xx, no answer, not JSON).
	ResultAbandoned = "Abandoned"
	// ResultLockLost: the lock was gone when the host settled the message.
	ResultLockLost = "LockLost"
	// ResultCompleted: a 2xx answer without ReturnValue.result.
	ResultCompleted = "Completed"
)

// sessionDispatcher runs a session-enabled serviceBusTrigger function.
type sessionDispatcher struct {
	h                  *Host
	g                  *group // the instances that run fn
	fn, binding, queue string
	workers            int
	callsPerSession    int
	idle               time.Duration // sessionIdleTimeout (broker clock)
	lock               time.Duration // the queue's lock duration
	maxRenew           time.Duration // maxAutoLockRenewalDuration
	acceptOnce         sync.Once
	slots              slotQueue // the session slots waiting for a session
}

// start runs the function's session slots on instance in.
func (d *sessionDispatcher) start(in *instance) {
	d.acceptOnce.Do(func() {
		d.slots.init()
		d.h.workers.Go(func() { d.accept(d.h.acceptCtx) })
	})
	for range max(1, d.workers) {
		in.workers.Add(1)
		d.h.workers.Go(func() {
			defer in.workers.Done()
			for {
				s, ok := d.slots.wait(in)
				if !ok {
					return
				}
				d.session(in, s)
			}
		})
	}
}

// accept takes the queue's sessions whenever a slot waits and hands each to
// the least busy instance, as competing Service Bus receivers share them.
func (d *sessionDispatcher) accept(ctx context.Context) {
	for d.slots.waitAny(ctx) {
		s, err := d.h.broker.AcceptNextSession(ctx, d.queue)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.h.log.Error("accept session failed", slog.String("queue", d.queue), slog.Any("error", err))
			pause(ctx, time.Second)
			continue
		}
		if !d.slots.give(s) {
			s.Close() // every slot left meanwhile: the next accept takes it again
		}
	}
}

// slot is one session slot of an instance waiting for a session.
type slot struct {
	in *instance
	ch chan *membroker.Session // buffered: give never blocks
}

// slotQueue is one function's waiting session slots, across its instances.
type slotQueue struct {
	mu      sync.Mutex
	waiting []*slot
	changed chan struct{} // closed and replaced when a slot starts waiting
	last    map[*instance]uint64
	turn    uint64
}

func (q *slotQueue) init() {
	q.changed = make(chan struct{})
	q.last = map[*instance]uint64{}
}

// wait returns the next session handed to a slot of in; false once in stops.
func (q *slotQueue) wait(in *instance) (*membroker.Session, bool) {
	sl := &slot{in: in, ch: make(chan *membroker.Session, 1)}
	q.mu.Lock()
	if in.acceptCtx.Err() != nil {
		q.mu.Unlock()
		return nil, false
	}
	q.waiting = append(q.waiting, sl)
	close(q.changed)
	q.changed = make(chan struct{})
	q.mu.Unlock()
	select {
	case s := <-sl.ch:
		return s, true
	case <-in.acceptCtx.Done():
	}
	q.mu.Lock()
	i := slices.Index(q.waiting, sl)
	if i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
	}
	q.mu.Unlock()
	if i < 0 { // handed a session as it stopped
		s := <-sl.ch
		s.Close()
	}
	return nil, false
}

// waitAny blocks until at least one slot waits; false once ctx ended.
func (q *slotQueue) waitAny(ctx context.Context) bool {
	for {
		q.mu.Lock()
		n, ch := len(q.waiting), q.changed
		q.mu.Unlock()
		if n > 0 {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// give hands s to the least busy instance's slot; false when no slot waits.
func (q *slotQueue) give(s *membroker.Session) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	idle := map[*instance]int{}
	for _, sl := range q.waiting {
		if sl.in.acceptCtx.Err() == nil {
			idle[sl.in]++
		}
	}
	best := -1
	for i, sl := range q.waiting {
		n := idle[sl.in]
		if n == 0 {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := q.waiting[best].in
		if n > idle[b] || (n == idle[b] && q.last[sl.in] < q.last[b]) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	sl := q.waiting[best]
	q.waiting = slices.Delete(q.waiting, best, best+1)
	q.turn++
	q.last[sl.in] = q.turn
	sl.ch <- s
	return true
}

// session processes s until it is idle, its lock is lost or in stops.
func (d *sessionDispatcher) session(in *instance, s *membroker.Session) {
	acceptCtx, callCtx := in.acceptCtx, in.callCtx
	receivers := max(1, d.callsPerSession)
	d.h.idleSessions.hold(d.queue, 1, receivers)
	defer d.h.idleSessions.hold(d.queue, -1, 0) // after the Close below
	d.h.pool.hold(s.ID(), in)
	defer d.h.pool.release(s.ID(), in)
	var unsettled atomic.Int64 // messages left locked by a kill
	defer func() {
		if !in.killed() {
			s.Close()
			return
		}
		d.h.pool.orphaned(orphan{queue: d.queue, until: s.LockedUntil(), messages: int(unsettled.Load())})
	}()
	var lastReceive atomic.Int64 // broker-clock time of the last message handed out
	lastReceive.Store(d.h.clock.Now().UnixNano())

	renewCtx, stopRenew := context.WithCancel(callCtx)
	var renewing sync.WaitGroup
	if !d.h.opts.DisableLockRenewal && d.maxRenew > 0 {
		renewing.Go(func() { d.renew(renewCtx, s, &lastReceive) })
	}
	defer func() {
		stopRenew()
		renewing.Wait()
	}()

	var calls sync.WaitGroup
	for range receivers {
		calls.Go(func() {
			r := &receiver{queue: d.queue}
			defer d.h.idleSessions.exited(r)
			for acceptCtx.Err() == nil { // no new message once the host stops taking work
				d.h.idleSessions.wait(r, d.h.clock.Now().Add(d.idle))
				m, err := s.Receive(acceptCtx, d.idle)
				d.h.idleSessions.woke(r)
				if err != nil {
					if !errors.Is(err, broker.ErrLockLost) && acceptCtx.Err() == nil {
						d.h.log.Error("receive failed", slog.String("queue", d.queue), slog.String("session_id", s.ID()), slog.Any("error", err))
					}
					return
				}
				if m == nil {
					return // idle for sessionIdleTimeout
				}
				lastReceive.Store(d.h.clock.Now().UnixNano())
				if !d.h.handle(in, d.fn, d.binding, d.queue, m, s) {
					unsettled.Add(1)
				}
			}
		})
	}
	calls.Wait()
}

// renew renews the session lock when half the lock duration is left, while
// the last message was handed out less than maxRenew ago.
func (d *sessionDispatcher) renew(ctx context.Context, s *membroker.Session, lastReceive *atomic.Int64) {
	for {
		wait := s.LockedUntil().Sub(d.h.clock.Now()) - d.lock/2
		if err := clock.Sleep(ctx, d.h.clock, wait); err != nil {
			return
		}
		if d.h.clock.Now().Sub(time.Unix(0, lastReceive.Load())) > d.maxRenew {
			// Past the renewal budget; a new message may start a new one.
			if clock.Sleep(ctx, d.h.clock, d.lock/4) != nil {
				return
			}
			continue
		}
		if err := s.RenewLock(ctx); err != nil {
			if !errors.Is(err, broker.ErrLockLost) && ctx.Err() == nil {
				d.h.log.Warn("session lock renewal failed", slog.String("session_id", s.ID()), slog.Any("error", err))
			}
			return
		}
	}
}

// hostMessage is m as the host hands it to the handler, its times mapped by v.
func hostMessage(m broker.Received, sessionLockedUntil time.Time, v clock.View) hostproto.ServiceBusMessage {
	return hostproto.ServiceBusMessage{
		Body:                  m.Body,
		MessageID:             m.MessageID,
		SessionID:             m.SessionID,
		Subject:               m.Subject,
		ContentType:           m.ContentType,
		CorrelationID:         m.CorrelationID,
		LockToken:             m.LockToken,
		DeadLetterSource:      m.DeadLetterSource,
		DeliveryCount:         m.DeliveryCount,
		SequenceNumber:        m.SequenceNumber,
		EnqueuedTime:          v.ToReal(m.EnqueuedTime),
		ExpiresAt:             v.ToReal(m.ExpiresAt),
		ApplicationProperties: m.ApplicationProperties,
		SessionLockedUntil:    v.ToReal(sessionLockedUntil),
	}
}

// handle invokes fn on in for m and settles it in st: 2xx completes, anything
// else abandons. Once in was killed nothing is settled, and it reports false.
func (h *Host) handle(in *instance, fn, binding, queue string, m *broker.Received, st *membroker.Session) (settled bool) {
	ctx := in.callCtx
	h.stats.callStarted()
	defer h.stats.callDone()
	in.counts.bump(&in.counts.invocations)
	// Built only on the failure paths.
	log := func() *slog.Logger {
		return h.log.With(slog.String("function", fn), slog.String("message_id", m.MessageID),
			slog.String("session_id", m.SessionID), slog.Int("delivery_count", int(m.DeliveryCount)), slog.String("instance", in.id))
	}
	// Settle even while the host shuts down: the answer is in.
	settleCtx := context.WithoutCancel(ctx)
	count := func(result string) {
		h.stats.result(result)
		in.counts.result(result)
	}

	body, err := hostenc.EncodeServiceBus(hostMessage(*m, st.LockedUntil(), h.view()), binding, fn, time.Now())
	var a answer
	if err == nil {
		a, err = in.inv.invoke(ctx, fn, body)
	}
	if in.killed() {
		return false
	}
	if err == nil && a.OK() {
		if err := st.Complete(settleCtx, m); err != nil {
			count(ResultLockLost)
			if errors.Is(err, broker.ErrLockLost) {
				log().Warn("the answer came after the lock was lost; the message is delivered again", slog.Any("error", err))
			} else {
				log().Error("complete failed; the message is delivered again", slog.Any("error", err))
			}
			return true
		}
		result := cmp.Or(a.Result, ResultCompleted)
		h.stats.completed(queue, *m, result)
		in.counts.result(result)
		return true
	}
	if err != nil {
		log().Warn("invocation failed; abandoning the message", slog.Any("error", err))
		if errors.Is(err, errNoAnswer) {
			in.inv.awaitHealthy(ctx)
		}
	} else {
		log().Warn("invocation failed; abandoning the message", slog.Int("status", a.Status), slog.Any("logs", a.Logs))
	}
	if err := st.Abandon(settleCtx, m); err != nil {
		count(ResultLockLost)
	} else {
		count(ResultAbandoned)
	}
	return true
}

// pause waits d of wall-clock time or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// view maps the host's clock to the handler's real one (as loopback.HeaderClientTime).
func (h *Host) view() clock.View { return clock.OffsetOf(h.clock, time.Now()) }
