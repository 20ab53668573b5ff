// Package publish is the producers' side of the order-status contract
// (package contract): Checkout, Payments, the warehouse and the carrier
// report status changes and schedule and cancel payment timeouts with it.
// StatusMessage and TimeoutMessageFor are the contract's one encoder.
// Messages are validated first: an error wrapping contract.ErrInvalid means
// nothing was sent. NewServiceBus sends through an *azservicebus.Client (the
// Azure Service Bus Data Sender role suffices; docs/publishing.md shows its
// use); package outbox commits messages with the producer's state.
package publish

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
)

// Message is a Service Bus message: the publisher sets MessageID, SessionID,
// Subject, ContentType and Body; the other fields are the producer's.
type Message struct {
	MessageID     string
	SessionID     string
	Subject       string
	ContentType   string
	CorrelationID string
	Body          []byte
	// ApplicationProperties holds string, bool, int64, float64, time.Time.
	ApplicationProperties map[string]any
	// TimeToLive overrides the queue default when non-zero.
	TimeToLive time.Duration
}

// DefaultQueue is the order-status queue's name in the Bicep.
const DefaultQueue = "order-status"

// Sender is what the publisher sends through; its methods honour ctx and are
// safe for concurrent use.
type Sender interface {
	// Send enqueues msg on queue; duplicate detection may drop it.
	Send(ctx context.Context, queue string, msg Message) error
	// Schedule enqueues msg to become visible at at and returns its sequence
	// number, even if duplicate detection drops it (docs/publishing.md).
	Schedule(ctx context.Context, queue string, msg Message, at time.Time) (int64, error)
	// CancelScheduled removes a scheduled message not yet visible; an error
	// wraps ErrNotScheduled when there is none with that number.
	CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error
}

// BatchSender is a Sender that sends several messages in one Service Bus
// batch, in order; Statuses uses it when the Sender has it.
type BatchSender interface {
	SendBatch(ctx context.Context, queue string, msgs []Message) error
}

// ErrNotScheduled: CancelTimeout found no scheduled message with that
// sequence number (delivered, cancelled already, or dropped by duplicate
// detection). It is harmless: a check cancels only an order still Created.
var ErrNotScheduled = errors.New("publish: no such scheduled message")

// ErrRefused: the Sender refused a message for good (too large, no SessionId,
// ...); the outbox's relay parks such a message, not retrying.
var ErrRefused = errors.New("publish: refused for good")

var (
	_ Sender      = (*serviceBus)(nil)
	_ BatchSender = (*serviceBus)(nil)
)

// StatusMessage validates c and builds its OrderStatusChanged message:
// SessionId the order id, MessageId contract.StatusMessageID, body the
// contract's JSON with occurredAt in UTC.
func StatusMessage(c contract.StatusChanged) (Message, error) {
	if err := c.Validate(); err != nil {
		return Message{}, err
	}
	id := contract.StatusMessageID(c.OrderID, c.Sequence)
	if !c.OccurredAt.IsZero() {
		c.OccurredAt = c.OccurredAt.UTC()
	}
	body, err := json.Marshal(c)
	if err != nil { // a valid StatusChanged always encodes
		return Message{}, fmt.Errorf("publish: encode %s: %w", id, err)
	}
	return Message{MessageID: id, SessionID: c.OrderID, Subject: contract.SubjectStatusChanged,
		ContentType: contract.ContentType, Body: body}, nil
}

// TimeoutMessage is TimeoutMessageFor(orderID, 0): the older check, which
// names no Created. Prefer TimeoutMessageFor.
func TimeoutMessage(orderID string) (Message, error) { return TimeoutMessageFor(orderID, 0) }

// TimeoutMessageFor validates orderID and builds the PaymentTimeoutCheck of
// its Created of sequence createdSeq (MessageId contract.TimeoutMessageID, as
// the handler's own), which cancels the order only while that Created is its
// last change. createdSeq 0 names none.
func TimeoutMessageFor(orderID string, createdSeq int64) (Message, error) {
	c := contract.PaymentTimeoutCheck{OrderID: orderID, CreatedSequence: createdSeq}
	if err := c.Validate(); err != nil {
		return Message{}, err
	}
	id := contract.TimeoutMessageID(orderID, createdSeq)
	body, err := json.Marshal(c)
	if err != nil {
		return Message{}, fmt.Errorf("publish: encode %s: %w", id, err)
	}
	return Message{MessageID: id, SessionID: orderID, Subject: contract.SubjectPaymentTimeout,
		ContentType: contract.ContentType, Body: body}, nil
}

// Options tune a Publisher. The zero value (or nil) is usable.
type Options struct {
	// Queue is the session queue (default DefaultQueue).
	Queue string
	// BatchSize is the most messages Statuses puts in a batch (default 100).
	BatchSize int
}

// Publisher sends the contract's messages; safe for concurrent use.
type Publisher struct {
	s      Sender
	queue  string
	batch  int
	closer func(context.Context) error
}

// New returns a publisher sending through s.
func New(s Sender, opts *Options) *Publisher {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Queue == "" {
		o.Queue = DefaultQueue
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 100
	}
	return &Publisher{s: s, queue: o.Queue, batch: o.BatchSize}
}

// NewServiceBus returns a publisher over the caller's azservicebus client;
// Close closes the publisher's senders, not the client.
func NewServiceBus(client *azservicebus.Client, opts *Options) *Publisher {
	b := &serviceBus{client: client, senders: map[string]*azservicebus.Sender{}}
	p := New(b, opts)
	p.closer = b.Close
	return p
}

// Queue returns the queue the publisher sends to.
func (p *Publisher) Queue() string { return p.queue }

// Close releases what NewServiceBus made (nothing for New).
func (p *Publisher) Close(ctx context.Context) error {
	if p.closer == nil {
		return nil
	}
	return p.closer(ctx)
}

type traceKey struct{}

// WithTraceParent returns ctx carrying the producer's W3C traceparent, which
// messages sent under ctx carry as "traceparent" and "Diagnostic-Id". An
// invalid one wraps contract.ErrInvalid.
func WithTraceParent(ctx context.Context, traceparent string) (context.Context, error) {
	t, err := tracectx.Parse(traceparent)
	if err != nil {
		return ctx, fmt.Errorf("publish: traceparent %q: %w", traceparent, contract.ErrInvalid)
	}
	return context.WithValue(ctx, traceKey{}, t), nil
}

// traced stamps a copy of m with ctx's trace context unless m has one.
func traced(ctx context.Context, m Message) Message {
	t, ok := ctx.Value(traceKey{}).(tracectx.TraceParent)
	if !ok {
		t = tracectx.New()
	}
	m.ApplicationProperties, _ = tracectx.Stamp(maps.Clone(m.ApplicationProperties), t)
	return m
}

// Status validates c and sends its OrderStatusChanged message, with the trace
// context of ctx (see WithTraceParent).
func (p *Publisher) Status(ctx context.Context, c contract.StatusChanged) error {
	m, err := StatusMessage(c)
	if err != nil {
		return fmt.Errorf("publish: status %s seq %d: %w", c.OrderID, c.Sequence, err)
	}
	m = traced(ctx, m)
	if err := p.s.Send(ctx, p.queue, m); err != nil {
		return fmt.Errorf("publish: status %s: %w", m.MessageID, err)
	}
	return nil
}

// IndexError is a validation error of one change in Statuses.
type IndexError struct {
	Index int // of the change in the slice given to Statuses
	Err   error
}

func (e *IndexError) Error() string { return fmt.Sprintf("change %d: %v", e.Index, e.Err) }
func (e *IndexError) Unwrap() error { return e.Err }

// Progress reports how many of total messages Statuses has sent, per batch.
type Progress func(sent, total int)

// Statuses validates every change, then sends them in batches of at most
// Options.BatchSize, each order's in sequence order; an invalid or repeated
// change is an *IndexError, nothing sent. It returns how many it sent (on an
// error, those before the failing batch); sending again is safe.
func (p *Publisher) Statuses(ctx context.Context, changes []contract.StatusChanged, progress Progress) (int, error) {
	msgs := make([]Message, len(changes))
	seen := map[string]int{}
	slots := map[string][]int{} // order id -> its indexes, in order
	for i, c := range changes {
		m, err := StatusMessage(c)
		if err != nil {
			return 0, &IndexError{Index: i, Err: err}
		}
		if j, dup := seen[m.MessageID]; dup {
			return 0, &IndexError{Index: i, Err: fmt.Errorf("order %s sequence %d is also change %d: %w", c.OrderID, c.Sequence, j, contract.ErrInvalid)}
		}
		seen[m.MessageID] = i
		msgs[i] = traced(ctx, m)
		slots[c.OrderID] = append(slots[c.OrderID], i)
	}
	// Each order's messages go in its slots, in sequence order.
	ordered := make([]Message, len(msgs))
	for _, idx := range slots {
		byseq := slices.SortedStableFunc(slices.Values(idx), func(a, b int) int { return cmp.Compare(changes[a].Sequence, changes[b].Sequence) })
		for k, slot := range idx {
			ordered[slot] = msgs[byseq[k]]
		}
	}
	sent := 0
	for sent < len(ordered) {
		end := min(sent+p.batch, len(ordered))
		if err := p.sendBatch(ctx, ordered[sent:end]); err != nil {
			return sent, fmt.Errorf("publish: statuses: batch from %s: %w", ordered[sent].MessageID, err)
		}
		sent = end
		if progress != nil {
			progress(sent, len(ordered))
		}
	}
	return sent, nil
}

func (p *Publisher) sendBatch(ctx context.Context, msgs []Message) error {
	if bs, ok := p.s.(BatchSender); ok {
		return bs.SendBatch(ctx, p.queue, msgs)
	}
	for _, m := range msgs {
		if err := p.s.Send(ctx, p.queue, m); err != nil {
			return err
		}
	}
	return nil
}

// Scheduled is a scheduled payment timeout.
type Scheduled struct {
	// SequenceNumber is what CancelTimeout takes; see ErrNotScheduled.
	SequenceNumber int64
	// MessageID is contract.TimeoutMessageID.
	MessageID string
	// At is when it becomes visible.
	At time.Time
}

// ScheduleTimeout is ScheduleTimeoutFor(ctx, orderID, 0, after): prefer that.
func (p *Publisher) ScheduleTimeout(ctx context.Context, orderID string, after time.Duration) (Scheduled, error) {
	return p.ScheduleTimeoutFor(ctx, orderID, 0, after)
}

// ScheduleTimeoutFor schedules the PaymentTimeoutCheck of the order's Created
// of sequence createdSeq after after (positive; usually
// contract.PaymentTimeout). Each Created has its own check.
func (p *Publisher) ScheduleTimeoutFor(ctx context.Context, orderID string, createdSeq int64, after time.Duration) (Scheduled, error) {
	m, err := TimeoutMessageFor(orderID, createdSeq)
	if err != nil {
		return Scheduled{}, fmt.Errorf("publish: timeout %s: %w", orderID, err)
	}
	if after <= 0 {
		return Scheduled{}, fmt.Errorf("publish: timeout %s: after %s: want a positive duration: %w", orderID, after, contract.ErrInvalid)
	}
	m = traced(ctx, m)
	at := time.Now().Add(after)
	seq, err := p.s.Schedule(ctx, p.queue, m, at)
	if err != nil {
		return Scheduled{}, fmt.Errorf("publish: timeout %s: %w", m.MessageID, err)
	}
	return Scheduled{SequenceNumber: seq, MessageID: m.MessageID, At: at}, nil
}

// CancelTimeout cancels a scheduled payment timeout by its sequence number;
// ErrNotScheduled means there was nothing to cancel (harmless).
func (p *Publisher) CancelTimeout(ctx context.Context, sequenceNumber int64) error {
	if sequenceNumber < 1 {
		return fmt.Errorf("publish: cancel timeout: sequence number %d: want at least 1: %w", sequenceNumber, contract.ErrInvalid)
	}
	if err := p.s.CancelScheduled(ctx, p.queue, sequenceNumber); err != nil {
		return fmt.Errorf("publish: cancel timeout seq %d: %w", sequenceNumber, err)
	}
	return nil
}
