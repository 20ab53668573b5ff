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
	// Completions are the workload queue's completed messages, in order.
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
	// CallsPerSession is maxConcurrentCallsPerSession (checks 4 to 6 need 1).
	CallsPerSession int
	// Instances is how many instances took message calls; with more than one,
	// a cache behind the row may answer Duplicate where the fold says Stale
	// (orderstate.Service.ApplyUnder), which Check then accepts.
	Instances int
	// PaymentTimeout is the handler's payment timeout (zero: contract.PaymentTimeout).
	PaymentTimeout time.Duration
}

// The result the handler reports for a parked message.
const resultParked = "Parked"

// resultRescheduled answers a message rescheduled as a copy (package reschedule).
const resultRescheduled = "Rescheduled"

// outageParked reports whether reason parks a message whose retries outlasted the window.
func outageParked(reason string) bool {
	return reason == order.ReasonRetryWindowExceeded || reason == order.ReasonOrderNeverCreated
}

// Check returns the invariants of a finished run that do not hold; for a
// correct handler behind a correct broker they hold whatever the timing:
//
//  1. Drained: no triggered queue holds active, locked or scheduled messages.
//  2. Nothing lost: every MessageId sent was completed or dead-lettered.
//  3. Only the broker dead-letters: MaxDeliveryCountExceeded (at least the
//     max delivery count) or TTLExpiredException.
//  4. Rows: an order whose messages all completed has the row the fold of
//     order.Decide and order.DecideExpireOf over them gives.
//  5. Parking: the messages the fold calls poison are exactly the ones
//     parked, each once, with the fold's reason.
//  6. Results: a message completed at its first delivery has the fold's
//     result, or a stale cache's (behindCache) or a found own write's
//     (foundOwnWrite).
//
// Sessions with a dead-lettered or rescheduled message are judged less, as
// their effect may or may not have happened. Checks 4 to 6 need
// maxConcurrentCallsPerSession 1 and are skipped otherwise.
func Check(in CheckInput) []string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }

	v = append(v, in.Busy...)

	completed := map[string]bool{}
	sessionOf := map[string]string{} // MessageId -> session, of completed messages
	// Sessions with a rescheduled message are judged less (checks 4 to 6).
	rescheduled := map[string]bool{}
	for _, c := range in.Completions {
		completed[c.MessageID] = true
		sessionOf[c.MessageID] = c.SessionID
		if c.Result == resultRescheduled {
			rescheduled[c.SessionID] = true
		}
	}
	dead := map[string]bool{}
	// So are sessions with a dead-lettered message.
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
	// A superseded payment timeout is right only if the fold moved past it.
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
		// An invalid transition may follow from a dead-lettered message (check 5).
		stateDependent := deadSessions[sessionOf[id]] && ps[0].Reason == order.ReasonInvalidTransition
		if _, ok := wantParked[id]; !ok && !wantByParkedID[ps[0].ParkedID] && !dead[id] && !stateDependent && !outageParked(ps[0].Reason) {
			add("message %s: parked (%s), but it is not poison", id, ps[0].Reason)
		}
	}
	return v
}

// foundOwnWrite reports whether c's result is what a handler that found its
// own write answers: after is the state c produced, and the row covers c.
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

// supersededAt returns the sequence the fold must pass for a payment timeout
// foundOwnWrite accepted whose row is no longer Cancelled; zero otherwise.
func supersededAt(c Completion, after *order.State, in CheckInput) int64 {
	if c.Subject != order.SubjectPaymentTimeout || in.Orders[c.SessionID].Status == string(order.Cancelled) {
		return 0
	}
	return after.LastSequence
}

// behindCache reports the stale-cache Duplicate CheckInput.Instances describes.
func behindCache(c Completion, want string, in CheckInput) bool {
	return in.Instances > 1 && want == string(order.Stale) && c.Result == string(order.Duplicate)
}

// foldOne applies c to *state and returns a correct handler's result and
// poison reason; a missing occurredAt is c.Enqueued, as the handler takes it.
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
