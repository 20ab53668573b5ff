package deadletter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// Errors of the by-hand operations.
var (
	// ErrNoMessage: no message with that id on the source.
	ErrNoMessage = errors.New("deadletter: no such message")
	// ErrInvalidBody: the message to send would be parked again; the error
	// says why (it wraps the *order.PoisonError).
	ErrInvalidBody = errors.New("deadletter: the message would be parked again")
)

// Find peeks source k for the message with id messageID: its own
// MessageId, or the OriginalMessageId of a parked copy.
func (s *Sweeper) Find(ctx context.Context, k Kind, messageID string) (broker.Received, error) {
	msgs, err := broker.PeekAll(ctx, s.b, s.o.Queues.Source(k))
	if err != nil {
		return broker.Received{}, fmt.Errorf("deadletter: %s: %w", k, err)
	}
	for _, m := range msgs {
		if m.MessageID == messageID {
			return m, nil
		}
	}
	for _, m := range msgs {
		if OriginalID(m) == messageID {
			return m, nil
		}
	}
	return broker.Received{}, fmt.Errorf("%w: %q on %s (%s)", ErrNoMessage, messageID, k, s.o.Queues.Source(k))
}

// lock receives the message peeked as p: by sequence number if deferred,
// else from the head of the queue, setting aside (deferring) the messages
// before it so that none has its delivery count raised; the sweeper still
// applies the policy to those.
func (s *Sweeper) lock(ctx context.Context, k Kind, p broker.Received) (broker.Received, error) {
	src := s.o.Queues.Source(k)
	if p.Deferred {
		got, err := s.b.ReceiveDeferred(ctx, src, []int64{p.SequenceNumber})
		if errors.Is(err, broker.ErrNotFound) {
			return broker.Received{}, fmt.Errorf("%w: %q on %s was removed meanwhile", ErrNoMessage, p.MessageID, k)
		}
		if err != nil {
			return broker.Received{}, fmt.Errorf("deadletter: receive %s seq %d: %w", k, p.SequenceNumber, err)
		}
		return got[0], nil
	}
	for {
		batch, err := s.b.Receive(ctx, src, 20, s.o.ReceiveWait)
		if err != nil {
			return broker.Received{}, fmt.Errorf("deadletter: receive %s: %w", k, err)
		}
		if len(batch) == 0 {
			return broker.Received{}, fmt.Errorf("%w: %q on %s was removed meanwhile", ErrNoMessage, p.MessageID, k)
		}
		var found *broker.Received
		for i := range batch {
			m := batch[i]
			if m.SequenceNumber == p.SequenceNumber && found == nil {
				found = &batch[i]
				continue
			}
			if err := s.b.Defer(ctx, src, m); err != nil {
				return broker.Received{}, fmt.Errorf("deadletter: set aside %s seq %d: %w", k, m.SequenceNumber, err)
			}
		}
		if found != nil {
			return *found, nil
		}
	}
}

// Replay sends the message messageID of source k (dlq or poison) to the
// order-status queue as a replay (see ReplayMessage), with body instead
// of its own when body is not nil, and then takes it off its source: a
// dead-lettered one is completed, a parked one archived and completed. It
// ignores the cool-down and the replay cap (a human decided). The message
// to send is checked against the contract first: ErrInvalidBody, and
// nothing changes, if it would be parked again. It returns the new
// MessageId.
func (s *Sweeper) Replay(ctx context.Context, k Kind, messageID string, body []byte, actor string) (string, error) {
	if k == PoisonDLQ {
		return "", fmt.Errorf("deadletter: replay from %s: take the message from the portal's explorer: %w", k, broker.ErrInvalid)
	}
	p, err := s.Find(ctx, k, messageID)
	if err != nil {
		return "", err
	}
	msg := ReplayMessage(p, body)
	if err := Validate(msg); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidBody, err)
	}
	now, err := s.now(ctx)
	if err != nil {
		return "", err
	}
	m, err := s.lock(ctx, k, p)
	if err != nil {
		return "", err
	}
	src := s.o.Queues.Source(k)
	msg = ReplayMessage(m, body)
	if err := s.b.Send(ctx, s.o.Queues.Queue, msg); err != nil {
		_ = s.b.Defer(context.WithoutCancel(ctx), src, m)
		return "", fmt.Errorf("deadletter: send replay %s of %s: %w", msg.MessageID, messageID, err)
	}
	action := ActionReplay
	if k == Poison {
		action = ActionResubmit
		if err := s.records.Archive(ctx, k, m, now, actor, action); err != nil {
			_ = s.b.Defer(context.WithoutCancel(ctx), src, m)
			return msg.MessageID, fmt.Errorf("deadletter: replay %s sent as %s, but archiving the parked copy failed (it stays parked): %w", messageID, msg.MessageID, err)
		}
	}
	if err := s.b.Complete(ctx, src, m); err != nil {
		return msg.MessageID, fmt.Errorf("deadletter: replay %s sent as %s, but completing it failed: %w", messageID, msg.MessageID, err)
	}
	detail := "replayed by hand"
	if body != nil {
		detail = "replayed by hand with a corrected body"
	}
	return msg.MessageID, s.finish(ctx, k, m, action, msg.MessageID, actor, detail, now)
}

// Discard archives the message messageID of source k and completes it.
func (s *Sweeper) Discard(ctx context.Context, k Kind, messageID, actor string) error {
	p, err := s.Find(ctx, k, messageID)
	if err != nil {
		return err
	}
	now, err := s.now(ctx)
	if err != nil {
		return err
	}
	m, err := s.lock(ctx, k, p)
	if err != nil {
		return err
	}
	src := s.o.Queues.Source(k)
	if err := s.records.Archive(ctx, k, m, now, actor, ActionDiscard); err != nil {
		_ = s.b.Defer(context.WithoutCancel(ctx), src, m)
		return err
	}
	if err := s.b.Complete(ctx, src, m); err != nil {
		return fmt.Errorf("deadletter: discard %s: archived, but completing it failed: %w", messageID, err)
	}
	return s.finish(ctx, k, m, ActionDiscard, "", actor, "discarded by hand (archived first)", now)
}

func (s *Sweeper) finish(ctx context.Context, k Kind, m broker.Received, a Action, newID, actor, detail string, now time.Time) error {
	s.o.Metrics.action(a, m.DeadLetterReason)
	s.log.Info("deadletter_action", "source", string(k), "sequence", m.SequenceNumber, "message_id", m.MessageID,
		"reason", m.DeadLetterReason, "action", string(a), "new_message_id", newID, "actor", actor)
	return s.records.Audit(ctx, AuditRow{At: now, Action: a, Source: k, Reason: m.DeadLetterReason, MessageID: m.MessageID,
		SessionID: sessionOf(m), SequenceNumber: m.SequenceNumber, NewMessageID: newID, Actor: actor, Detail: detail})
}
