package devhost

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// CheckInput is what Check judges: what the host sent and saw, and what the
// store and queues hold at the end.
type CheckInput struct {
	// Completions are the workload queue's messages completed after a 2xx
	// answer, in completion order.
	Completions []Completion
	// SentIDs are the MessageIds the host sent to the workload queue.
	SentIDs map[string]bool
	// Orders are the rows found; Queried the order ids looked up.
	Orders  map[string]OrderRow
	Queried map[string]bool
	// Parked and DeadLettered as in Summary.
	Parked       []Entry
	DeadLettered []Entry
	// Busy describes triggered queues that still hold messages.
	Busy []string
	// MaxDelivery is the queues' max delivery count.
	MaxDelivery int32
	// CallsPerSession is maxConcurrentCallsPerSession; the order checks
	// need 1 (messages of a session handled one at a time, in order).
	CallsPerSession int
	// Instances is how many instances took message calls. With more than
	// one, an instance's order cache can be behind the row (another
	// instance wrote since), and a message at exactly the cached
	// sequence is answered Duplicate from the cache where the row has
	// moved on and the fold says Stale: both settle with no write, and
	// the cached sequence is only a lower bound (orderstate.Service.ApplyUnder).
	// Check accepts that one answer then; never with one instance, and
	// never Stale where the fold says Duplicate (a cache is never ahead).
	Instances int
	// PaymentTimeout is the handler's payment timeout (zero:
	// contract.PaymentTimeout): the deadline a cancellation records.
	PaymentTimeout time.Duration
}

// The result the handler reports for a parked message.
const resultParked = "Parked"

// resultRescheduled is the answer of a message the handler scheduled again
// as a copy (package reschedule): completed, with no effect of its own;
// its copy is another message, judged when it is completed.
const resultRescheduled = "Rescheduled"

// outageParked reports whether reason is one a message is parked for when
// its retries outlasted the window: not poison, nothing the fold predicts.
func outageParked(reason string) bool {
	return reason == order.ReasonRetryWindowExceeded || reason == order.ReasonOrderNeverCreated
}

// Check returns the invariants of a finished run that do not hold. What it
// checks is deterministic for a correct handler behind a correct broker,
// whatever the delivery timing, lock losses, redeliveries or handler
// restarts:
//
//  1. Drained: no triggered queue holds active, locked or scheduled
//     messages.
//  2. Nothing lost: every MessageId sent was completed at least once or
//     dead-lettered (duplicates the broker dropped share the id).
//  3. Dead-letter queue by broker rules only: every dead-lettered message
//     has reason MaxDeliveryCountExceeded with a delivery count of at
//     least the max delivery count, or TTLExpiredException (a custom
//     handler cannot dead-letter).
//  4. Rows: for every order whose messages were all completed (none
//     dead-lettered), the row equals the fold of order.Decide and
//     order.DecideExpireOf over its completed messages in completion order,
//     which for a session is delivery order. In particular the highest
//     valid sequence wins, an update after Delivered or Cancelled changes
//     nothing, and a payment timeout cancels only a Created order. An
//     order the fold leaves without state has no row.
//  5. Parking: the messages the fold calls poison (bad payload, unknown
//     subject, invalid transition) are exactly the ones parked, each with
//     the fold's reason and under one parked MessageId; a dead-lettered
//     message may also have been parked by an earlier attempt. In a
//     session with a dead-lettered message only the poison that does not
//     depend on the order's state (bad payload, unknown subject) is
//     judged: an invalid transition depends on the effect of the
//     dead-lettered message, which may or may not have happened.
//     Rescheduled completions, and messages parked because their retries
//     outlasted the window (RetryWindowExceeded, OrderNeverCreated), are
//     left out of the fold (the copy is folded when it completes); such
//     parked copies are not poison. A session with a rescheduled message
//     is judged as one with a dead-lettered message: the failure may have
//     come after its write. A rescheduled copy is parked under the
//     original's OriginalMessageId, so parking is matched by parked id.
//  6. Results: for each message completed at its first delivery, in a
//     session without a dead-lettered message, the handler's result equals
//     the fold's (Applied, Duplicate, Stale, or Parked for poison), with
//     two exceptions. When more than one instance ran, Duplicate is
//     accepted where the fold says Stale: an instance's cache behind a
//     row another instance moved on settles a message at the cached
//     sequence as Duplicate, with no write either way (see
//     CheckInput.Instances). Where the fold says Applied, the handler may instead
//     have found its own write: the write went through but its answer was
//     lost, the storage client's retry was refused (409 or 412), and the
//     handler read the row back. It then answers what the fold gives for
//     the message against the state the message itself produced:
//     Duplicate for a status change, Stale for a payment timeout (nothing
//     else is accepted). That answer is accepted only when the order's row
//     was read and covers the message: its LastSequence is at least the
//     one the message produced, and for a payment timeout the row is
//     Cancelled or a payment made by the deadline superseded it. When a
//     later message superseded this one, the row cannot
//     tell its write from a write never made (check 4 still judges the row
//     as a whole); only the storage traffic can, which the simulation
//     checks. Later deliveries are not judged: an earlier attempt may
//     have applied the message before its lock was lost. Nor are sessions
//     with a dead-lettered message (still in the dead-letter subqueue or
//     taken out, say to be replayed): its effect may have happened in a
//     failed attempt, so the fold's state, and the results of the messages
//     after it, may differ from what the handler rightly saw.
//
// Checks 4 to 6 need maxConcurrentCallsPerSession 1 and are skipped
// otherwise.
func Check(in CheckInput) []string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }

	v = append(v, in.Busy...)

	completed := map[string]bool{}
	sessionOf := map[string]string{} // MessageId -> session, of completed messages
	// Sessions with a rescheduled message are judged less too (checks 4
	// to 6), like those with a dead-lettered one: the failure that made
	// the handler reschedule may have come after its write took effect.
	rescheduled := map[string]bool{}
	for _, c := range in.Completions {
		completed[c.MessageID] = true
		sessionOf[c.MessageID] = c.SessionID
		if c.Result == resultRescheduled {
			rescheduled[c.SessionID] = true
		}
	}
	dead := map[string]bool{}
	// Sessions with a dead-lettered message are judged less (checks 4 to
	// 6): its effect may or may not have happened before it was
	// dead-lettered.
	deadSessions := maps.Clone(rescheduled)
	for _, e := range in.DeadLettered {
		dead[e.MessageID] = true
		deadSessions[e.SessionID] = true
		switch {
		case e.Reason == broker.ReasonTTLExpired:
		case e.Reason == broker.ReasonMaxDeliveryCountExceeded:
			if !e.Removed && e.DeliveryCount < in.MaxDelivery {
				add("dead-lettered message %s: MaxDeliveryCountExceeded after %s, want at least %d", e.MessageID, wording.CountAs(int(e.DeliveryCount), "delivery", "deliveries"), in.MaxDelivery)
			}
		default:
			add("dead-lettered message %s: reason %q; only the broker dead-letters (MaxDeliveryCountExceeded, TTLExpiredException)", e.MessageID, e.Reason)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(in.SentIDs)) {
		if !completed[id] && !dead[id] {
			add("message %s was sent but neither completed nor dead-lettered", id)
		}
	}
	if in.CallsPerSession > 1 {
		return v
	}

	// Fold each session's completed messages in order.
	type expect struct {
		state *order.State
		n     int
	}
	folds := map[string]*expect{}
	wantParked := map[string]string{} // original MessageId -> reason
	now := time.Unix(0, 0).UTC()
	windowParked := map[string]bool{} // ParkedIDs of messages parked for an outage
	for _, p := range in.Parked {
		if outageParked(p.Reason) {
			windowParked[p.ParkedID] = true
		}
	}
	type pending struct {
		c   Completion
		seq int64
	}
	var superseded []pending
	for _, c := range in.Completions {
		if c.Result == resultRescheduled || (c.Result == resultParked && windowParked[contract.DeriveMessageID(c.MessageID, ":parked")]) {
			continue
		}
		e := folds[c.SessionID]
		if e == nil {
			e = &expect{}
			folds[c.SessionID] = e
		}
		e.n++
		want, reason := foldOne(&e.state, c, in.PaymentTimeout, now)
		deadSession := deadSessions[c.SessionID]
		if reason != "" && (!deadSession || reason != order.ReasonInvalidTransition) {
			wantParked[c.MessageID] = reason
		}
		if c.DeliveryCount != 1 || c.Result == want || deadSession || behindCache(c, want, in) {
			continue
		}
		if !foundOwnWrite(c, want, e.state, in, now) {
			add("message %s (first delivery): handler answered %s, want %s", c.MessageID, c.Result, want)
		} else if seq := supersededAt(c, e.state, in); seq > 0 {
			superseded = append(superseded, pending{c, seq})
		}
	}
	// A payment timeout that found its cancellation superseded is right
	// only if the fold, too, moved past it.
	for _, p := range superseded {
		if e := folds[p.c.SessionID]; e.state == nil || e.state.LastSequence <= p.seq {
			add("message %s (first delivery): handler answered %s, want %s", p.c.MessageID, p.c.Result, order.Applied)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(folds)) {
		if deadSessions[id] || !in.Queried[id] {
			continue
		}
		e := folds[id]
		row, found := in.Orders[id]
		switch {
		case e.state == nil && found:
			add("order %s: row %s/%d, want none (nothing in its %s writes a row)", id, row.Status, row.LastSequence, wording.Count(e.n, "completed message"))
		case e.state != nil && !found:
			add("order %s: no row, want %s/%d", id, e.state.Status, e.state.LastSequence)
		case e.state != nil && (row.Status != string(e.state.Status) || row.LastSequence != e.state.LastSequence):
			add("order %s: row %s/%d, want %s/%d (fold of %s)", id, row.Status, row.LastSequence, e.state.Status, e.state.LastSequence, wording.Count(e.n, "completed message"))
		}
	}
	for id := range in.Orders {
		if _, ok := folds[id]; !ok && !deadSessions[id] {
			add("order %s: row %s/%d, but no message of it was completed", id, in.Orders[id].Status, in.Orders[id].LastSequence)
		}
	}

	parkedAs := map[string][]Entry{}
	byParkedID := map[string][]Entry{}
	for _, p := range in.Parked {
		parkedAs[p.MessageID] = append(parkedAs[p.MessageID], p)
		byParkedID[p.ParkedID] = append(byParkedID[p.ParkedID], p)
	}
	wantByParkedID := map[string]bool{}
	for id := range wantParked {
		wantByParkedID[contract.DeriveMessageID(id, ":parked")] = true
	}
	for _, id := range slices.Sorted(maps.Keys(wantParked)) {
		ps := parkedAs[id]
		if len(ps) == 0 {
			ps = byParkedID[contract.DeriveMessageID(id, ":parked")] // a rescheduled copy, parked under its original
		}
		switch {
		case len(ps) == 0:
			add("message %s: want it parked (%s), it was not", id, wantParked[id])
		case ps[0].Reason != wantParked[id]:
			add("message %s: parked with reason %s, want %s", id, ps[0].Reason, wantParked[id])
		}
	}
	for _, id := range slices.Sorted(maps.Keys(parkedAs)) {
		ps := parkedAs[id]
		if len(ps) > 1 {
			var ids []string
			for _, p := range ps {
				ids = append(ids, p.ParkedID)
			}
			add("message %s: parked %s under different ids (%s), want once", id, wording.Count(len(ps), "time"), strings.Join(ids, ", "))
		}
		// In a session with a dead-lettered message, an invalid
		// transition may follow from that message's effect (check 5).
		stateDependent := deadSessions[sessionOf[id]] && ps[0].Reason == order.ReasonInvalidTransition
		if _, ok := wantParked[id]; !ok && !wantByParkedID[ps[0].ParkedID] && !dead[id] && !stateDependent && !outageParked(ps[0].Reason) {
			add("message %s: parked (%s), but it is not poison", id, ps[0].Reason)
		}
	}
	return v
}

// foundOwnWrite reports whether result is a correct handler's answer for
// c, completed at its first delivery, having found its own write (see
// check 6): the fold says Applied, after is the state c produced, result
// is the fold's result for c against after, and the order's row, read,
// covers c.
func foundOwnWrite(c Completion, want string, after *order.State, in CheckInput, now time.Time) bool {
	if want != string(order.Applied) || after == nil {
		return false
	}
	again := *after
	state := &again
	if result, _ := foldOne(&state, c, in.PaymentTimeout, now); c.Result != result {
		return false
	}
	row, found := in.Orders[c.SessionID]
	if !in.Queried[c.SessionID] || !found || row.LastSequence < after.LastSequence {
		return false
	}
	return c.Subject != order.SubjectPaymentTimeout || row.Status == string(order.Cancelled) || row.LastSequence > after.LastSequence
}

// supersededAt reports, for a payment timeout accepted by foundOwnWrite
// whose row is no longer Cancelled, the sequence a later message of the
// fold must pass: a payment made by the deadline superseded the
// cancellation. Zero when nothing more is needed.
func supersededAt(c Completion, after *order.State, in CheckInput) int64 {
	if c.Subject != order.SubjectPaymentTimeout || in.Orders[c.SessionID].Status == string(order.Cancelled) {
		return 0
	}
	return after.LastSequence
}

// behindCache reports the answer CheckInput.Instances describes: Duplicate
// from an instance whose cache was behind a row another instance moved on.
func behindCache(c Completion, want string, in CheckInput) bool {
	return in.Instances > 1 && want == string(order.Stale) && c.Result == string(order.Duplicate)
}

// foldOne applies one completed message to *state and returns the result a
// correct handler reports, and the poison reason when it parks it. A status
// change without an occurredAt occurred when its first message was
// enqueued (Completion.Enqueued), as the handler takes it.
func foldOne(state **order.State, c Completion, timeout time.Duration, now time.Time) (result, reason string) {
	if timeout <= 0 {
		timeout = contract.PaymentTimeout
	}
	poison := func(err error) (string, string) {
		var pe *order.PoisonError
		if errors.As(err, &pe) {
			return resultParked, pe.Reason
		}
		return resultParked, order.ReasonInvalidPayload
	}
	var d order.Decision
	switch c.Subject {
	case order.SubjectStatusChanged:
		u, err := order.ParseUpdate(c.Body, c.SessionID)
		if err != nil {
			return poison(err)
		}
		if u.OccurredAt.IsZero() {
			u.OccurredAt = c.Enqueued
		}
		d = order.Decide(*state, u, now)
	case order.SubjectPaymentTimeout:
		tc, err := order.ParseTimeoutCheck(c.Body, c.SessionID)
		if err != nil {
			return poison(err)
		}
		d = order.DecideExpireOf(*state, tc, timeout, now)
	default:
		return resultParked, order.ReasonUnknownSubject
	}
	switch d.Result {
	case order.Applied:
		next := d.Next
		*state = &next
	case order.InvalidTransition:
		return resultParked, order.ReasonInvalidTransition
	}
	return string(d.Result), ""
}
