// Package sbbroker implements the broker port over Azure Service Bus (azservicebus):
// it caches a sender per queue and a receiver per source, tracks received messages by
// lock token until settled (the SDK settles a *ReceivedMessage) and classifies SDK
// errors once. Its conformance suite needs SERVICEBUS_TEST_NAMESPACE.
package sbbroker

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/google/uuid"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/internal/msgutil"
)

// Options tune New and NewFromClient; nil or the zero value is usable.
type Options struct {
	// Timeout bounds every call beyond a receive's wait (default 30 s), as ctx does.
	Timeout time.Duration
	// MaxTracked bounds unsettled messages remembered (default 10 000); forgotten: ErrLockLost.
	MaxTracked int
	// Logger receives cache evictions; nil discards them.
	Logger *slog.Logger
}

// Broker is the Service Bus broker; its methods are safe for concurrent use.
type Broker struct {
	client  *azservicebus.Client
	borrow  bool // the client is the caller's: Close leaves it open
	timeout time.Duration
	log     *slog.Logger

	mu        sync.Mutex
	closed    bool
	senders   map[string]*azservicebus.Sender
	receivers map[broker.Source]*receiver
	tracked   map[string]*list.Element // lock token -> element of order
	order     *list.List               // of *trackedMessage, oldest first
	maxTrack  int
}

// receiver is a cached SDK receiver; recvMu serialises ReceiveMessages on it.
type receiver struct {
	r      *azservicebus.Receiver
	recvMu sync.Mutex
}

type trackedMessage struct {
	token string
	src   broker.Source
	r     *azservicebus.Receiver
	msg   *azservicebus.ReceivedMessage
}

var _ broker.Broker = (*Broker)(nil)

var errClosed = errors.New("sbbroker: broker closed")

// New returns a broker for namespace authenticating with cred; it connects on first use.
func New(namespace string, cred azcore.TokenCredential, opts *Options) (*Broker, error) {
	o := options(opts)
	c, err := azservicebus.NewClient(namespace, cred, nil)
	if err != nil {
		return nil, fmt.Errorf("sbbroker: client for %s: %w", namespace, err)
	}
	return newBroker(c, o), nil
}

// NewFromClient returns a broker over the caller's client, which Close leaves open.
func NewFromClient(c *azservicebus.Client, opts *Options) *Broker {
	b := newBroker(c, options(opts))
	b.borrow = true
	return b
}

func options(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxTracked <= 0 {
		o.MaxTracked = 10000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func newBroker(c *azservicebus.Client, o Options) *Broker {
	return &Broker{
		client:    c,
		timeout:   o.Timeout,
		log:       o.Logger.With(slog.String("component", "sbbroker")),
		senders:   make(map[string]*azservicebus.Sender),
		receivers: make(map[broker.Source]*receiver),
		tracked:   make(map[string]*list.Element),
		order:     list.New(),
		maxTrack:  o.MaxTracked,
	}
}

func (b *Broker) sender(queue string) (*azservicebus.Sender, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed
	}
	if s, ok := b.senders[queue]; ok {
		return s, nil
	}
	s, err := b.client.NewSender(queue, nil)
	if err != nil {
		return nil, classify(err)
	}
	b.senders[queue] = s
	return s, nil
}

func (b *Broker) receiver(src broker.Source) (*receiver, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed
	}
	if r, ok := b.receivers[src]; ok {
		return r, nil
	}
	var ro azservicebus.ReceiverOptions
	if src.DeadLetter {
		ro.SubQueue = azservicebus.SubQueueDeadLetter
	}
	r, err := b.client.NewReceiverForQueue(src.Queue, &ro)
	if err != nil {
		return nil, classify(err)
	}
	rc := &receiver{r: r}
	b.receivers[src] = rc
	return rc, nil
}

// forget drops a cached sender or receiver the SDK reports closed.
func (b *Broker) forget(err error, queue string, src *broker.Source) {
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeClosed {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if src != nil {
		delete(b.receivers, *src)
	} else {
		delete(b.senders, queue)
	}
}

// Send enqueues msg on queue; a msg without MessageID gets a random one.
func (b *Broker) Send(ctx context.Context, queue string, msg broker.Message) error {
	m := toSB(msg)
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.sender(queue)
	if err == nil {
		err = s.SendMessage(ctx, m, nil)
		b.forget(err, queue, nil)
	}
	if err != nil {
		return fmt.Errorf("sbbroker: send %s message %s: %w", queue, *m.MessageID, classify(err))
	}
	return nil
}

// SendBatch sends msgs to queue in order in as few batches as fit; earlier batches stay sent
// when a later one fails, and a message too large for a batch alone is ErrInvalid.
func (b *Broker) SendBatch(ctx context.Context, queue string, msgs []broker.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.sender(queue)
	if err != nil {
		return fmt.Errorf("sbbroker: send batch %s: %w", queue, classify(err))
	}
	fail := func(err error, id string) error {
		b.forget(err, queue, nil)
		return fmt.Errorf("sbbroker: send batch %s (at message %s): %w", queue, id, classify(err))
	}
	var batch *azservicebus.MessageBatch
	for i := 0; i < len(msgs); {
		m := toSB(msgs[i])
		if batch == nil {
			if batch, err = s.NewMessageBatch(ctx, nil); err != nil {
				return fail(err, *m.MessageID)
			}
		}
		err := batch.AddMessage(m, nil)
		switch {
		case err == nil:
			i++
			continue
		case !errors.Is(err, azservicebus.ErrMessageTooLarge):
			return fail(err, *m.MessageID)
		case batch.NumMessages() == 0:
			return fmt.Errorf("sbbroker: send batch %s: message %s is too large for a batch: %w", queue, *m.MessageID, broker.ErrInvalid)
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			return fail(err, *m.MessageID)
		}
		batch = nil
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		return fail(err, msgs[len(msgs)-1].MessageID)
	}
	return nil
}

// Schedule enqueues msg to become visible at at and returns its sequence number.
func (b *Broker) Schedule(ctx context.Context, queue string, msg broker.Message, at time.Time) (int64, error) {
	m := toSB(msg)
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.sender(queue)
	var seqs []int64
	if err == nil {
		seqs, err = s.ScheduleMessages(ctx, []*azservicebus.Message{m}, at, nil)
		b.forget(err, queue, nil)
	}
	if err == nil && len(seqs) != 1 {
		err = fmt.Errorf("service returned %d sequence numbers for one message", len(seqs))
	}
	if err != nil {
		return 0, fmt.Errorf("sbbroker: schedule %s message %s at %s: %w", queue, *m.MessageID, at.Format(time.RFC3339), classify(err))
	}
	return seqs[0], nil
}

// CancelScheduled removes a scheduled message, or returns ErrNotFound.
func (b *Broker) CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.sender(queue)
	if err == nil {
		err = s.CancelScheduledMessages(ctx, []int64{sequenceNumber}, nil)
		b.forget(err, queue, nil)
	}
	if err != nil {
		return fmt.Errorf("sbbroker: cancel %s seq %d: %w", queue, sequenceNumber, classify(err))
	}
	return nil
}

// Receive locks up to max messages of src, waiting up to wait for the first; none means empty.
func (b *Broker) Receive(ctx context.Context, src broker.Source, maxMessages int, wait time.Duration) ([]broker.Received, error) {
	if maxMessages <= 0 {
		return nil, fmt.Errorf("sbbroker: receive %s: max %d: %w", src, maxMessages, broker.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout+max(wait, 0))
	defer cancel()
	rc, err := b.receiver(src)
	if err != nil {
		return nil, fmt.Errorf("sbbroker: receive %s: %w", src, classify(err))
	}
	waitCtx, cancelWait := context.WithTimeout(ctx, wait)
	defer cancelWait()

	rc.recvMu.Lock()
	msgs, err := rc.r.ReceiveMessages(waitCtx, maxMessages, nil)
	rc.recvMu.Unlock()
	if err != nil {
		if ctx.Err() == nil && errors.Is(waitCtx.Err(), context.DeadlineExceeded) {
			return []broker.Received{}, nil // waited, nothing came
		}
		b.forget(err, "", &src)
		return nil, fmt.Errorf("sbbroker: receive %s: %w", src, classify(err))
	}
	out := make([]broker.Received, 0, len(msgs))
	for _, m := range msgs {
		r := fromSB(m)
		b.track(&trackedMessage{token: r.LockToken, src: src, r: rc.r, msg: m})
		out = append(out, r)
	}
	return out, nil
}

// Peek returns up to max messages of src from sequence number from on, unlocked.
func (b *Broker) Peek(ctx context.Context, src broker.Source, maxMessages int, from int64) ([]broker.Received, error) {
	if maxMessages <= 0 {
		return nil, fmt.Errorf("sbbroker: peek %s: max %d: %w", src, maxMessages, broker.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	rc, err := b.receiver(src)
	var msgs []*azservicebus.ReceivedMessage
	if err == nil {
		from = max(from, 0)
		msgs, err = rc.r.PeekMessages(ctx, maxMessages, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		b.forget(err, "", &src)
	}
	if err != nil {
		return nil, fmt.Errorf("sbbroker: peek %s from %d: %w", src, from, classify(err))
	}
	out := make([]broker.Received, 0, len(msgs))
	for _, m := range msgs {
		r := fromSB(m)
		r.LockToken = "" // peeked messages cannot be settled
		out = append(out, r)
	}
	return out, nil
}

// track remembers a received message until settled, forgetting the oldest past MaxTracked.
func (b *Broker) track(t *trackedMessage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.tracked[t.token]; ok {
		b.order.Remove(old)
	}
	b.tracked[t.token] = b.order.PushBack(t)
	for b.order.Len() > b.maxTrack {
		oldest := b.order.Remove(b.order.Front()).(*trackedMessage)
		delete(b.tracked, oldest.token)
		b.log.Warn("forgot an unsettled received message", slog.String("source", oldest.src.String()),
			slog.String("message_id", oldest.msg.MessageID), slog.Int("max_tracked", b.maxTrack))
	}
}

// lookup returns the tracked message of token received from src.
func (b *Broker) lookup(src broker.Source, token string) (*trackedMessage, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	el, ok := b.tracked[token]
	if !ok {
		return nil, false
	}
	t := el.Value.(*trackedMessage)
	return t, t.src == src
}

func (b *Broker) untrack(token string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.tracked[token]; ok {
		b.order.Remove(el)
		delete(b.tracked, token)
	}
}

func (b *Broker) settle(ctx context.Context, op string, src broker.Source, m broker.Received,
	fn func(context.Context, *azservicebus.Receiver, *azservicebus.ReceivedMessage) error) error {
	t, ok := b.lookup(src, m.LockToken)
	if !ok {
		return fmt.Errorf("sbbroker: %s %s seq %d: not a message received from %s here and not yet settled: %w",
			op, src, m.SequenceNumber, src, broker.ErrLockLost)
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	err := classify(fn(ctx, t.r, t.msg))
	if err == nil || errors.Is(err, broker.ErrLockLost) {
		b.untrack(m.LockToken)
	}
	if err != nil {
		return fmt.Errorf("sbbroker: %s %s seq %d: %w", op, src, m.SequenceNumber, err)
	}
	return nil
}

// Complete removes a received message; ErrLockLost if its lock is gone or not this Broker's.
func (b *Broker) Complete(ctx context.Context, src broker.Source, m broker.Received) error {
	return b.settle(ctx, "complete", src, m, func(ctx context.Context, r *azservicebus.Receiver, rm *azservicebus.ReceivedMessage) error {
		return r.CompleteMessage(ctx, rm, nil)
	})
}

// Abandon releases a received message's lock, raising its delivery count; errors as Complete.
func (b *Broker) Abandon(ctx context.Context, src broker.Source, m broker.Received) error {
	return b.settle(ctx, "abandon", src, m, func(ctx context.Context, r *azservicebus.Receiver, rm *azservicebus.ReceivedMessage) error {
		return r.AbandonMessage(ctx, rm, nil)
	})
}

// Close closes the cached senders, receivers and connection (not a NewFromClient client).
func (b *Broker) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	senders, receivers := b.senders, b.receivers
	b.senders, b.receivers = nil, nil
	b.tracked = map[string]*list.Element{}
	b.order.Init()
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	var errs []error
	for q, s := range senders {
		if err := s.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("sender %s: %w", q, err))
		}
	}
	for src, r := range receivers {
		if err := r.r.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("receiver %s: %w", src, err))
		}
	}
	if !b.borrow { // a caller's client stays open
		if err := b.client.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("client: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sbbroker: close: %w", err)
	}
	return nil
}

// toSB maps a port message to a new SDK message sharing nothing with msg.
func toSB(msg broker.Message) *azservicebus.Message {
	msg = msgutil.Message(msg)
	if msg.MessageID == "" {
		msg.MessageID = msgutil.NewID()
	}
	m := &azservicebus.Message{
		MessageID:             &msg.MessageID,
		Body:                  msg.Body,
		ApplicationProperties: msg.ApplicationProperties,
	}
	if msg.SessionID != "" {
		m.SessionID = &msg.SessionID
	}
	if msg.Subject != "" {
		m.Subject = &msg.Subject
	}
	if msg.ContentType != "" {
		m.ContentType = &msg.ContentType
	}
	if msg.CorrelationID != "" {
		m.CorrelationID = &msg.CorrelationID
	}
	if msg.TimeToLive > 0 {
		m.TimeToLive = &msg.TimeToLive
	}
	return m
}

// fromSB maps an SDK message to a port message sharing nothing with m.
func fromSB(m *azservicebus.ReceivedMessage) broker.Received {
	r := broker.Received{
		Message: broker.Message{
			MessageID:             m.MessageID,
			SessionID:             deref(m.SessionID),
			Subject:               deref(m.Subject),
			ContentType:           deref(m.ContentType),
			CorrelationID:         deref(m.CorrelationID),
			Body:                  m.Body,
			ApplicationProperties: m.ApplicationProperties,
		},
		SequenceNumber:             deref(m.SequenceNumber),
		DeliveryCount:              int32(min(m.DeliveryCount, 1<<31-1)),
		EnqueuedTime:               deref(m.EnqueuedTime),
		ExpiresAt:                  deref(m.ExpiresAt),
		DeadLetterReason:           deref(m.DeadLetterReason),
		DeadLetterErrorDescription: deref(m.DeadLetterErrorDescription),
		DeadLetterSource:           deref(m.DeadLetterSource),
		Scheduled:                  m.State == azservicebus.MessageStateScheduled,
		Deferred:                   m.State == azservicebus.MessageStateDeferred,
	}
	if m.TimeToLive != nil {
		r.TimeToLive = *m.TimeToLive
	}
	if m.LockToken != ([16]byte{}) {
		r.LockToken = uuid.UUID(m.LockToken).String()
	}
	return msgutil.Received(r)
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
