package reschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// TimeoutCheckID is the MessageId of the PaymentTimeoutCheck of orderID's
// Created of sequence createdSeq as the handler schedules it: the
// producer's own, contract.TimeoutMessageID
// (<order>:payment-timeout-<createdSeq>, hashed within 128 characters for
// a long order id), so that a producer's check of that Created and the
// handler's are the same message to duplicate detection when both are
// sent within its window, and each Created has a check of its own. A
// createdSeq of 0 gives the id of a check that names no Created.
func TimeoutCheckID(orderID string, createdSeq int64) string {
	return contract.TimeoutMessageID(orderID, createdSeq)
}

// TimeoutCheck builds the PaymentTimeoutCheck of orderID's Created of
// sequence createdSeq (0: none named): the contract's body, subject and
// content type, in the order's session.
func TimeoutCheck(orderID string, createdSeq int64) broker.Message {
	body, _ := json.Marshal(contract.PaymentTimeoutCheck{OrderID: orderID, CreatedSequence: createdSeq}) // a struct of a string and an int cannot fail
	return broker.Message{MessageID: TimeoutCheckID(orderID, createdSeq), SessionID: orderID,
		Subject: contract.SubjectPaymentTimeout, ContentType: contract.ContentType, Body: body}
}

// TimeoutDue is when an order created at occurredAt is checked:
// occurredAt + contract.PaymentTimeout, or now when that has passed, and
// never later than now + contract.PaymentTimeout (an occurredAt ahead of
// now, a producer's clock running fast, counts from now).
func TimeoutDue(occurredAt, now time.Time) time.Time {
	if occurredAt.After(now) {
		occurredAt = now
	}
	due := occurredAt.Add(contract.PaymentTimeout)
	if due.Before(now) {
		return now
	}
	return due
}

// CheckScheduled is what ScheduleCreatedCheck scheduled.
type CheckScheduled struct {
	// At is when the check is due, on the broker's clock.
	At time.Time
	// Skew is how far the Created's occurredAt was ahead of the broker's
	// now (zero when it was not): the check was counted from now instead.
	Skew time.Duration
}

// ScheduleCreatedCheck makes sure the PaymentTimeoutCheck of orderID's
// Created of sequence createdSeq (TimeoutCheck), created at occurredAt
// (zero: now), is scheduled: at occurredAt + contract.PaymentTimeout on
// the broker's clock, never later than now + contract.PaymentTimeout (an
// occurredAt ahead of now is reported as Skew); but when that has passed (a late Created) or the
// Created was itself delayed (held up by an outage here), not before
// Settle from now, so that the order's own late messages (its Paid, which
// may well have happened in time) come back first: a check due at once
// would cancel a paid order whose Created and Paid both arrive late. It
// returns when the check is due. A check that already
// exists (the producer's, or ours from an earlier delivery) is harmless:
// the check re-reads the order and cancels it only if it is still Created.
func (r *Rescheduler) ScheduleCreatedCheck(ctx context.Context, orderID string, createdSeq int64, occurredAt time.Time, delayed bool) (CheckScheduled, error) {
	if r == nil || r.s == nil {
		return CheckScheduled{}, ErrNotConfigured
	}
	now, err := r.Now(ctx)
	if err != nil {
		return CheckScheduled{}, err
	}
	var skew time.Duration
	if occurredAt.After(now) {
		skew, occurredAt = occurredAt.Sub(now), now
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
	m := TimeoutCheck(orderID, createdSeq)
	if _, err := r.s.Schedule(ctx, r.queue, m, at); err != nil {
		return CheckScheduled{At: at, Skew: skew}, fmt.Errorf("reschedule: schedule %s at %s: %w", m.MessageID, at.UTC().Format(time.RFC3339), err)
	}
	return CheckScheduled{At: at, Skew: skew}, nil
}
