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

// TimeoutDue is when an order created at occurredAt is checked, for a
// payment timeout of timeout: occurredAt + timeout, or now when that has
// passed, and never later than now + timeout (an occurredAt ahead of now,
// a producer's clock running fast, counts from now).
func TimeoutDue(occurredAt, now time.Time, timeout time.Duration) time.Time {
	if occurredAt.After(now) {
		occurredAt = now
	}
	due := occurredAt.Add(timeout)
	if due.Before(now) {
		return now
	}
	return due
}

// CheckScheduled is what ScheduleCreatedCheck scheduled.
type CheckScheduled struct {
	// At is when the check is due.
	At time.Time
	// Skew is how far the Created's occurredAt was ahead of now (zero
	// when it was not): the check was counted from now instead.
	Skew time.Duration
}

// ScheduleCreatedCheck makes sure the PaymentTimeoutCheck of orderID's
// Created of sequence createdSeq (TimeoutCheck), created at occurredAt
// (zero: now), is scheduled: at TimeoutDue for the payment timeout
// (Options.PaymentTimeout), at once for a late Created. A check due at once
// may cancel an order whose Paid is still on its way; that Paid, paid by
// the deadline, supersedes the cancellation (order.Decide). A check that
// already exists (the producer's, or ours from an earlier delivery) is
// harmless: the check re-reads the order and cancels it only if it is
// still Created.
func (r *Rescheduler) ScheduleCreatedCheck(ctx context.Context, orderID string, createdSeq int64, occurredAt time.Time) (CheckScheduled, error) {
	if r == nil || r.s == nil {
		return CheckScheduled{}, ErrNotConfigured
	}
	now := r.now()
	var skew time.Duration
	if occurredAt.After(now) {
		skew = occurredAt.Sub(now)
	}
	if occurredAt.IsZero() {
		occurredAt = now
	}
	at := TimeoutDue(occurredAt, now, r.timeout)
	m := TimeoutCheck(orderID, createdSeq)
	if _, err := r.s.Schedule(ctx, r.queue, m, at); err != nil {
		return CheckScheduled{At: at, Skew: skew}, fmt.Errorf("reschedule: schedule %s at %s: %w", m.MessageID, at.UTC().Format(time.RFC3339), err)
	}
	return CheckScheduled{At: at, Skew: skew}, nil
}
