// Package broker is the handler's narrow port to Service Bus: send, schedule and cancel
// on a queue; receive, peek, complete and abandon on a sessionless queue or a dead-letter
// subqueue (sessions are the Functions host's). Implementations: sbbroker, membroker (the
// dev host's engine), loopback (its client); brokertest is their conformance suite.
package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Message is what a producer sends.
type Message struct {
	MessageID     string
	SessionID     string // required on session-enabled queues
	Subject       string
	ContentType   string
	CorrelationID string
	Body          []byte
	// ApplicationProperties values are string, bool, int64, float64 or time.Time.
	ApplicationProperties map[string]any
	// TimeToLive overrides the queue default when non-zero.
	TimeToLive time.Duration
}

// Received is a message handed out by Receive or Peek.
type Received struct {
	Message
	SequenceNumber int64
	DeliveryCount  int32
	EnqueuedTime   time.Time
	ExpiresAt      time.Time
	// Set on dead-lettered messages and, from the same-named properties, parked copies.
	DeadLetterReason           string
	DeadLetterErrorDescription string
	DeadLetterSource           string
	// LockToken identifies the lock of a received (not peeked) message.
	LockToken string
	// Scheduled marks a peeked, not yet visible message; CancelScheduled takes its SequenceNumber.
	Scheduled bool
	// Deferred marks a peeked deferred message (never here: Azure/azure-sdk-for-net #34662).
	Deferred bool
}

// Source is a queue without sessions, or any queue's dead-letter subqueue.
type Source struct {
	Queue      string
	DeadLetter bool
}

// String returns "queue" or "queue/$DeadLetterQueue".
func (s Source) String() string {
	if s.DeadLetter {
		return s.Queue + "/$DeadLetterQueue"
	}
	return s.Queue
}

// Service Bus's dead-letter property names, and reasons the broker itself sets.
const (
	PropertyDeadLetterReason           = "DeadLetterReason"
	PropertyDeadLetterErrorDescription = "DeadLetterErrorDescription"

	ReasonMaxDeliveryCountExceeded = "MaxDeliveryCountExceeded"
	ReasonTTLExpired               = "TTLExpiredException"
)

// Sentinel errors; implementations wrap them with %w.
var (
	// ErrLockLost: the lock expired or the message was settled already.
	ErrLockLost = errors.New("broker: lock lost")
	// ErrNotFound: no such queue, or no scheduled message with that number.
	ErrNotFound = errors.New("broker: not found")
	// ErrTransient: timeout, throttling, connection loss; retry later.
	ErrTransient = errors.New("broker: transient failure")
	// ErrInvalid: the request can never succeed (no SessionId on a session queue, too large).
	ErrInvalid = errors.New("broker: invalid request")
)

// Broker is the port: methods honour ctx, retry no more than the SDK, and are concurrency-safe.
type Broker interface {
	// Send enqueues msg on queue. Duplicate detection may drop it silently.
	Send(ctx context.Context, queue string, msg Message) error
	// Schedule enqueues msg to become visible at at; it returns the number CancelScheduled takes.
	Schedule(ctx context.Context, queue string, msg Message, at time.Time) (int64, error)
	// CancelScheduled removes a scheduled, not yet visible message, or returns ErrNotFound.
	CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error
	// Receive locks up to max messages, waiting at most wait for the first; none means empty.
	Receive(ctx context.Context, src Source, max int, wait time.Duration) ([]Received, error)
	// Peek returns up to max messages from sequence number from on, locking nothing.
	Peek(ctx context.Context, src Source, max int, from int64) ([]Received, error)
	// Complete removes a received message. ErrLockLost if its lock expired.
	Complete(ctx context.Context, src Source, m Received) error
	// Abandon releases a received message's lock; its delivery count grows.
	Abandon(ctx context.Context, src Source, m Received) error
	// Close releases connections.
	Close(ctx context.Context) error
}

// Peeker is the part of Broker that PeekAll needs.
type Peeker interface {
	Peek(ctx context.Context, src Source, max int, from int64) ([]Received, error)
}

// PeekAll returns every message of src in sequence-number order, paging through Peek.
func PeekAll(ctx context.Context, p Peeker, src Source) ([]Received, error) {
	const page = 250
	var out []Received
	var from int64
	for {
		got, err := p.Peek(ctx, src, page, from)
		if err != nil {
			return nil, fmt.Errorf("broker: peek %s: %w", src, err)
		}
		out = append(out, got...)
		if len(got) < page {
			return out, nil
		}
		from = got[len(got)-1].SequenceNumber + 1
	}
}
