// Package broker is the handler's one narrow port to Service Bus: send,
// schedule and cancel on a queue, and receive, peek, complete and abandon
// on a queue without sessions or a dead-letter subqueue (the poison
// queue and order-status/$DeadLetterQueue). Session receiving is the Functions host's
// job, never the handler's.
//
// Implementations: sbbroker (azservicebus, production), membroker (in-memory,
// Service Bus semantics, the development host's engine) and loopback (the
// handler's client to the development host's membroker over 127.0.0.1).
// brokertest is the conformance suite every implementation passes.
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
	// ApplicationProperties values are string, bool, int64, float64 or
	// time.Time; other types are converted to strings by implementations.
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
	// Set on dead-lettered messages. As in Service Bus, the reason and the
	// description travel as the application properties "DeadLetterReason"
	// and "DeadLetterErrorDescription" and are read from there, so a
	// message sent with those properties (a parked poison copy) shows them
	// too; clone ApplicationProperties without them before a replay.
	DeadLetterReason           string
	DeadLetterErrorDescription string
	DeadLetterSource           string
	// LockToken identifies the lock of a received (not peeked) message.
	LockToken string
	// Scheduled is true for a message seen by Peek that is scheduled and
	// not yet visible; its SequenceNumber is the one CancelScheduled takes.
	// When it becomes visible it gets a new SequenceNumber.
	Scheduled bool
	// Deferred is true for a message Peek shows that some client set
	// aside with Service Bus deferral (Receive never hands those out).
	// This project never defers: deferral does not work in the
	// dead-letter queue of a session-enabled queue from another receiver
	// (SessionLockLost, Azure/azure-sdk-for-net #34662).
	Deferred bool
}

// Source names what Receive, Peek, Complete and Abandon work on: a queue
// without sessions, or the dead-letter subqueue of any queue.
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

// Names Service Bus gives to dead-lettering: the application properties that
// carry the reason and description, and the reasons the broker itself sets.
const (
	PropertyDeadLetterReason           = "DeadLetterReason"
	PropertyDeadLetterErrorDescription = "DeadLetterErrorDescription"

	ReasonMaxDeliveryCountExceeded = "MaxDeliveryCountExceeded"
	ReasonTTLExpired               = "TTLExpiredException"
)

// Sentinel errors; implementations wrap them with %w.
var (
	// ErrLockLost: the lock of the message expired or it was settled
	// already; settling it again is impossible.
	ErrLockLost = errors.New("broker: lock lost")
	// ErrNotFound: no such queue, or no scheduled message with that
	// sequence number.
	ErrNotFound = errors.New("broker: not found")
	// ErrTransient: timeout, throttling, connection loss; retry later.
	ErrTransient = errors.New("broker: transient failure")
	// ErrInvalid: the request can never succeed (missing SessionId on a
	// session queue, message too large, ...).
	ErrInvalid = errors.New("broker: invalid request")
)

// Broker is the port. Every method honours ctx; none retries beyond what the
// underlying client does, and all are safe for concurrent use.
type Broker interface {
	// Send enqueues msg on queue. Duplicate detection may drop it silently.
	Send(ctx context.Context, queue string, msg Message) error
	// Schedule enqueues msg to become visible at at and returns its
	// sequence number for CancelScheduled.
	Schedule(ctx context.Context, queue string, msg Message, at time.Time) (int64, error)
	// CancelScheduled removes a scheduled message that is not yet visible.
	// ErrNotFound when there is none with that number.
	CancelScheduled(ctx context.Context, queue string, sequenceNumber int64) error
	// Receive locks and returns up to max messages, waiting at most wait
	// for the first one. An empty result with a nil error means empty.
	Receive(ctx context.Context, src Source, max int, wait time.Duration) ([]Received, error)
	// Peek returns up to max messages from sequence number from on, without
	// locking or changing them.
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

// PeekAll returns every message of src, in sequence-number order, paging
// through Peek. It locks and changes nothing.
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
