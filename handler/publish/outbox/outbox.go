// Package outbox is a transactional outbox for the order-status producers: a
// producer commits its state and the messages reporting it in one
// transaction, and a Relay sends them through package publish, so a crash can
// delay a message, never lose it. Table does this in Azure Table Storage
// (aztables SubmitTransaction); a producer on another database stores
// Encode's records and implements Store. Delivery is at least once.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/publish"
)

// Kind is what a record asks the relay to do.
type Kind string

// Kinds of records.
const (
	// KindStatus sends an OrderStatusChanged.
	KindStatus Kind = "status"
	// KindSchedule schedules the order's PaymentTimeoutCheck after After.
	KindSchedule Kind = "schedule"
	// KindCancel cancels the order's checks by their sequence numbers.
	KindCancel Kind = "cancel"
)

// State is where a record is in its life.
type State string

// States of a record.
const (
	Pending State = "pending" // committed, not yet sent
	Sent    State = "sent"    // sent (or found done: a cancel with nothing to cancel)
	Failed  State = "failed"  // parked: Service Bus refused it for good (Record.Error says why)
)

// Intent is one outgoing message of a commit, made by Status, ScheduleTimeout
// or CancelTimeout; an invalid one fails the commit, writing nothing.
type Intent struct {
	kind   Kind
	msg    publish.Message
	change contract.StatusChanged // of KindStatus
	order  string
	after  time.Duration
	// ofCommit: the check of the order's Created in the same commit (Encode).
	ofCommit bool
	err      error
}

// Status is the intent to send c's OrderStatusChanged (publish.StatusMessage).
func Status(c contract.StatusChanged) Intent {
	m, err := publish.StatusMessage(c)
	if err != nil {
		return Intent{err: fmt.Errorf("outbox: status %s seq %d: %w", c.OrderID, c.Sequence, err)}
	}
	return Intent{kind: KindStatus, msg: m, change: c, order: c.OrderID}
}

// ScheduleTimeout is the intent to schedule the order's PaymentTimeoutCheck
// after after from the commit (usually contract.PaymentTimeout): that of the
// Created committed with it, else the older form (prefer ScheduleTimeoutFor).
// A second schedule of it in a partition is ErrConflict.
func ScheduleTimeout(orderID string, after time.Duration) Intent {
	in := ScheduleTimeoutFor(orderID, 0, after)
	in.ofCommit = in.err == nil
	return in
}

// ScheduleTimeoutFor is ScheduleTimeout of the check of the order's Created
// of sequence createdSeq (publish.TimeoutMessageFor).
func ScheduleTimeoutFor(orderID string, createdSeq int64, after time.Duration) Intent {
	m, err := publish.TimeoutMessageFor(orderID, createdSeq)
	if err != nil {
		return Intent{err: fmt.Errorf("outbox: timeout %s: %w", orderID, err)}
	}
	if after <= 0 {
		return Intent{err: fmt.Errorf("outbox: timeout %s: after %s: want a positive duration: %w", orderID, after, contract.ErrInvalid)}
	}
	return Intent{kind: KindSchedule, msg: m, order: orderID, after: after}
}

// CancelTimeout is the intent to cancel the order's PaymentTimeoutChecks
// scheduled through the outbox in the partition, by any process (the relay
// waits for pending schedules); none, or one delivered already, is harmless.
func CancelTimeout(orderID string) Intent {
	if err := contract.ValidateOrderID(orderID); err != nil {
		return Intent{err: fmt.Errorf("outbox: cancel timeout %s: %w", orderID, err)}
	}
	return Intent{kind: KindCancel, order: orderID}
}

// Err is the intent's validation error, nil when it is valid.
func (i Intent) Err() error { return i.err }

// Record is one outgoing message as a Store keeps it.
type Record struct {
	// Partition is the partition key it was committed in; ID its key there.
	Partition, ID string
	// Seq orders a partition's records, set by the Store at commit.
	Seq  int64
	Kind Kind
	// OrderID is the order the message is about.
	OrderID string
	// Message is the message to send; empty for KindCancel.
	Message publish.Message
	// After is KindSchedule's delay from CommittedAt.
	After       time.Duration
	CommittedAt time.Time

	State State
	// DoneAt is when the record was marked Sent or Failed.
	DoneAt time.Time
	// SequenceNumber is the scheduled message's, once a KindSchedule is sent.
	SequenceNumber int64
	// Error is why a Failed record was parked.
	Error string
	// Version is the Store's opaque version as read (an ETag); see Mark.
	Version string
}

// Encode turns intents into the records a producer on another database stores
// in its own transaction for partition at now (the Store sets ID, Seq in
// record order, and Version), each order's status changes in sequence order.
// An invalid intent fails it with that intent's error.
func Encode(partition string, now time.Time, intents ...Intent) ([]Record, error) {
	if err := contract.ValidateOrderID(partition); err != nil {
		return nil, fmt.Errorf("outbox: partition: %w", err)
	}
	if len(intents) == 0 {
		return nil, fmt.Errorf("outbox: no intents: %w", contract.ErrInvalid)
	}
	out := make([]Record, 0, len(intents))
	seen := map[string]bool{}
	created := map[string]int64{} // each order's highest Created in the commit
	for _, in := range intents {
		if c := in.change; in.kind == KindStatus && c.Status == contract.Created {
			created[c.OrderID] = max(created[c.OrderID], c.Sequence)
		}
	}
	var changes []contract.StatusChanged // of the status records, by index in out
	var at []int
	for i, in := range intents {
		if in.err != nil {
			return nil, in.err
		}
		if in.kind == "" {
			return nil, fmt.Errorf("outbox: intent %d: the zero Intent: make it with Status, ScheduleTimeout or CancelTimeout: %w", i, contract.ErrInvalid)
		}
		if seq := created[in.order]; in.ofCommit && seq > 0 {
			in = ScheduleTimeoutFor(in.order, seq, in.after) // valid: the order and after were checked
		}
		if in.kind == KindStatus || in.kind == KindSchedule {
			if seen[in.msg.MessageID] {
				return nil, fmt.Errorf("outbox: intent %d: message %s twice in one commit: %w", i, in.msg.MessageID, contract.ErrInvalid)
			}
			seen[in.msg.MessageID] = true
		}
		if in.kind == KindStatus {
			changes, at = append(changes, in.change), append(at, len(out))
		}
		out = append(out, Record{Partition: partition, Kind: in.kind, OrderID: in.order, Message: in.msg,
			After: in.after, CommittedAt: now.UTC(), State: Pending})
	}
	// Each order's status records in sequence order, in the places they hold.
	sub := make([]Record, len(at))
	for k, i := range at {
		sub[k] = out[i]
	}
	sortEachOrder(changes, sub)
	for k, i := range at {
		out[i] = sub[k]
	}
	return out, nil
}

// Mark is the outcome a relay records for one record of a partition.
type Mark struct {
	ID string
	// Version, if set, requires the record unchanged (ErrConflict otherwise).
	Version string
	State   State // Sent or Failed
	DoneAt  time.Time
	// SequenceNumber is recorded on a KindSchedule record.
	SequenceNumber int64
	// Error is recorded on a Failed record (kept short).
	Error string
}

// Store is the records' storage, the port a producer on another database
// implements (outboxtest checks it). Its methods honour ctx and are safe for
// concurrent use, by several relays too.
type Store interface {
	// Pending returns up to max Pending records, each partition's in Seq
	// order, never one without every lower-Seq Pending one of its partition.
	Pending(ctx context.Context, max int) ([]Record, error)
	// Timeouts returns the KindSchedule records of orderID in partition, one
	// per check, in any state, in Seq order.
	Timeouts(ctx context.Context, partition, orderID string) ([]Record, error)
	// Mark records outcomes for up to MaxMarks records of a partition, all or
	// none: ErrConflict on a changed Version, ErrNotFound on an unknown ID.
	Mark(ctx context.Context, partition string, marks []Mark) error
	// Purge deletes up to max Sent records done before before and returns how
	// many; Pending and Failed records stay.
	Purge(ctx context.Context, before time.Time, max int) (int, error)
}

// MaxMarks is the most marks one Store.Mark call takes (a transaction's 100).
const MaxMarks = 100

// Sentinel errors; a Store wraps them with %w.
var (
	// ErrConflict: a Version or ETag condition failed, or the row exists.
	ErrConflict = errors.New("outbox: conflict")
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("outbox: not found")
	// ErrTransient: timeout, throttling, connection loss: try again.
	ErrTransient = errors.New("outbox: transient failure")
	// ErrTooLarge: the commit exceeds a transaction limit (see Table).
	ErrTooLarge = errors.New("outbox: commit too large")
)

// timeoutCheck decodes and verifies a KindSchedule record's check.
func timeoutCheck(r Record) (contract.PaymentTimeoutCheck, error) {
	c, err := decodeBody(r, func(c contract.PaymentTimeoutCheck) (publish.Message, error) {
		return publish.TimeoutMessageFor(c.OrderID, c.CreatedSequence)
	})
	if err == nil && c.OrderID != r.OrderID {
		err = fmt.Errorf("outbox: record %s/%s: body is of order %s, record of %s: %w", r.Partition, r.ID, c.OrderID, r.OrderID, contract.ErrInvalid)
	}
	return c, err
}

// statusChange decodes and verifies a KindStatus record's change.
func statusChange(r Record) (contract.StatusChanged, error) {
	return decodeBody(r, publish.StatusMessage)
}

// decodeBody reads r's body as a T, which encode must turn into r's MessageId.
func decodeBody[T any](r Record, encode func(T) (publish.Message, error)) (T, error) {
	var c T
	if err := json.Unmarshal(r.Message.Body, &c); err != nil {
		return c, fmt.Errorf("outbox: record %s/%s: body: %v: %w", r.Partition, r.ID, err, contract.ErrInvalid)
	}
	if m, err := encode(c); err != nil {
		return c, fmt.Errorf("outbox: record %s/%s: %w", r.Partition, r.ID, err)
	} else if m.MessageID != r.Message.MessageID {
		return c, fmt.Errorf("outbox: record %s/%s: body encodes %s, record says %s: %w", r.Partition, r.ID, m.MessageID, r.Message.MessageID, contract.ErrInvalid)
	}
	return c, nil
}
