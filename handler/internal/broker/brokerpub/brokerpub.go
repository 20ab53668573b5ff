// Package brokerpub is the one adapter from the broker port to package
// publish's Sender, so the public publisher sends through this module's
// brokers (Service Bus, the development host's, the in-memory one).
package brokerpub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/publish"
)

// Broker is what the adapter needs of a broker.
type Broker interface {
	Send(ctx context.Context, queue string, msg broker.Message) error
	Schedule(ctx context.Context, queue string, msg broker.Message, at time.Time) (int64, error)
	CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error
}

// batcher is a Broker that sends a batch in one call.
type batcher interface {
	SendBatch(ctx context.Context, queue string, msgs []broker.Message) error
}

// Sender returns b as a publish.Sender and BatchSender, broker.ErrNotFound
// mapped to publish.ErrNotScheduled and broker.ErrInvalid to ErrRefused.
func Sender(b Broker) publish.Sender { return sender{b} }

type sender struct{ b Broker }

func (s sender) Send(ctx context.Context, queue string, m publish.Message) error {
	return mapped(s.b.Send(ctx, queue, broker.Message(m)))
}

func (s sender) SendBatch(ctx context.Context, queue string, msgs []publish.Message) error {
	bb, ok := s.b.(batcher)
	if !ok {
		for _, m := range msgs {
			if err := s.Send(ctx, queue, m); err != nil {
				return err
			}
		}
		return nil
	}
	out := make([]broker.Message, len(msgs))
	for i, m := range msgs {
		out[i] = broker.Message(m)
	}
	return mapped(bb.SendBatch(ctx, queue, out))
}

func (s sender) Schedule(ctx context.Context, queue string, m publish.Message, at time.Time) (int64, error) {
	seq, err := s.b.Schedule(ctx, queue, broker.Message(m), at)
	return seq, mapped(err)
}

func (s sender) CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error {
	return mapped(s.b.CancelScheduled(ctx, queue, sequenceNumber))
}

func mapped(err error) error {
	switch {
	case errors.Is(err, broker.ErrNotFound):
		return fmt.Errorf("%w: %w", publish.ErrNotScheduled, err)
	case errors.Is(err, broker.ErrInvalid):
		return fmt.Errorf("%w: %w", publish.ErrRefused, err)
	}
	return err
}
