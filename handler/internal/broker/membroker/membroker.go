// Package membroker is an in-memory broker with the Service Bus semantics the
// product relies on: the engine of the development host and the simulation
// tests. *Broker implements broker.Broker plus the Functions host's session
// receiving. Times are on its clock.Clock; timed transitions apply lazily,
// with no background goroutine.
package membroker

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/internal/msgutil"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
)

// QueueOptions are a queue's settings, as in Service Bus; zero: default.
type QueueOptions struct {
	RequiresSession bool
	// MaxDeliveryCount is the deliveries before dead-lettering (default 5).
	MaxDeliveryCount int32
	// LockDuration is how long a message or session stays locked (1m).
	LockDuration time.Duration
	// RequiresDuplicateDetection drops a MessageId resent within
	// DuplicateWindow (default 10m).
	RequiresDuplicateDetection bool
	DuplicateWindow            time.Duration
	// DefaultTTL caps messages' time-to-live (default 7 days).
	DefaultTTL time.Duration
	// DeadLetterOnExpiration dead-letters expired messages.
	DeadLetterOnExpiration bool
}

// DefaultQueueOptions returns the Bicep's queue settings, sessions aside.
func DefaultQueueOptions() QueueOptions {
	return QueueOptions{
		MaxDeliveryCount:           5,
		LockDuration:               time.Minute,
		RequiresDuplicateDetection: true,
		DuplicateWindow:            10 * time.Minute,
		DefaultTTL:                 7 * 24 * time.Hour,
		DeadLetterOnExpiration:     true,
	}
}

func (o QueueOptions) withDefaults() QueueOptions {
	d := DefaultQueueOptions()
	o.MaxDeliveryCount = cmp.Or(o.MaxDeliveryCount, d.MaxDeliveryCount)
	o.LockDuration = cmp.Or(o.LockDuration, d.LockDuration)
	o.DuplicateWindow = cmp.Or(o.DuplicateWindow, d.DuplicateWindow)
	o.DefaultTTL = cmp.Or(o.DefaultTTL, d.DefaultTTL)
	return o
}

// DefaultMaxMessageSize is the Service Bus Standard tier's size limit.
const DefaultMaxMessageSize = 256 * 1024

// Options tune New. The zero value (or nil) is usable.
type Options struct {
	// Clock is the broker's time; nil means the wall clock.
	Clock clock.Clock
	// Logger receives dead-letter, expiry and lock-loss events (nil: none).
	Logger *slog.Logger
}

// QueueStats counts a queue's messages at one instant.
type QueueStats struct {
	Active         int // visible and not locked
	Locked         int // visible and locked by a receiver or session
	Scheduled      int // not visible yet
	DeadLettered   int // in the dead-letter subqueue
	LockedSessions int // sessions held by an acceptor
}

// QueueTotals counts what happened to a queue's messages since it was
// created; each message sent ends in one outcome or is still queued:
//
//	Sent = DuplicatesDropped + Cancelled + ExpiredDropped + DeadLettered
//	       + Completed + (Active + Locked + Scheduled)
type QueueTotals struct {
	Sent              int // Send and Schedule calls accepted, duplicates included
	DuplicatesDropped int // dropped by duplicate detection
	Cancelled         int // scheduled, then cancelled
	ExpiredDropped    int // expired on a queue without dead-lettering on expiry
	DeadLettered      int // moved to the dead-letter subqueue
	Completed         int // completed (from the queue, not its dead-letter subqueue)
	// DeadLetterCompleted counts completions from the dead-letter subqueue.
	DeadLetterCompleted int
}

// Broker is the in-memory broker. Its methods are safe for concurrent use.
type Broker struct {
	clock clock.Clock
	log   *slog.Logger

	mu     sync.Mutex
	queues map[string]*queue
	// ops counts API calls, as Service Bus bills them (Operations).
	ops atomic.Int64
}

// Operations counts the calls made to the broker, as Service Bus Standard
// bills "any API call" (its pricing page).
func (b *Broker) Operations() int64 { return b.ops.Load() }

var _ broker.Broker = (*Broker)(nil)

// New returns an empty broker; create queues with CreateQueue.
func New(opts *Options) *Broker {
	var o Options
	if opts != nil {
		o = *opts
	}
	return &Broker{
		clock:  cmp.Or(o.Clock, clock.Real()),
		log:    cmp.Or(o.Logger, slog.New(slog.DiscardHandler)).With(slog.String("component", "membroker")),
		queues: make(map[string]*queue),
	}
}

// Clock returns the broker's clock.
func (b *Broker) Clock() clock.Clock { return b.clock }

// CreateQueue creates a queue and its dead-letter subqueue; other options for
// an existing one, a bad name or negative settings are broker.ErrInvalid.
func (b *Broker) CreateQueue(name string, o QueueOptions) error {
	if name == "" || strings.ContainsAny(name, "$") {
		return fmt.Errorf("membroker: create queue %q: bad name: %w", name, broker.ErrInvalid)
	}
	if o.MaxDeliveryCount < 0 || o.LockDuration < 0 || o.DuplicateWindow < 0 || o.DefaultTTL < 0 {
		return fmt.Errorf("membroker: create queue %s: negative setting in %+v: %w", name, o, broker.ErrInvalid)
	}
	o = o.withDefaults()
	b.mu.Lock()
	defer b.mu.Unlock()
	if q, ok := b.queues[name]; ok {
		if q.opts != o {
			return fmt.Errorf("membroker: create queue %s: exists with options %+v, not %+v: %w",
				name, q.opts, o, broker.ErrInvalid)
		}
		return nil
	}
	b.queues[name] = newQueue(name, o, b.log)
	return nil
}

// queueLocked returns the queue with the transitions due applied.
func (b *Broker) queueLocked(op, name string) (*queue, time.Time, error) {
	q, ok := b.queues[name]
	if !ok {
		return nil, time.Time{}, fmt.Errorf("membroker: %s %s: no such queue: %w", op, name, broker.ErrNotFound)
	}
	now := b.clock.Now()
	q.advance(now)
	return q, now, nil
}

// sourceLocked resolves src for peek-lock (not a session queue's main).
func (b *Broker) sourceLocked(op string, src broker.Source) (*queue, time.Time, error) {
	q, now, err := b.queueLocked(op, src.Queue)
	if err != nil {
		return nil, now, err
	}
	if !src.DeadLetter && q.opts.RequiresSession {
		return nil, now, fmt.Errorf("membroker: %s %s: the queue requires sessions: %w", op, src, broker.ErrInvalid)
	}
	return q, now, nil
}

// wait releases b.mu until q changes, its next event or until, or ctx ends.
func (b *Broker) wait(ctx context.Context, q *queue, until time.Time) error {
	changed := q.changed
	wake, ok := q.nextEvent()
	if !until.IsZero() && (!ok || until.Before(wake)) {
		wake, ok = until, true
	}
	var d time.Duration = -1 // no timer
	if ok {
		d = max(wake.Sub(b.clock.Now()), 0)
	}
	b.mu.Unlock()
	defer b.mu.Lock()
	var timeout <-chan time.Time
	if d >= 0 {
		t := b.clock.NewTimer(d)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timeout:
	}
	return nil
}

// MaxIDLength is the longest MessageId or SessionId in UTF-16 units
// (contract.ServiceBusLength).
const MaxIDLength = contract.MaxServiceBusIDLength

func (b *Broker) prepare(op, queue string, msg broker.Message) (broker.Message, error) {
	msg = msgutil.Message(msg)
	if msg.MessageID == "" {
		msg.MessageID = msgutil.NewID()
	}
	for _, id := range []struct{ name, v string }{{"MessageId", msg.MessageID}, {"SessionId", msg.SessionID}} {
		if n := contract.ServiceBusLength(id.v); n > MaxIDLength {
			return msg, fmt.Errorf("membroker: %s %s: a %s of %d characters exceeds %d: %w",
				op, queue, id.name, n, MaxIDLength, broker.ErrInvalid)
		}
	}
	if n := MessageSize(msg); n > DefaultMaxMessageSize {
		return msg, fmt.Errorf("membroker: %s %s message %s: %d bytes exceed %d: %w",
			op, queue, msg.MessageID, n, DefaultMaxMessageSize, broker.ErrInvalid)
	}
	return msg, nil
}

// MessageSize approximates m's size as DefaultMaxMessageSize bounds it.
func MessageSize(m broker.Message) int {
	n := len(m.Body) + len(m.MessageID) + len(m.SessionID) + len(m.Subject) + len(m.ContentType) + len(m.CorrelationID)
	for k, v := range m.ApplicationProperties {
		n += len(k) + len(fmt.Sprint(v))
	}
	return n
}

func (b *Broker) enqueue(ctx context.Context, op, queue string, msg broker.Message, at *time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("membroker: %s %s: %w", op, queue, err)
	}
	msg, err := b.prepare(op, queue, msg)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q, now, err := b.queueLocked(op, queue)
	if err != nil {
		return 0, err
	}
	if q.opts.RequiresSession && msg.SessionID == "" {
		return 0, fmt.Errorf("membroker: %s %s message %s: the queue requires a SessionId: %w",
			op, queue, msg.MessageID, broker.ErrInvalid)
	}
	seq := q.accept(msg, now, at)
	q.notify()
	return seq, nil
}

// Send enqueues msg (a random MessageId if none), dropping a duplicate.
// ErrNotFound: no queue; ErrInvalid: no SessionId, too long an id, too large.
func (b *Broker) Send(ctx context.Context, queue string, msg broker.Message) error {
	b.ops.Add(1)
	_, err := b.enqueue(ctx, "send", queue, msg, nil)
	return err
}

// Schedule enqueues msg to become visible at at (then renumbered) and returns
// the number to cancel it with; a duplicate's names nothing.
func (b *Broker) Schedule(ctx context.Context, queue string, msg broker.Message, at time.Time) (int64, error) {
	b.ops.Add(1)
	return b.enqueue(ctx, "schedule", queue, msg, &at)
}

// CancelScheduled removes a message not yet visible, else ErrNotFound.
func (b *Broker) CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error {
	b.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("membroker: cancel %s seq %d: %w", queue, sequenceNumber, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q, _, err := b.queueLocked("cancel", queue)
	if err != nil {
		return err
	}
	if !q.cancel(sequenceNumber) {
		return fmt.Errorf("membroker: cancel %s seq %d: no such scheduled message: %w",
			queue, sequenceNumber, broker.ErrNotFound)
	}
	q.notify()
	return nil
}

// Receive locks up to max messages of src in sequence order, waiting up to
// wait (broker time) for the first; none is an empty slice. ErrInvalid on a
// session queue's main source.
func (b *Broker) Receive(ctx context.Context, src broker.Source, max int, wait time.Duration) ([]broker.Received, error) {
	b.ops.Add(1)
	if max <= 0 {
		return nil, fmt.Errorf("membroker: receive %s: max %d: %w", src, max, broker.ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q, now, err := b.sourceLocked("receive", src)
	if err != nil {
		return nil, err
	}
	deadline := now.Add(wait)
	for {
		l := &q.main
		if src.DeadLetter {
			l = &q.dead
		}
		if got := l.firstUnlocked(max); len(got) > 0 {
			out := make([]broker.Received, len(got))
			for i, e := range got {
				q.lock(e, now, nil)
				out[i] = e.out()
			}
			q.notify()
			return out, nil
		}
		if !now.Before(deadline) {
			return []broker.Received{}, nil
		}
		if err := b.wait(ctx, q, deadline); err != nil {
			return nil, fmt.Errorf("membroker: receive %s: %w", src, err)
		}
		if q, now, err = b.sourceLocked("receive", src); err != nil {
			return nil, err
		}
	}
}

// Peek returns up to max messages of src from sequence number from without
// locking them, locked and scheduled ones included. ErrInvalid on a session
// queue's main source.
func (b *Broker) Peek(ctx context.Context, src broker.Source, max int, from int64) ([]broker.Received, error) {
	b.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("membroker: peek %s: %w", src, err)
	}
	if max <= 0 {
		return nil, fmt.Errorf("membroker: peek %s: max %d: %w", src, max, broker.ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q, _, err := b.sourceLocked("peek", src)
	if err != nil {
		return nil, err
	}
	var all []*entry
	if src.DeadLetter {
		all = q.dead.items
	} else {
		all = append(slices.Clone(q.main.items), slices.Collect(maps.Values(q.scheduled))...)
		slices.SortFunc(all, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	}
	out := []broker.Received{}
	for _, e := range all {
		if len(out) == max {
			break
		}
		if e.seq >= from {
			r := e.out()
			r.LockToken = "" // a peeked message cannot be settled
			out = append(out, r)
		}
	}
	return out, nil
}

// Complete removes a received message; ErrLockLost if its lock is gone.
func (b *Broker) Complete(ctx context.Context, src broker.Source, m broker.Received) error {
	return b.settle(ctx, "complete", src, m, (*queue).settle)
}

// Abandon releases a received message's lock and raises its delivery count
// (dead-lettered past MaxDeliveryCount); ErrLockLost as for Complete.
func (b *Broker) Abandon(ctx context.Context, src broker.Source, m broker.Received) error {
	return b.settle(ctx, "abandon", src, m, func(q *queue, e *entry) { q.unlock(e, true) })
}

// settle applies done to the entry locked under m's token on src.
func (b *Broker) settle(ctx context.Context, op string, src broker.Source, m broker.Received, done func(*queue, *entry)) error {
	b.ops.Add(1)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("membroker: %s %s seq %d: %w", op, src, m.SequenceNumber, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q, _, err := b.sourceLocked(op, src)
	if err != nil {
		return err
	}
	locks := q.locks
	if src.DeadLetter {
		locks = q.deadLocks
	}
	e := locks[m.LockToken]
	if e == nil || e.holder != nil {
		return fmt.Errorf("membroker: %s %s seq %d: lock expired or message settled: %w",
			op, src, m.SequenceNumber, broker.ErrLockLost)
	}
	done(q, e)
	q.notify()
	return nil
}

// Close does nothing: the broker holds no connections.
func (b *Broker) Close(context.Context) error { return nil }

// Stats counts queue's messages now; zero for an unknown queue.
func (b *Broker) Stats(queue string) QueueStats {
	_, s := b.Snapshot(queue)
	return s
}

// Totals returns queue's cumulative counts; zero for an unknown queue.
func (b *Broker) Totals(queue string) QueueTotals {
	t, _ := b.Snapshot(queue)
	return t
}

// Snapshot returns queue's totals and stats read together, so they add up.
func (b *Broker) Snapshot(queue string) (QueueTotals, QueueStats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, _, err := b.queueLocked("snapshot", queue)
	if err != nil {
		return QueueTotals{}, QueueStats{}
	}
	return q.totals, q.stats()
}

// NextDue returns when a message of queue next changes state on its own.
func (b *Broker) NextDue(queue string) (at time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, _, err := b.queueLocked("next due", queue)
	if err != nil {
		return time.Time{}, false
	}
	return q.nextDue()
}

// HoldScheduled with hold keeps queue's scheduled messages past due, hidden
// from NextDue; without, it shows those due in order. ErrNotFound: no queue.
func (b *Broker) HoldScheduled(queue string, hold bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, _, err := b.queueLocked("hold scheduled", queue)
	if err != nil {
		return err
	}
	if hold {
		q.hold = true
		return nil
	}
	if q.release() {
		q.notify()
	}
	return nil
}

// Quiet reports, cheaply, whether queue has nothing visible or scheduled.
func (b *Broker) Quiet(queue string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, _, err := b.queueLocked("quiet", queue)
	return err != nil || q.visible == 0 && len(q.scheduled) == 0
}

// WaitIdle blocks until queue is idle or ctx ends; ErrNotFound if unknown.
func (b *Broker) WaitIdle(ctx context.Context, queue string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		q, _, err := b.queueLocked("wait idle", queue)
		if err != nil {
			return err
		}
		if q.visible == 0 {
			return nil
		}
		if err := b.wait(ctx, q, time.Time{}); err != nil {
			return fmt.Errorf("membroker: wait idle %s: %w", queue, err)
		}
	}
}
