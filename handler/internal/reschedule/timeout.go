package reschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// TimeoutCheckID is the MessageId of an order's PaymentTimeoutCheck as the
// handler schedules it: the producer's own, contract.TimeoutMessageID
// (<order>:payment-timeout, hashed within 128 characters for a long order
// id), so that a producer's check and the handler's are the same message
// to duplicate detection when both are sent within its window.
func TimeoutCheckID(orderID string) string { return contract.TimeoutMessageID(orderID) }

// TimeoutCheck builds orderID's PaymentTimeoutCheck: the contract's body,
// subject and content type, in the order's session.
func TimeoutCheck(orderID string) broker.Message {
	body, _ := json.Marshal(contract.PaymentTimeoutCheck{OrderID: orderID}) // a struct of one string cannot fail
	return broker.Message{MessageID: TimeoutCheckID(orderID), SessionID: orderID,
		Subject: contract.SubjectPaymentTimeout, ContentType: contract.ContentType, Body: body}
}

// TimeoutDue is when an order created at occurredAt is checked:
// occurredAt + contract.PaymentTimeout, or now when that has passed.
func TimeoutDue(occurredAt, now time.Time) time.Time {
	due := occurredAt.Add(contract.PaymentTimeout)
	if due.Before(now) {
		return now
	}
	return due
}

// ScheduleTimeoutCheck makes sure a PaymentTimeoutCheck of orderID, created
// at occurredAt (zero: now), is scheduled: at occurredAt + contract.PaymentTimeout on
// the broker's clock; but when that has passed (a late Created) or the
// Created was itself delayed (held up by an outage here), not before
// Settle from now, so that the order's own late messages (its Paid, which
// may well have happened in time) come back first: a check due at once
// would cancel a paid order whose Created and Paid both arrive late. It
// returns when the check is due. A check that already
// exists (the producer's, or ours from an earlier delivery) is harmless:
// the check re-reads the order and cancels it only if it is still Created.
//
// floor, if not zero, is a reading of the broker's clock taken before the
// call (the development host's, hostproto.HeaderHostClock): a lower bound
// of its now. On a broker with a clock of its own (Clock), a Created that
// carried no occurredAt and was not delayed has its check scheduled at
// floor + contract.PaymentTimeout without asking the clock, one call less
// on the hot path: earlier than from the exact now by no more than the
// call has lasted on that clock, and nothing else can differ (such a
// Created is never late, and Settle does not apply). Every other Created
// asks the clock: with an occurredAt, whether its due time has passed
// (late, then Settle from now) is decided by the exact now, however long
// the call has lasted; a delayed one's check is no sooner than Settle from
// now.
func (r *Rescheduler) ScheduleTimeoutCheck(ctx context.Context, orderID string, occurredAt time.Time, delayed bool, floor time.Time) (time.Time, error) {
	if r == nil || r.s == nil {
		return time.Time{}, ErrNotConfigured
	}
	now, ok := floor, r.fromFloor(occurredAt, delayed, floor)
	if !ok {
		var err error
		if now, err = r.Now(ctx); err != nil {
			return time.Time{}, err
		}
	}
	if occurredAt.IsZero() {
		// The Created carried no occurredAt: it was created when it was
		// applied, on the broker's clock (the handler's wall clock may
		// run slower than a development host's).
		occurredAt = now
	}
	at := TimeoutDue(occurredAt, now)
	late := !occurredAt.Add(contract.PaymentTimeout).After(now)
	if s := now.Add(r.policy.Settle()); (delayed || late) && at.Before(s) {
		at = s
	}
	m := TimeoutCheck(orderID)
	if _, err := r.s.Schedule(ctx, r.queue, m, at); err != nil {
		return at, fmt.Errorf("reschedule: schedule %s at %s: %w", m.MessageID, at.UTC().Format(time.RFC3339), err)
	}
	return at, nil
}

// fromFloor reports whether ScheduleTimeoutCheck takes floor for the
// broker's now (its contract): the broker has a clock to ask, floor is
// set, and the Created carried no occurredAt and was not delayed.
func (r *Rescheduler) fromFloor(occurredAt time.Time, delayed bool, floor time.Time) bool {
	_, asks := r.s.(Clock)
	return asks && !floor.IsZero() && occurredAt.IsZero() && !delayed
}
