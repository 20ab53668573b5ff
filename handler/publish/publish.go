// Package publish is the producers' side of the order-status contract:
// Checkout, Payments, the warehouse and the carrier import it to report
// status changes, and Checkout and Payments to schedule and cancel the
// payment timeout. It is the one encoder of the contract (package
// contract): `orderstatus publish`, the development host's demo and the
// simulation build their messages with StatusMessage and
// TimeoutMessageFor (or TimeoutMessage).
//
// A message is checked against the contract before anything is sent; an
// error wrapping contract.ErrInvalid means nothing was sent.
//
// Sending goes through Sender, a small interface this package owns. Outside
// this module, NewServiceBus wraps an *azservicebus.Client (the producer
// needs only the Azure Service Bus Data Sender role on the queue):
//
//	client, _ := azservicebus.NewClient("sb-x.servicebus.windows.net", cred, nil)
//	p := publish.NewServiceBus(client, nil)
//	defer p.Close(ctx)
//	err := p.Status(ctx, contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2, OccurredAt: time.Now()})
//	s, err := p.ScheduleTimeoutFor(ctx, "o-1", 1, contract.PaymentTimeout) // the check of Created 1; keep s.SequenceNumber
//	err = p.CancelTimeout(ctx, s.SequenceNumber)                            // errors.Is(err, publish.ErrNotScheduled): nothing to cancel
//
// Saving state and then calling these leaves a crash window (saved, never
// sent): package outbox commits the messages with the producer's state and
// relays them through a Publisher.
package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
)

// Message is a Service Bus message as the publisher builds it: MessageID,
// SessionID, Subject, ContentType and Body are set; the other fields
// (CorrelationID, ApplicationProperties, TimeToLive) are left for the
// producer.
type Message struct {
	MessageID     string
	SessionID     string
	Subject       string
	ContentType   string
	CorrelationID string
	Body          []byte
	// ApplicationProperties values are string, bool, int64, float64 or
	// time.Time.
	ApplicationProperties map[string]any
	// TimeToLive overrides the queue default when non-zero.
	TimeToLive time.Duration
}

// DefaultQueue is the order-status queue's name in the Bicep.
const DefaultQueue = "order-status"

// Sender is what the publisher sends through. Every method honours ctx and
// is safe for concurrent use. NewServiceBus sends through one over an
// azservicebus client; a producer's own adapter (or a test fake) may too.
type Sender interface {
	// Send enqueues msg on queue. Duplicate detection may drop it.
	Send(ctx context.Context, queue string, msg Message) error
	// Schedule enqueues msg to become visible at at and returns its sequence number. Duplicate detection may
	// drop it, and Service Bus returns a sequence number all the same
	// (sources in docs/publishing.md).
	Schedule(ctx context.Context, queue string, msg Message, at time.Time) (int64, error)
	// CancelScheduled removes a scheduled message that is not yet
	// visible; an error wrapping ErrNotScheduled when there is none with
	// that number (it was delivered or cancelled already, or never kept).
	CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error
}

// BatchSender is a Sender that sends several messages in one Service Bus
// batch (in order). Statuses uses it when the Sender has it, and sends one
// message at a time otherwise.
type BatchSender interface {
	SendBatch(ctx context.Context, queue string, msgs []Message) error
}

// ErrNotScheduled: CancelTimeout found no scheduled message with that
// sequence number: it became visible (and was delivered), was cancelled
// already, or was never kept: duplicate detection dropped it because the
// queue saw its MessageId within the window, as when the handler had
// scheduled that Created's check itself on applying it (that check
// stands). Each is harmless: the handler cancels an order on a
// PaymentTimeoutCheck only while it is still Created at that Created.
var ErrNotScheduled = errors.New("publish: no such scheduled message")

// ErrRefused: the Sender refused a message for good (too large, no
// SessionId on a session queue, ...): sending it again cannot succeed. A
// Sender wraps it. The outbox's relay parks a
// message refused so instead of retrying it.
var ErrRefused = errors.New("publish: refused for good")

var (
	_ Sender      = (*serviceBus)(nil)
	_ BatchSender = (*serviceBus)(nil)
)

// StatusMessage validates c and builds its OrderStatusChanged message:
// SessionId the order id, MessageId <order>:<sequence>
// (contract.StatusMessageID: the order id hashed when the id would pass
// Service Bus's 128 characters, so any legal order id fits), Subject
// OrderStatusChanged, content type application/json, and the body in the
// contract's camelCase JSON with occurredAt in UTC (left out when zero).
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

// TimeoutMessage is TimeoutMessageFor of a check of the older form, which
// names no Created: MessageId <order>:payment-timeout, body
// {"orderId":"<order>"}. The handler takes such a check for that of the
// Created in effect once that Created is due (and with its rescheduling
// off, at once), and it is not one message with the handler's own check:
// prefer TimeoutMessageFor.
func TimeoutMessage(orderID string) (Message, error) { return TimeoutMessageFor(orderID, 0) }

// TimeoutMessageFor validates orderID and builds the PaymentTimeoutCheck
// message of its Created of sequence createdSeq: SessionId the order id,
// MessageId <order>:payment-timeout-<createdSeq>
// (contract.TimeoutMessageID, within 128 characters as above: the same as
// the handler's own check of that Created, so the two are one message),
// Subject PaymentTimeoutCheck, content type application/json, body
// {"orderId":"<order>","createdSequence":<createdSeq>}. The check cancels
// the order only while that Created is its last change (a check of an
// earlier Created, the order created again since, does nothing).
// createdSeq 0 names no Created (TimeoutMessage); a negative one is
// invalid.
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
	// BatchSize is the most messages Statuses puts in one batch (default
	// 100); a BatchSender may split a batch further by size.
	BatchSize int
}

// Publisher sends the contract's messages to the order-status queue. It is
// safe for concurrent use.
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

// NewServiceBus returns a publisher over an azservicebus client the caller
// made (and keeps: Close closes the publisher's senders, not the client).
// Batches are Service Bus message batches; errors are classified so that
// errors.Is(err, ErrNotScheduled) works.
func NewServiceBus(client *azservicebus.Client, opts *Options) *Publisher {
	b := &serviceBus{client: client}
	p := New(b, opts)
	p.closer = b.Close
	return p
}

// Queue returns the queue the publisher sends to.
func (p *Publisher) Queue() string { return p.queue }

// Close releases what NewServiceBus made; a publisher from New has nothing
// to release (the caller closes its Sender).
func (p *Publisher) Close(ctx context.Context) error {
	if p.closer == nil {
		return nil
	}
	return p.closer(ctx)
}

// traceKey is the context key of WithTraceParent.
type traceKey struct{}

// WithTraceParent returns ctx carrying the W3C traceparent (version 00,
// "00-<trace id>-<span id>-<flags>") of the producer's current span: the
// Publisher stamps every message it sends under ctx with it, as the
// application properties "traceparent" and "Diagnostic-Id" that the Azure
// SDKs and the Functions host read, so the handler's lines and the host's
// telemetry for those messages carry its trace id. An invalid traceparent
// is an error wrapping contract.ErrInvalid.
func WithTraceParent(ctx context.Context, traceparent string) (context.Context, error) {
	t, err := tracectx.Parse(traceparent)
	if err != nil {
		return ctx, fmt.Errorf("publish: traceparent %q: %w", traceparent, contract.ErrInvalid)
	}
	return context.WithValue(ctx, traceKey{}, t), nil
}

// traced returns m with the trace context of ctx (WithTraceParent) or,
// without one, a new trace, unless m carries one already (then kept). The
// application properties map is copied, never shared with the caller's.
func traced(ctx context.Context, m Message) Message {
	t, ok := ctx.Value(traceKey{}).(tracectx.TraceParent)
	if !ok {
		t = tracectx.New()
	}
	m.ApplicationProperties, _ = tracectx.Stamp(maps.Clone(m.ApplicationProperties), t)
	return m
}

// Status validates c and sends its OrderStatusChanged message, with the
// trace context of ctx (see WithTraceParent).
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

// Progress reports how many of total messages Statuses has sent, after
// each batch.
type Progress func(sent, total int)

// Statuses validates every change and then sends them in batches of at
// most Options.BatchSize, in the order given except that each order's
// changes are sent in sequence order (they keep the places the order's
// changes had). An invalid change, or the same order and sequence twice,
// stops it before anything is sent, with an *IndexError. It returns how
// many messages were sent: on a failure, the batches before the failing
// one are sent (sending again is safe: MessageIds repeat, so duplicate
// detection and the handler drop what arrived already).
func (p *Publisher) Statuses(ctx context.Context, changes []contract.StatusChanged, progress Progress) (int, error) {
	msgs := make([]Message, len(changes))
	seqs := make([]int64, len(changes))
	seen := map[string]int{}
	slots := map[string][]int{} // order id -> its indexes, in order
	var orders []string
	for i, c := range changes {
		m, err := StatusMessage(c)
		if err != nil {
			return 0, &IndexError{Index: i, Err: err}
		}
		if j, dup := seen[m.MessageID]; dup {
			return 0, &IndexError{Index: i, Err: fmt.Errorf("order %s sequence %d is also change %d: %w", c.OrderID, c.Sequence, j, contract.ErrInvalid)}
		}
		seen[m.MessageID] = i
		m = traced(ctx, m)
		if _, ok := slots[c.OrderID]; !ok {
			orders = append(orders, c.OrderID)
		}
		slots[c.OrderID] = append(slots[c.OrderID], i)
		msgs[i], seqs[i] = m, c.Sequence
	}
	// Each order's messages in sequence order, in the order's own slots.
	ordered := make([]Message, len(msgs))
	for _, id := range orders {
		idx := slots[id]
		byseq := append([]int(nil), idx...)
		sortBySeq(byseq, seqs)
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

func sortBySeq(idx []int, seqs []int64) {
	for i := 1; i < len(idx); i++ { // insertion sort: an order has few changes
		for j := i; j > 0 && seqs[idx[j]] < seqs[idx[j-1]]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
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
	// SequenceNumber is what CancelTimeout takes: keep it. Service Bus
	// returns one even for a copy duplicate detection dropped (the
	// handler schedules the same MessageId when it applies that
	// Created), so it may name nothing; see ErrNotScheduled.
	SequenceNumber int64
	// MessageID is contract.TimeoutMessageID:
	// <order>:payment-timeout-<Created's sequence> (<order>:payment-timeout
	// for the older form).
	MessageID string
	// At is when it becomes visible.
	At time.Time
}

// ScheduleTimeout is ScheduleTimeoutFor of a check of the older form,
// which names no Created (TimeoutMessage): prefer ScheduleTimeoutFor.
func (p *Publisher) ScheduleTimeout(ctx context.Context, orderID string, after time.Duration) (Scheduled, error) {
	return p.ScheduleTimeoutFor(ctx, orderID, 0, after)
}

// ScheduleTimeoutFor schedules the PaymentTimeoutCheck of the order's
// Created of sequence createdSeq (TimeoutMessageFor) after after (usually
// contract.PaymentTimeout) from now, in the
// order's session. after must be positive. Each Created of an order has a
// check of its own: scheduling that of a Created sent again (a higher
// sequence) does not replace or cancel the earlier one's.
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

// CancelTimeout cancels a scheduled payment timeout by the sequence number
// ScheduleTimeoutFor returned. An error wrapping ErrNotScheduled means there
// was nothing to cancel (harmless: see ErrNotScheduled).
func (p *Publisher) CancelTimeout(ctx context.Context, sequenceNumber int64) error {
	if sequenceNumber < 1 {
		return fmt.Errorf("publish: cancel timeout: sequence number %d: want at least 1: %w", sequenceNumber, contract.ErrInvalid)
	}
	if err := p.s.CancelScheduled(ctx, p.queue, sequenceNumber); err != nil {
		return fmt.Errorf("publish: cancel timeout seq %d: %w", sequenceNumber, err)
	}
	return nil
}

// IsInvalid reports whether err is a validation error: nothing was sent.
func IsInvalid(err error) bool { return errors.Is(err, contract.ErrInvalid) }
