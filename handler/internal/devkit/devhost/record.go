package devhost

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

// recorder is the broker the handler talks to through the loopback server:
// the membroker, recording what the handler parked and took out of the DLQs.
type recorder struct {
	broker.Broker
	mb          *membroker.Broker
	poisonQueue string

	mu         sync.Mutex
	parked     []Entry         // in order, one per distinct parked MessageId
	parkedIDs  map[string]bool // parked MessageIds seen
	dlqRemoved []Entry
	// dlqLocked holds dead-lettered messages handed out and not settled.
	dlqLocked map[lockKey]broker.Received
	// sent counts the messages sent or scheduled through the recorder, by queue.
	sent map[string]int
	// rescheduled counts copies with RetryAttempt; parkedSends poison copies.
	rescheduled, parkedSends int
}

// lockKey names a message handed out from a dead-letter subqueue.
type lockKey struct {
	queue     string
	lockToken string
}

var _ broker.Broker = (*recorder)(nil)

func newRecorder(b *membroker.Broker, poisonQueue string) *recorder {
	return &recorder{Broker: b, mb: b, poisonQueue: poisonQueue, parkedIDs: map[string]bool{}, dlqLocked: map[lockKey]broker.Received{}, sent: map[string]int{}}
}

// Clock is the broker's clock, which producers schedule on (/broker/now).
func (r *recorder) Clock() clock.Clock { return r.mb.Clock() }

// Send forwards to the broker and records a message sent to the poison queue.
func (r *recorder) Send(ctx context.Context, queue string, msg broker.Message) error {
	if err := r.Broker.Send(ctx, queue, msg); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent[queue]++
	if queue == r.poisonQueue {
		r.parkedSends++
		if !r.parkedIDs[msg.MessageID] {
			r.parkedIDs[msg.MessageID] = true
			r.parked = append(r.parked, Entry{
				MessageID: stringProp(msg.ApplicationProperties, parking.PropOriginalMessageID, msg.MessageID),
				Reason:    stringProp(msg.ApplicationProperties, broker.PropertyDeadLetterReason, ""),
				ParkedID:  msg.MessageID,
			})
		}
	}
	return nil
}

// Schedule forwards to the broker and counts the message.
func (r *recorder) Schedule(ctx context.Context, queue string, msg broker.Message, at time.Time) (int64, error) {
	seq, err := r.Broker.Schedule(ctx, queue, msg, at)
	if err == nil {
		r.mu.Lock()
		r.sent[queue]++
		if _, retry := msg.ApplicationProperties[reschedule.PropRetryAttempt]; retry {
			r.rescheduled++
		}
		r.mu.Unlock()
	}
	return seq, err
}

// counts returns the copies scheduled with RetryAttempt, the copies sent to
// the poison queue, and the messages sent or scheduled to queue.
func (r *recorder) counts(queue string) (rescheduled, parked, sent int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rescheduled, r.parkedSends, r.sent[queue]
}

// Receive forwards to the broker and keeps dead-lettered messages for Complete.
func (r *recorder) Receive(ctx context.Context, src broker.Source, max int, wait time.Duration) ([]broker.Received, error) {
	got, err := r.Broker.Receive(ctx, src, max, wait)
	if err != nil || !src.DeadLetter || len(got) == 0 {
		return got, err
	}
	seqs := make(map[int64]bool, len(got))
	for _, m := range got {
		seqs[m.SequenceNumber] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.DeleteFunc(r.dlqLocked, func(k lockKey, m broker.Received) bool {
		return k.queue == src.Queue && seqs[m.SequenceNumber] // its lock expired: it was handed out again
	})
	for _, m := range got {
		r.dlqLocked[lockKey{src.Queue, m.LockToken}] = m
	}
	return got, nil
}

// Complete forwards to the broker and records a message taken out of a
// dead-letter subqueue.
func (r *recorder) Complete(ctx context.Context, src broker.Source, m broker.Received) error {
	err := r.Broker.Complete(ctx, src, m)
	if !src.DeadLetter {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := lockKey{src.Queue, m.LockToken}
	if got, ok := r.dlqLocked[k]; ok {
		m = got
	}
	if err == nil || errors.Is(err, broker.ErrLockLost) {
		delete(r.dlqLocked, k)
	}
	if err == nil {
		r.dlqRemoved = append(r.dlqRemoved, Entry{MessageID: m.MessageID, Reason: m.DeadLetterReason, Queue: src.Queue, SessionID: m.SessionID, DeliveryCount: m.DeliveryCount})
	}
	return err
}

// Abandon forwards to the broker; a dead-lettered message's lock token is spent.
func (r *recorder) Abandon(ctx context.Context, src broker.Source, m broker.Received) error {
	err := r.Broker.Abandon(ctx, src, m)
	if src.DeadLetter && (err == nil || errors.Is(err, broker.ErrLockLost)) {
		r.mu.Lock()
		delete(r.dlqLocked, lockKey{src.Queue, m.LockToken})
		r.mu.Unlock()
	}
	return err
}

func (r *recorder) snapshot() (parked, dlqRemoved []Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry{}, r.parked...), append([]Entry{}, r.dlqRemoved...)
}

func stringProp(props map[string]any, key, def string) string {
	if s, ok := props[key].(string); ok && s != "" {
		return s
	}
	return def
}

// Completion is one message the host completed after a 2xx answer.
type Completion struct {
	Queue, SessionID, MessageID, Subject string
	Body                                 []byte
	DeliveryCount                        int32
	Result                               string
	// Enqueued is when the first message sent was enqueued (reschedule.FirstEnqueued).
	Enqueued time.Time
}

// stats counts what the dispatchers did; safe for concurrent use.
type stats struct {
	inFlight atomic.Int64 // calls running (Service Bus and timer)
	// callEnded gets a token each time the last call in flight ends (WaitIdle).
	callEnded chan struct{}

	mu          sync.Mutex
	sentCount   int
	sentIDs     map[string]bool
	sessions    map[string]bool // session ids sent or completed ("" included)
	results     map[string]int
	completions []Completion
}

func newStats() *stats {
	return &stats{sentIDs: map[string]bool{}, sessions: map[string]bool{}, results: map[string]int{},
		callEnded: make(chan struct{}, 1)}
}

func (s *stats) callStarted() { s.inFlight.Add(1) }

// callDone ends a call and wakes WaitIdle if it was the last in flight.
func (s *stats) callDone() {
	if s.inFlight.Add(-1) != 0 {
		return
	}
	select {
	case s.callEnded <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (s *stats) sent(l ScenarioLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sentCount++
	s.sentIDs[l.MessageID] = true
	s.sessions[l.SessionID] = true
}

func (s *stats) result(r string) {
	s.mu.Lock()
	s.results[r]++
	s.mu.Unlock()
}

func (s *stats) completed(queue string, m broker.Received, result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[result]++
	s.completions = append(s.completions, Completion{
		Queue: queue, SessionID: m.SessionID, MessageID: m.MessageID, Subject: m.Subject,
		Body: bytes.Clone(m.Body), DeliveryCount: m.DeliveryCount, Result: result,
		Enqueued: reschedule.FirstEnqueued(reschedule.Original{EnqueuedTime: m.EnqueuedTime, ApplicationProperties: m.ApplicationProperties}),
	})
	s.sessions[m.SessionID] = true
}

func (s *stats) snapshot() (sent int, results map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sentCount, maps.Clone(s.results)
}
