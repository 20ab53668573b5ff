package devhost

import (
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

// Results the development host counts besides the handler's own
// ReturnValue.result.
const (
	// ResultAbandoned: the call failed (non-2xx, no answer, not JSON) and
	// the message was abandoned.
	ResultAbandoned = "Abandoned"
	// ResultLockLost: the message's lock was gone when the host settled it
	// (it is or was delivered again).
	ResultLockLost = "LockLost"
	// ResultCompleted: a 2xx answer without ReturnValue.result.
	ResultCompleted = "Completed"
)

// sessionDispatcher runs one session-enabled serviceBusTrigger function:
// workers (maxConcurrentSessions) each accept a session, receive its
// messages until it is idle for the idle timeout, and close it.
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

// start runs the function's session slots on instance in: each
// instance runs a session processor of its own, as on Flex Consumption.
func (d *sessionDispatcher) start(in *instance) {
	d.acceptOnce.Do(func() {
		d.slots.init()
		d.h.workers.Add(1)
		go func() {
			defer d.h.workers.Done()
			d.accept(d.h.acceptCtx)
		}()
	})
	for range max(1, d.workers) {
		d.h.track(in, func() { d.worker(in) })
	}
}

func (d *sessionDispatcher) worker(in *instance) {
	for {
		s, ok := d.slots.wait(in)
		if !ok {
			return
		}
		d.session(in, s)
	}
}

// accept takes the queue's sessions one at a time, whenever a slot waits,
// and hands each to a waiting slot of the least busy instance (see
// slotQueue.give). Competing receivers on Service Bus share a queue's
// sessions between them; without this, whichever slots the Go scheduler
// woke first took every session, and an instance could take none.
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

// slotQueue is the session slots of one function waiting for a session,
// across its instances. Its methods are safe for concurrent use.
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

// wait blocks until a session is handed to a slot of in, and returns it;
// false once in stops taking work. A session handed over as in stops is
// closed, so that the broker hands it out again at once.
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

// give hands s to a waiting slot of the instance with the most slots
// waiting (the least busy), the one served longest ago among equals, and
// reports false when no slot of a running instance waits.
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

// session processes one accepted session until it is idle, its lock is
// lost, or the instance stops taking work, and then closes it. A killed
// instance closes nothing: its session lock runs out.
func (d *sessionDispatcher) session(in *instance, s *membroker.Session) {
	acceptCtx, callCtx := in.acceptCtx, in.callCtx
	receivers := max(1, d.callsPerSession)
	d.h.idleSessions.hold(d.queue, receivers)
	defer d.h.idleSessions.release(d.queue) // after the Close below
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
		renewing.Add(1)
		go func() {
			defer renewing.Done()
			d.renew(renewCtx, s, &lastReceive)
		}()
	}
	defer func() {
		stopRenew()
		renewing.Wait()
	}()

	var calls sync.WaitGroup
	for range receivers {
		calls.Add(1)
		go func() {
			defer calls.Done()
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
				if !d.h.handle(in, d.fn, d.binding, d.queue, m, s, s.LockedUntil()) {
					unsettled.Add(1)
				}
			}
		}()
	}
	calls.Wait()
}

// renew keeps the session lock alive, renewing it when half the lock
// duration is left, as long as the last message was handed out less than
// maxRenew ago (maxAutoLockRenewalDuration, measured per message).
func (d *sessionDispatcher) renew(ctx context.Context, s *membroker.Session, lastReceive *atomic.Int64) {
	for {
		wait := s.LockedUntil().Sub(d.h.clock.Now()) - d.lock/2
		if err := clock.Sleep(ctx, d.h.clock, wait); err != nil {
			return
		}
		if d.h.clock.Now().Sub(time.Unix(0, lastReceive.Load())) > d.maxRenew {
			// Past the renewal budget: let the lock run out, but look
			// again later in case a new message starts a new budget.
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

// queueDispatcher runs a serviceBusTrigger function on a queue without
// sessions: maxConcurrentCalls workers receive one message at a time. The
// broker port has no per-message lock renewal, so a call longer than the
// lock duration loses its lock.
type queueDispatcher struct {
	h                  *Host
	fn, binding, queue string
	workers            int
}

func (d *queueDispatcher) start(in *instance) {
	for range max(1, d.workers) {
		d.h.track(in, func() {
			acceptCtx := in.acceptCtx
			src := broker.Source{Queue: d.queue}
			st := sourceSettler{b: d.h.broker, src: src}
			for acceptCtx.Err() == nil {
				msgs, err := d.h.broker.Receive(acceptCtx, src, 1, time.Minute)
				if err != nil {
					if acceptCtx.Err() != nil {
						return
					}
					d.h.log.Error("receive failed", slog.String("queue", d.queue), slog.Any("error", err))
					pause(acceptCtx, time.Second)
					continue
				}
				for i := range msgs {
					_ = d.h.handle(in, d.fn, d.binding, d.queue, &msgs[i], st, time.Time{})
				}
			}
		})
	}
}

// settler settles one received message.
type settler interface {
	Complete(ctx context.Context, m *broker.Received) error
	Abandon(ctx context.Context, m *broker.Received) error
}

var _ settler = (*membroker.Session)(nil)

// sourceSettler settles messages of a queue without sessions.
type sourceSettler struct {
	b   broker.Broker
	src broker.Source
}

func (s sourceSettler) Complete(ctx context.Context, m *broker.Received) error {
	return s.b.Complete(ctx, s.src, *m)
}

func (s sourceSettler) Abandon(ctx context.Context, m *broker.Received) error {
	return s.b.Abandon(ctx, s.src, *m)
}

// hostMessage is the message as the host hands it to the handler.
// Its times are mapped by v, from the host's clock to the real one
// (Host.view).
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

// handle invokes fn on instance in for one received message and settles it
// from the answer: 2xx completes, anything else abandons. Nothing is
// settled once in was killed: its locks run out instead, and handle
// reports false.
func (h *Host) handle(in *instance, fn, binding, queue string, m *broker.Received, st settler, lockedUntil time.Time) (settled bool) {
	ctx := in.callCtx
	h.stats.callStarted()
	defer h.stats.callDone()
	in.counts.invoked()
	// Built only on the failure paths: a message that completes logs
	// nothing, and With costs allocations on every message.
	log := func() *slog.Logger {
		return h.log.With(slog.String("function", fn), slog.String("message_id", m.MessageID),
			slog.String("session_id", m.SessionID), slog.Int("delivery_count", int(m.DeliveryCount)), slog.String("instance", in.id))
	}
	// Settle even while the host shuts down: the answer is in.
	settleCtx := context.WithoutCancel(ctx)

	body, err := hostenc.EncodeServiceBus(hostMessage(*m, lockedUntil, h.view()), binding, fn, time.Now())
	var a answer
	if err == nil {
		a, err = in.inv.invoke(ctx, fn, body)
	}
	if in.killed() {
		return false
	}
	if err == nil && a.OK() {
		if err := st.Complete(settleCtx, m); err != nil {
			h.stats.result(ResultLockLost)
			in.counts.result(ResultLockLost)
			if errors.Is(err, broker.ErrLockLost) {
				log().Warn("the answer came after the lock was lost; the message is delivered again", slog.Any("error", err))
			} else {
				log().Error("complete failed; the message is delivered again", slog.Any("error", err))
			}
			return true
		}
		result := a.Result
		if result == "" {
			result = ResultCompleted
		}
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
		h.stats.result(ResultLockLost)
		in.counts.result(ResultLockLost)
		return true
	}
	h.stats.result(ResultAbandoned)
	in.counts.result(ResultAbandoned)
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

// view maps the host's clock to the real one. The handler lives in real
// time and must not see the host's clock, which may run ahead (idle time
// skipped) and faster (--time-scale): what it is given is mapped, as the
// loopback broker maps its times (loopback.HeaderClientTime).
func (h *Host) view() clock.View { return clock.OffsetOf(h.clock, time.Now()) }
