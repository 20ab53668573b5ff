package membroker

import (
	"cmp"
	"container/heap"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/internal/msgutil"
)

// The state machine of one queue, run under Broker.mu; nothing blocks. Timed
// transitions are events in a min-heap carrying their entry's or session
// lock's generation; a change bumps it, so stale events are skipped.

type entryState int

const (
	stateScheduled entryState = iota
	stateActive
	stateDead
	stateGone
)

type entry struct {
	msg       broker.Message // owned; copied on the way in and out
	seq       int64
	enqueued  time.Time
	expires   time.Time
	visibleAt time.Time     // when scheduled
	ttl       time.Duration // effective time-to-live
	failed    int32         // unsuccessful deliveries so far
	state     entryState

	// Locked (lockToken set): until lockedUntil, or by holder's session lock.
	lockToken   string
	lockedUntil time.Time
	holder      *sessionLock

	gen uint64
}

func (e *entry) locked() bool { return e.lockToken != "" }

// out returns the caller's deep copy of e.
func (e *entry) out() broker.Received {
	r := broker.Received{
		Message:        msgutil.Message(e.msg),
		SequenceNumber: e.seq,
		DeliveryCount:  e.failed + 1,
		EnqueuedTime:   e.enqueued,
		ExpiresAt:      e.expires,
		LockToken:      e.lockToken,
		Scheduled:      e.state == stateScheduled,
	}
	deadLetterFields(&r)
	return r
}

// list is a set of entries ordered by sequence number.
type list struct{ items []*entry }

func (l *list) insert(e *entry) {
	i, _ := slices.BinarySearchFunc(l.items, e.seq, cmpSeq)
	l.items = slices.Insert(l.items, i, e)
}

// remove takes e out of the list, reporting whether it was there.
func (l *list) remove(e *entry) bool {
	i, ok := slices.BinarySearchFunc(l.items, e.seq, cmpSeq)
	if ok {
		l.items = slices.Delete(l.items, i, i+1)
	}
	return ok
}

func (l *list) firstUnlocked(max int) []*entry {
	var out []*entry
	for _, e := range l.items {
		if len(out) == max {
			break
		}
		if !e.locked() {
			out = append(out, e)
		}
	}
	return out
}

func cmpSeq(e *entry, seq int64) int { return cmp.Compare(e.seq, seq) }

// group is one session of a session-enabled queue.
type group struct {
	id   string
	msgs list
	lock *sessionLock // nil when nobody holds the session
}

type sessionLock struct {
	g        *group
	until    time.Time
	released bool
	gen      uint64
}

type event struct {
	at  time.Time
	e   *entry
	s   *sessionLock
	gen uint64
}

type events []event

func (h events) Len() int           { return len(h) }
func (h events) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h events) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)        { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (ev event) valid() bool {
	if ev.s != nil {
		return !ev.s.released && ev.s.gen == ev.gen
	}
	return ev.e.gen == ev.gen
}

type queue struct {
	name string
	opts QueueOptions
	log  *slog.Logger

	nextSeq   int64
	scheduled map[int64]*entry
	// hold: Broker.HoldScheduled; held: what fell due meanwhile, in order.
	hold   bool
	held   []*entry
	main   list              // visible messages, queues without sessions
	groups map[string]*group // visible messages by session
	// visible counts main's and every group's entries, for WaitIdle.
	visible int
	// ready: acceptable sessions by first seq; stale ones dropped lazily.
	ready     readyHeap
	dead      list
	locks     map[string]*entry    // lock token -> active entry
	deadLocks map[string]*entry    // lock token -> dead-lettered entry
	dupes     map[string]time.Time // MessageId -> first sent in the window
	dupesMax  int                  // size that triggers the next purge

	events events
	live   int // entries not gone, plus held session locks

	lockExpiries expirySummary

	totals QueueTotals

	// changed is closed and replaced on every change, waking the waiters.
	changed chan struct{}
}

func newQueue(name string, o QueueOptions, log *slog.Logger) *queue {
	return &queue{
		name:      name,
		opts:      o,
		log:       log.With(slog.String("queue", name)),
		nextSeq:   1,
		scheduled: make(map[int64]*entry),
		groups:    make(map[string]*group),
		locks:     make(map[string]*entry),
		deadLocks: make(map[string]*entry),
		dupes:     make(map[string]time.Time),
		dupesMax:  1024,
		changed:   make(chan struct{}),
	}
}

func (q *queue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// nextEvent returns the time of the earliest pending event (possibly stale).
func (q *queue) nextEvent() (time.Time, bool) {
	if len(q.events) == 0 {
		return time.Time{}, false
	}
	return q.events[0].at, true
}

func (q *queue) push(ev event) {
	heap.Push(&q.events, ev)
	if len(q.events) > 64 && len(q.events) > 4*q.live {
		q.compact()
	}
}

// compact drops stale events, keeping the heap proportional to live messages.
func (q *queue) compact() {
	kept := q.events[:0]
	for _, ev := range q.events {
		if ev.valid() {
			kept = append(kept, ev)
		}
	}
	clear(q.events[len(kept):])
	q.events = kept
	heap.Init(&q.events)
}

// touch records that e changed and schedules its next timed transition.
func (q *queue) touch(e *entry) {
	e.gen++
	var at time.Time
	switch {
	case e.state == stateScheduled:
		at = e.visibleAt
	case e.state == stateActive && e.holder != nil:
		return // the session lock's event covers it
	case (e.state == stateActive || e.state == stateDead) && e.locked():
		at = e.lockedUntil
	case e.state == stateActive:
		at = e.expires
	default:
		return
	}
	q.push(event{at: at, e: e, gen: e.gen})
}

func (q *queue) touchSession(l *sessionLock) {
	l.gen++
	q.push(event{at: l.until, s: l, gen: l.gen})
}

// advance applies the transitions due by now, in order, waking waiters.
func (q *queue) advance(now time.Time) {
	changed := false
	for len(q.events) > 0 && !q.events[0].at.After(now) {
		ev := heap.Pop(&q.events).(event)
		if !ev.valid() {
			continue
		}
		changed = true
		if ev.s != nil {
			q.lockExpiries.expired(q.log, ev.s.g.id, ev.at, q.opts.LockDuration)
			q.releaseSession(ev.s, ev.at)
			continue
		}
		e := ev.e
		switch {
		case e.state == stateScheduled && q.hold:
			q.held = append(q.held, e)
		case e.state == stateScheduled:
			q.activate(e)
		case e.locked():
			q.log.Debug("message lock expired", slog.String("message_id", e.msg.MessageID),
				slog.Int64("sequence", e.seq))
			q.unlock(e, true)
		case e.state == stateActive:
			q.expire(e)
		}
	}
	q.lockExpiries.flushDue(q.log, now)
	if changed {
		q.notify()
	}
}

// expirySummary keeps a killed receiver's session lock expiries from flooding
// the log: the first logged at once, the rest of a lock duration in one line.
type expirySummary struct {
	until  time.Time // end of the open window; zero when none is open
	since  time.Time // when the window opened
	n      int       // expiries in the window not logged yet
	sample []string  // the first few of their session ids
}

const expirySample = 5

func (s *expirySummary) expired(log *slog.Logger, session string, at time.Time, window time.Duration) {
	s.flushDue(log, at)
	if s.until.IsZero() {
		log.Warn("session lock expired", slog.String("session_id", session))
		s.since, s.until = at, at.Add(window)
		return
	}
	s.n++
	if len(s.sample) < expirySample {
		s.sample = append(s.sample, session)
	}
}

// flushDue logs the window's count once now is past its end.
func (s *expirySummary) flushDue(log *slog.Logger, now time.Time) {
	if s.until.IsZero() || now.Before(s.until) {
		return
	}
	if s.n > 0 {
		log.Warn("more session locks expired: their sessions are delivered again (a receiver stopped renewing, or was killed)",
			slog.Int("count", s.n), slog.Any("session_ids", s.sample),
			slog.Time("since", s.since), slog.Duration("window", s.until.Sub(s.since)))
	}
	*s = expirySummary{}
}

// accept stores msg, or drops a duplicate, and returns its sequence number.
func (q *queue) accept(msg broker.Message, now time.Time, at *time.Time) int64 {
	seq := q.nextSeq
	q.nextSeq++
	q.totals.Sent++
	if q.duplicate(msg.MessageID, now) {
		q.totals.DuplicatesDropped++
		q.log.Debug("duplicate message dropped", slog.String("message_id", msg.MessageID))
		return seq
	}
	ttl := q.opts.DefaultTTL
	if msg.TimeToLive > 0 && msg.TimeToLive < ttl {
		ttl = msg.TimeToLive
	}
	e := &entry{msg: msg, seq: seq, ttl: ttl, state: stateActive, enqueued: now}
	q.live++
	if at != nil && at.After(now) {
		e.state, e.visibleAt, e.enqueued = stateScheduled, *at, *at
		q.scheduled[seq] = e
	} else {
		q.insertActive(e)
	}
	e.expires = e.enqueued.Add(ttl)
	q.touch(e)
	return seq
}

// duplicate reports whether id was seen within the window, recording it.
func (q *queue) duplicate(id string, now time.Time) bool {
	if !q.opts.RequiresDuplicateDetection {
		return false
	}
	if first, ok := q.dupes[id]; ok && now.Before(first.Add(q.opts.DuplicateWindow)) {
		return true
	}
	if len(q.dupes) >= q.dupesMax {
		maps.DeleteFunc(q.dupes, func(_ string, first time.Time) bool {
			return !now.Before(first.Add(q.opts.DuplicateWindow))
		})
		q.dupesMax = max(1024, 2*len(q.dupes))
	}
	q.dupes[id] = now
	return false
}

// activate makes a scheduled message visible, enqueued at its due time, with
// a new sequence number as Service Bus does ("Message sequencing and
// timestamps", MicrosoftDocs azure-docs
// articles/service-bus-messaging/message-sequencing.md).
func (q *queue) activate(e *entry) {
	delete(q.scheduled, e.seq)
	e.seq = q.nextSeq
	q.nextSeq++
	e.state = stateActive
	e.enqueued = e.visibleAt
	e.expires = e.visibleAt.Add(e.ttl)
	q.insertActive(e)
	q.touch(e)
}

// release ends a hold, showing what fell due in order; true if any did.
func (q *queue) release() bool {
	q.hold = false
	held := q.held
	q.held = nil
	n := 0
	for _, e := range held {
		if e.state == stateScheduled && q.scheduled[e.seq] == e {
			q.activate(e)
			n++
		}
	}
	return n > 0
}

func (q *queue) cancel(seq int64) bool {
	e, ok := q.scheduled[seq]
	if !ok {
		return false
	}
	delete(q.scheduled, seq)
	q.gone(e)
	q.totals.Cancelled++
	return true
}

func (q *queue) insertActive(e *entry) {
	q.visible++
	if !q.opts.RequiresSession {
		q.main.insert(e)
		return
	}
	g := q.groups[e.msg.SessionID]
	if g == nil {
		g = &group{id: e.msg.SessionID}
		q.groups[g.id] = g
	}
	g.msgs.insert(e)
	if g.msgs.items[0] == e {
		q.markReady(g)
	}
}

func (q *queue) removeActive(e *entry) {
	if !q.opts.RequiresSession {
		if q.main.remove(e) {
			q.visible--
		}
		return
	}
	if g := q.groups[e.msg.SessionID]; g != nil {
		if g.msgs.remove(e) {
			q.visible--
		}
		q.dropGroupIfEmpty(g.id)
		q.markReady(g) // its first message may have changed
	}
}

func (q *queue) dropGroupIfEmpty(id string) {
	if g := q.groups[id]; g != nil && g.lock == nil && len(g.msgs.items) == 0 {
		delete(q.groups, id)
	}
}

// lock hands e out: under the session lock l, or for LockDuration.
func (q *queue) lock(e *entry, now time.Time, l *sessionLock) {
	e.lockToken, e.holder, e.lockedUntil = msgutil.NewID(), l, now.Add(q.opts.LockDuration)
	if l != nil {
		e.lockedUntil = l.until
	}
	if e.state == stateDead {
		q.deadLocks[e.lockToken] = e
	} else {
		q.locks[e.lockToken] = e
	}
	q.touch(e)
}

// unlock releases e's lock; failed counts a failed delivery.
func (q *queue) unlock(e *entry, failed bool) {
	delete(q.locks, e.lockToken)
	delete(q.deadLocks, e.lockToken)
	e.lockToken, e.lockedUntil, e.holder = "", time.Time{}, nil
	if failed {
		e.failed++
	}
	if e.state == stateActive && e.failed >= q.opts.MaxDeliveryCount {
		q.deadLetter(e, broker.ReasonMaxDeliveryCountExceeded,
			fmt.Sprintf("Message could not be consumed after %d delivery attempts.", q.opts.MaxDeliveryCount))
		return
	}
	q.touch(e) // an active message past its time-to-live expires now
}

// expire handles an unlocked active message whose time-to-live passed.
func (q *queue) expire(e *entry) {
	if !q.opts.DeadLetterOnExpiration {
		q.log.Info("message expired and dropped", slog.String("message_id", e.msg.MessageID),
			slog.Int64("sequence", e.seq))
		q.removeActive(e)
		q.gone(e)
		q.totals.ExpiredDropped++
		return
	}
	q.deadLetter(e, broker.ReasonTTLExpired, "The message expired and was dead lettered.")
}

// deadLetter moves active e to the dead-letter subqueue, keeping its seq.
func (q *queue) deadLetter(e *entry, reason, description string) {
	q.log.Info("message dead-lettered", slog.String("message_id", e.msg.MessageID),
		slog.Int64("sequence", e.seq), slog.String("session_id", e.msg.SessionID),
		slog.String("reason", reason), slog.Int("delivery_count", int(e.failed)))
	q.removeActive(e)
	q.totals.DeadLettered++
	props := maps.Clone(e.msg.ApplicationProperties)
	if props == nil {
		props = make(map[string]any, 2)
	}
	props[broker.PropertyDeadLetterReason] = reason
	props[broker.PropertyDeadLetterErrorDescription] = description
	e.msg.ApplicationProperties = props
	e.state = stateDead
	q.dead.insert(e)
	q.touch(e)
}

func (q *queue) settle(e *entry) {
	delete(q.locks, e.lockToken)
	delete(q.deadLocks, e.lockToken)
	e.lockToken, e.holder = "", nil
	if e.state == stateDead {
		q.dead.remove(e)
		q.totals.DeadLetterCompleted++
	} else {
		q.removeActive(e)
		q.totals.Completed++
	}
	q.gone(e)
}

func (q *queue) gone(e *entry) {
	e.state = stateGone
	e.gen++
	q.live--
}

// releaseSession ends l, redelivering its messages, counts raised.
func (q *queue) releaseSession(l *sessionLock, now time.Time) {
	if l.released {
		return
	}
	l.released = true
	if now.Before(l.until) {
		l.until = now
	}
	l.gen++
	q.live--
	g := l.g
	g.lock = nil
	for _, e := range slices.Clone(g.msgs.items) {
		if e.holder == l {
			q.unlock(e, true)
		}
	}
	q.dropGroupIfEmpty(g.id)
	q.markReady(g)
}

// nextSession returns the unheld session with the lowest first seq.
func (q *queue) nextSession() *group {
	for len(q.ready) > 0 {
		top := q.ready[0]
		if q.isReady(top.g) && top.g.msgs.items[0].seq == top.seq {
			return top.g
		}
		heap.Pop(&q.ready)
	}
	return nil
}

func (q *queue) isReady(g *group) bool {
	return q.groups[g.id] == g && g.lock == nil && len(g.msgs.items) > 0
}

// markReady records g in q.ready if acceptable; stale entries go lazily.
func (q *queue) markReady(g *group) {
	if !q.isReady(g) {
		return
	}
	heap.Push(&q.ready, readyItem{seq: g.msgs.items[0].seq, g: g})
	if len(q.ready) > 64 && len(q.ready) > 4*len(q.groups) {
		q.ready = q.ready[:0]
		for _, g := range q.groups {
			if q.isReady(g) {
				q.ready = append(q.ready, readyItem{seq: g.msgs.items[0].seq, g: g})
			}
		}
		heap.Init(&q.ready)
	}
}

// readyItem is a session acceptable when recorded, with its first seq then.
type readyItem struct {
	seq int64
	g   *group
}

type readyHeap []readyItem

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].seq < h[j].seq }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(readyItem)) }
func (h *readyHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = readyItem{}
	*h = old[:len(old)-1]
	return it
}

func (q *queue) holdSession(g *group, now time.Time) *sessionLock {
	l := &sessionLock{g: g, until: now.Add(q.opts.LockDuration)}
	g.lock = l
	q.live++
	q.touchSession(l)
	return l
}

// nextDue returns when a scheduled message shows or an unheld one expires.
func (q *queue) nextDue() (time.Time, bool) {
	var at time.Time
	consider := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	for _, e := range q.scheduled {
		if !q.hold {
			consider(e.visibleAt)
		}
	}
	unlocked := func(l *list) {
		for _, e := range l.items {
			if !e.locked() {
				consider(e.expires)
			}
		}
	}
	unlocked(&q.main)
	for _, g := range q.groups {
		unlocked(&g.msgs)
	}
	return at, !at.IsZero()
}

func (q *queue) stats() QueueStats {
	s := QueueStats{Scheduled: len(q.scheduled), DeadLettered: len(q.dead.items)}
	count := func(l *list) {
		for _, e := range l.items {
			if e.locked() {
				s.Locked++
			} else {
				s.Active++
			}
		}
	}
	count(&q.main)
	for _, g := range q.groups {
		count(&g.msgs)
		if g.lock != nil {
			s.LockedSessions++
		}
	}
	return s
}

// deadLetterFields sets r's dead-letter fields from its properties.
func deadLetterFields(r *broker.Received) {
	r.DeadLetterReason, _ = r.ApplicationProperties[broker.PropertyDeadLetterReason].(string)
	r.DeadLetterErrorDescription, _ = r.ApplicationProperties[broker.PropertyDeadLetterErrorDescription].(string)
}
