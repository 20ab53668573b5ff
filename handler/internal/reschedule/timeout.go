package reschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// TimeoutCheckID is the MessageId of the check of orderID's Created createdSeq (0: none
// named): the producer's own, contract.TimeoutMessageID, so duplicate detection sees one.
func TimeoutCheckID(orderID string, createdSeq int64) string {
	return contract.TimeoutMessageID(orderID, createdSeq)
}

// TimeoutCheck builds the PaymentTimeoutCheck of orderID's Created createdSeq, in its session.
func TimeoutCheck(orderID string, createdSeq int64) broker.Message {
	body, _ := json.Marshal(contract.PaymentTimeoutCheck{OrderID: orderID, CreatedSequence: createdSeq}) // a struct of a string and an int cannot fail
	return broker.Message{MessageID: TimeoutCheckID(orderID, createdSeq), SessionID: orderID,
		Subject: contract.SubjectPaymentTimeout, ContentType: contract.ContentType, Body: body}
}

// TimeoutDue is occurredAt+timeout, within [now, now+timeout]: when an order created then is checked.
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
	// Skew is how far occurredAt was ahead of now (the check counts from now).
	Skew time.Duration
}

// ScheduleCreatedCheck schedules the PaymentTimeoutCheck of orderID's Created
// createdSeq, occurred at occurredAt (zero: now), at TimeoutDue.
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
