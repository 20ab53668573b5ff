// Package outbox is a transactional outbox for the order-status producers:
// a producer commits its own state and the messages that report it in one
// transaction, and a relay sends the committed messages through the
// publish package afterwards. Either both the state and the messages
// happen or neither does; a crash can delay a message, never lose it.
//
// For a producer whose state lives in Azure Table Storage, Table commits
// the producer's own entity operations and the outgoing messages in one
// entity-group transaction (aztables SubmitTransaction) in the producer's
// table and partition:
//
//	tbl, _ := outbox.NewTable(svc.NewClient("checkout"), nil)
//	err := tbl.Commit(ctx, "o-1",
//		outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: orderRow},
//		outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Created, Sequence: 1, OccurredAt: now}),
//		outbox.ScheduleTimeout("o-1", contract.PaymentTimeout))
//	// elsewhere in the process:
//	go outbox.NewRelay(tbl, publish.NewServiceBus(client, nil), nil).Run(ctx)
//
// The messages are built by the publish package's encoder when the intent
// is made (Status, ScheduleTimeout, CancelTimeout), so an invalid one
// fails the commit before anything is written.
//
// One Commit is one entity-group transaction, so Table Storage's limits
// bound it (Commit checks them first and fails with ErrTooLarge): at most
// 100 operations, of which the outbox takes one for the partition's
// counter row, one per intent and one more per timeout scheduled; at most
// 4 MiB in all; at most 1 MiB per entity; at most 64 KiB per string or
// binary property. Every operation is in the commit's partition.
//
// Delivery is at least once. A relay that crashes after sending and before
// marking a record sends it again with the same MessageId: Service Bus
// duplicate detection drops it within its window (10 minutes on the
// order-status queue), and the handler's sequence rule absorbs it after
// (a status with a sequence it has applied is a Duplicate or Stale; a
// second PaymentTimeoutCheck re-reads the order and changes nothing).
//
// A producer on another database keeps the same pattern with its own
// transaction: it stores the records Encode returns next to its state,
// implements Store on that database, runs the relay on it, and proves the
// implementation with the conformance suite in package outboxtest.
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
	// KindSchedule schedules the order's PaymentTimeoutCheck, After the
	// commit; the relay records the scheduled message's sequence number.
	KindSchedule Kind = "schedule"
	// KindCancel cancels the order's PaymentTimeoutCheck by the sequence
	// number recorded on its schedule record (in the same partition),
	// whichever producer process committed and sent it.
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

// Intent is one outgoing message of a commit: a status change, or the
// scheduling or cancelling of an order's payment timeout. Make it with
// Status, ScheduleTimeout or CancelTimeout; an invalid intent carries its
// error, and the commit that contains it fails with that error (wrapping
// contract.ErrInvalid) before anything is written.
type Intent struct {
	kind  Kind
	msg   publish.Message
	order string
	after time.Duration
	// ofCommit: a ScheduleTimeout, whose check is that of the order's
	// Created in the same commit, if any (see Encode).
	ofCommit bool
	err      error
}

// Status is the intent to send c's OrderStatusChanged (publish.StatusMessage).
func Status(c contract.StatusChanged) Intent {
	m, err := publish.StatusMessage(c)
	if err != nil {
		return Intent{err: fmt.Errorf("outbox: status %s seq %d: %w", c.OrderID, c.Sequence, err)}
	}
	return Intent{kind: KindStatus, msg: m, order: c.OrderID}
}

// ScheduleTimeout is the intent to schedule the order's
// PaymentTimeoutCheck after after, counted from the commit (usually
// contract.PaymentTimeout): the check of the order's Created committed
// with it (the highest sequence, if there are several), which is the
// handler's own check of that Created too (one MessageId,
// publish.TimeoutMessageFor); in a commit without one, the older form
// that names no Created (publish.TimeoutMessage): use ScheduleTimeoutFor
// then. A relay that sends it late schedules it for the time that is
// left, or at once when that has passed. Each check is scheduled once per
// partition: a second schedule of the same check (the same Created, or a
// second of the older form) in the same partition fails that commit with
// ErrConflict; an order created again has a check per Created.
func ScheduleTimeout(orderID string, after time.Duration) Intent {
	in := ScheduleTimeoutFor(orderID, 0, after)
	in.ofCommit = in.err == nil
	return in
}

// ScheduleTimeoutFor is ScheduleTimeout of the check of the order's
// Created of sequence createdSeq, committed with it or before
// (publish.TimeoutMessageFor).
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

// CancelTimeout is the intent to cancel the order's PaymentTimeoutChecks,
// every one scheduled through the outbox in the same partition (by any
// process of any producer sharing the table). The relay cancels each by
// the sequence number recorded when its schedule was sent; while one is
// still pending it waits for it; if there is none, or a check was
// delivered already, that part of the cancel is done (harmless: the
// handler cancels an order only while it is still at the Created a check
// names).
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
	// Partition is the producer's partition key the record was committed
	// in; ID is its key there, assigned by the Store.
	Partition, ID string
	// Seq orders a partition's records: the relay sends them in Seq order.
	// The Store assigns it at commit, increasing within a partition.
	Seq  int64
	Kind Kind
	// OrderID is the order the message is about.
	OrderID string
	// Message is the message to send (KindStatus, KindSchedule), built by
	// the publish package's encoder; empty for KindCancel.
	Message publish.Message
	// After is KindSchedule's delay from CommittedAt.
	After       time.Duration
	CommittedAt time.Time

	State State
	// DoneAt is when the record was marked Sent or Failed.
	DoneAt time.Time
	// SequenceNumber is the scheduled message's, once a KindSchedule
	// record is sent.
	SequenceNumber int64
	// Error is why a Failed record was parked.
	Error string
	// Version is the Store's opaque version of the record as read (an
	// ETag); Mark with a Version fails with ErrConflict if it changed.
	Version string
}

// Encode turns intents into the records a producer on another database
// stores in its own transaction, for partition, committed at now; the
// Store assigns ID and Seq (in the order of the records) and Version.
// The records keep the order of intents, except that each order's status
// changes are put in sequence order among themselves. The relay sends a
// partition's records in Seq order: within a commit, each order's
// changes in sequence order; across commits, in commit order (which is
// sequence order when the producer's own state serialises its commits,
// as an ETag condition on it does). An
// invalid intent fails it with that intent's error.
func Encode(partition string, now time.Time, intents ...Intent) ([]Record, error) {
	if err := contract.ValidateOrderID(partition); err != nil {
		return nil, fmt.Errorf("outbox: partition: %w", err)
	}
	if len(intents) == 0 {
		return nil, fmt.Errorf("outbox: no intents: %w", contract.ErrInvalid)
	}
	out := make([]Record, 0, len(intents))
	seen := map[string]bool{}
	created := createdIn(intents)
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
		out = append(out, Record{Partition: partition, Kind: in.kind, OrderID: in.order, Message: in.msg,
			After: in.after, CommittedAt: now.UTC(), State: Pending})
	}
	sequenceOrder(out)
	return out, nil
}

// createdIn maps each order with a Created among intents to the highest
// sequence of its Created.
func createdIn(intents []Intent) map[string]int64 {
	created := map[string]int64{}
	for _, in := range intents {
		if in.kind != KindStatus {
			continue
		}
		if c, err := statusChange(Record{Message: in.msg}); err == nil && c.Status == contract.Created && c.Sequence > created[c.OrderID] {
			created[c.OrderID] = c.Sequence
		}
	}
	return created
}

// sequenceOrder puts each order's status records in sequence order within
// the places its status records have, so that the relay, which sends in
// Seq order, sends them in sequence order even when a pass reads only
// part of a commit.
func sequenceOrder(recs []Record) {
	var changes []contract.StatusChanged
	var idx []int
	for i, r := range recs {
		if r.Kind == KindStatus {
			c, _ := statusChange(r) // built by the encoder above: decodes
			changes, idx = append(changes, c), append(idx, i)
		}
	}
	sub := make([]Record, len(idx))
	for k, i := range idx {
		sub[k] = recs[i]
	}
	sortEachOrder(changes, sub)
	for k, i := range idx {
		recs[i] = sub[k]
	}
}

// Mark is the outcome a relay records for one record of a partition.
type Mark struct {
	ID string
	// Version, if set, makes the mark conditional on the record being
	// unchanged since it was read (ErrConflict otherwise).
	Version string
	State   State // Sent or Failed
	DoneAt  time.Time
	// SequenceNumber is recorded on a KindSchedule record.
	SequenceNumber int64
	// Error is recorded on a Failed record (kept short).
	Error string
}

// Store is what the relay needs from the storage the records live in: the
// port a producer on another database implements (package outboxtest is
// its conformance suite). Every method honours ctx and is safe for
// concurrent use, also by several relays in several processes.
type Store interface {
	// Pending returns up to max Pending records. Each partition's records
	// come in Seq order and a partition's records after one that is
	// returned may be left for a later call, never skipped: a record is
	// returned only if every Pending record of its partition with a lower
	// Seq is returned too.
	Pending(ctx context.Context, max int) ([]Record, error)
	// Timeouts returns the KindSchedule records of orderID in partition
	// (one per check: per Created, and the older form's), whatever their
	// state, in Seq order; none when it was never scheduled, or purged.
	Timeouts(ctx context.Context, partition, orderID string) ([]Record, error)
	// Mark records outcomes for records of one partition, all or none
	// (at most MaxMarks). A mark with a Version that no longer matches
	// fails it with an error wrapping ErrConflict; an ID that names no
	// record fails it with ErrNotFound.
	Mark(ctx context.Context, partition string, marks []Mark) error
	// Purge deletes up to max Sent records whose DoneAt is before before
	// and returns how many it deleted. Pending and Failed records stay.
	Purge(ctx context.Context, before time.Time, max int) (int, error)
}

// MaxMarks is the most marks one Store.Mark call takes: Table Storage's
// limit of 100 operations per entity-group transaction.
const MaxMarks = 100

// Sentinel errors; a Store wraps them with %w.
var (
	// ErrConflict: a concurrent writer changed the row (a Version or ETag
	// condition failed, or an insert found the row there).
	ErrConflict = errors.New("outbox: conflict")
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("outbox: not found")
	// ErrTransient: timeout, throttling, connection loss: try again.
	ErrTransient = errors.New("outbox: transient failure")
	// ErrTooLarge: the commit exceeds a transaction limit (see Table).
	ErrTooLarge = errors.New("outbox: commit too large")
)

// timeoutCheck decodes a KindSchedule record's body back into the check it
// encodes, so that the relay schedules the message committed (a record
// committed before checks named their Created keeps its older form).
func timeoutCheck(r Record) (contract.PaymentTimeoutCheck, error) {
	var c contract.PaymentTimeoutCheck
	if err := json.Unmarshal(r.Message.Body, &c); err != nil {
		return c, fmt.Errorf("outbox: record %s/%s: body: %v: %w", r.Partition, r.ID, err, contract.ErrInvalid)
	}
	if m, err := publish.TimeoutMessageFor(c.OrderID, c.CreatedSequence); err != nil {
		return c, fmt.Errorf("outbox: record %s/%s: %w", r.Partition, r.ID, err)
	} else if m.MessageID != r.Message.MessageID || c.OrderID != r.OrderID {
		return c, fmt.Errorf("outbox: record %s/%s: body encodes %s of order %s, record says %s of order %s: %w",
			r.Partition, r.ID, m.MessageID, c.OrderID, r.Message.MessageID, r.OrderID, contract.ErrInvalid)
	}
	return c, nil
}

// statusChange decodes a KindStatus record's body back into the change it
// encodes (the contract's own JSON), so that the relay can hand it to
// publish.Publisher.Statuses, which re-encodes it to the same message.
func statusChange(r Record) (contract.StatusChanged, error) {
	var c contract.StatusChanged
	if err := json.Unmarshal(r.Message.Body, &c); err != nil {
		return c, fmt.Errorf("outbox: record %s/%s: body: %v: %w", r.Partition, r.ID, err, contract.ErrInvalid)
	}
	if m, err := publish.StatusMessage(c); err != nil {
		return c, fmt.Errorf("outbox: record %s/%s: %w", r.Partition, r.ID, err)
	} else if m.MessageID != r.Message.MessageID {
		return c, fmt.Errorf("outbox: record %s/%s: body encodes %s, record says %s: %w", r.Partition, r.ID, m.MessageID, r.Message.MessageID, contract.ErrInvalid)
	}
	return c, nil
}
