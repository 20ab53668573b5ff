package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// serviceBus is NewServiceBus's Sender: one SDK sender per queue; Close
// closes them, not the client.
type serviceBus struct {
	client *azservicebus.Client

	mu      sync.Mutex
	senders map[string]*azservicebus.Sender
}

func (b *serviceBus) sender(queue string) (*azservicebus.Sender, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.senders[queue]; ok {
		return s, nil
	}
	s, err := b.client.NewSender(queue, nil)
	if err != nil {
		return nil, err
	}
	b.senders[queue] = s
	return s, nil
}

// Send implements Sender.
func (b *serviceBus) Send(ctx context.Context, queue string, msg Message) error {
	s, err := b.sender(queue)
	if err == nil {
		err = s.SendMessage(ctx, toSB(msg), nil)
	}
	return classified(err)
}

// SendBatch implements BatchSender: msgs in order, in as few batches as their
// size allows; a failure leaves the earlier batches sent.
func (b *serviceBus) SendBatch(ctx context.Context, queue string, msgs []Message) error {
	s, err := b.sender(queue)
	if err != nil {
		return classified(err)
	}
	var batch *azservicebus.MessageBatch
	for i := 0; i < len(msgs); {
		if batch == nil {
			if batch, err = s.NewMessageBatch(ctx, nil); err != nil {
				return classified(err)
			}
		}
		err := batch.AddMessage(toSB(msgs[i]), nil)
		switch {
		case err == nil:
			i++
			continue
		case !errors.Is(err, azservicebus.ErrMessageTooLarge) || batch.NumMessages() == 0:
			return fmt.Errorf("message %s: %w", msgs[i].MessageID, classified(err))
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			return classified(err)
		}
		batch = nil
	}
	if batch != nil && batch.NumMessages() > 0 {
		return classified(s.SendMessageBatch(ctx, batch, nil))
	}
	return nil
}

// Schedule implements Sender.
func (b *serviceBus) Schedule(ctx context.Context, queue string, msg Message, at time.Time) (int64, error) {
	s, err := b.sender(queue)
	var seqs []int64
	if err == nil {
		seqs, err = s.ScheduleMessages(ctx, []*azservicebus.Message{toSB(msg)}, at, nil)
	}
	if err == nil && len(seqs) != 1 {
		err = fmt.Errorf("service returned %d sequence numbers for one message", len(seqs))
	}
	if err != nil {
		return 0, classified(err)
	}
	return seqs[0], nil
}

// CancelScheduled implements Sender.
func (b *serviceBus) CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error {
	s, err := b.sender(queue)
	if err == nil {
		err = s.CancelScheduledMessages(ctx, []int64{sequenceNumber}, nil)
	}
	return classified(err)
}

// Close closes the senders.
func (b *serviceBus) Close(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for q, s := range b.senders {
		errs = append(errs, s.Close(ctx))
		delete(b.senders, q)
	}
	return errors.Join(errs...)
}

// classified wraps ErrNotScheduled or ErrRefused onto err, by the codes of
// azservicebus's Error and the conditions of go-amqp's Error.
func classified(err error) error {
	if err == nil {
		return nil
	}
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeNotFound {
		return fmt.Errorf("%w: %w", ErrNotScheduled, err)
	}
	if errors.Is(err, azservicebus.ErrMessageTooLarge) {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		switch amqpErr.Condition {
		case "com.microsoft:message-not-found":
			return fmt.Errorf("%w: %w", ErrNotScheduled, err)
		case amqp.ErrCondNotAllowed, amqp.ErrCondInvalidField, amqp.ErrCondMessageSizeExceeded,
			amqp.ErrCondDecodeError, "com.microsoft:argument-error", "com.microsoft:argument-out-of-range":
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
	}
	return err
}

func toSB(msg Message) *azservicebus.Message {
	m := &azservicebus.Message{MessageID: &msg.MessageID, Body: msg.Body, ApplicationProperties: msg.ApplicationProperties}
	for _, f := range []struct {
		v   string
		dst **string
	}{{msg.SessionID, &m.SessionID}, {msg.Subject, &m.Subject}, {msg.ContentType, &m.ContentType}, {msg.CorrelationID, &m.CorrelationID}} {
		if f.v != "" {
			v := f.v
			*f.dst = &v
		}
	}
	if msg.TimeToLive > 0 {
		m.TimeToLive = &msg.TimeToLive
	}
	return m
}
