package devhost

import (
	"bytes"
	"context"
	"maps"
	"sync"
	"sync/atomic"

	"orderstatus/handler/internal/broker"
	"orderstatus/handler/internal/broker/membroker"
)

// Application properties of a parked message (set by the handler).
const (
	propOriginalMessageID = "OriginalMessageId"
)

// recorder is the broker the handler talks to (through the loopback
// server): the membroker, plus a record of what the handler parked and
// what it took out of the dead-letter subqueues, so the summary stays
// complete after a sweeper archived or replayed some of it.
type recorder struct {
	broker.Broker
	poisonQueue string

	mu         sync.Mutex
	parked     []Entry         // in order, one per distinct parked MessageId
	parkedIDs  map[string]bool // parked MessageIds seen
	dlqRemoved []Entry
}

var _ broker.Broker = (*recorder)(nil)

func newRecorder(b *membroker.Broker, poisonQueue string) *recorder {
	return &recorder{Broker: b, poisonQueue: poisonQueue, parkedIDs: map[string]bool{}}
}

// Send forwards to the broker and records a message sent to the poison
// queue.
func (r *recorder) Send(ctx context.Context, queue string, msg broker.Message) error {
	err := r.Broker.Send(ctx, queue, msg)
	if err == nil && queue == r.poisonQueue {
		r.mu.Lock()
		if !r.parkedIDs[msg.MessageID] {
			r.parkedIDs[msg.MessageID] = true
			r.parked = append(r.parked, Entry{
				MessageID: stringProp(msg.ApplicationProperties, propOriginalMessageID, msg.MessageID),
				Reason:    stringProp(msg.ApplicationProperties, broker.PropertyDeadLetterReason, ""),
				ParkedID:  msg.MessageID,
			})
		}
		r.mu.Unlock()
	}
	return err
}

// Complete forwards to the broker and records a message taken out of a
// dead-letter subqueue.
func (r *recorder) Complete(ctx context.Context, src broker.Source, m broker.Received) error {
	err := r.Broker.Complete(ctx, src, m)
	if err == nil && src.DeadLetter {
		r.mu.Lock()
		r.dlqRemoved = append(r.dlqRemoved, Entry{MessageID: m.MessageID, Reason: m.DeadLetterReason, Queue: src.Queue, SessionID: m.SessionID, DeliveryCount: m.DeliveryCount})
		r.mu.Unlock()
	}
	return err
}

func (r *recorder) snapshot() (parked, dlqRemoved []Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry(nil), r.parked...), append([]Entry(nil), r.dlqRemoved...)
}

func stringProp(props map[string]any, key, def string) string {
	if s, ok := props[key].(string); ok && s != "" {
		return s
	}
	return def
}

// Completion is one message the host completed after a 2xx answer: where
// it came from, what it held, its delivery count at that delivery, and the
// handler's ReturnValue.result.
type Completion struct {
	Queue, SessionID, MessageID, Subject string
	Body                                 []byte
	DeliveryCount                        int32
	Result                               string
}

// stats counts what the dispatchers did. Its methods are safe for
// concurrent use.
type stats struct {
	inFlight atomic.Int64 // calls running (Service Bus and timer)

	mu          sync.Mutex
	sentCount   int
	sentIDs     map[string]bool
	sessions    []string // session ids sent, in first-sent order
	sessionSeen map[string]bool
	results     map[string]int
	completions []Completion
}

func newStats() *stats {
	return &stats{sentIDs: map[string]bool{}, sessionSeen: map[string]bool{}, results: map[string]int{}}
}

func (s *stats) sent(l ScenarioLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sentCount++
	s.sentIDs[l.MessageID] = true
	if l.SessionID != "" && !s.sessionSeen[l.SessionID] {
		s.sessionSeen[l.SessionID] = true
		s.sessions = append(s.sessions, l.SessionID)
	}
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
	})
	if m.SessionID != "" && !s.sessionSeen[m.SessionID] {
		s.sessionSeen[m.SessionID] = true
		s.sessions = append(s.sessions, m.SessionID)
	}
}

// snapshot copies the counters.
func (s *stats) snapshot() (sent int, results map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sentCount, maps.Clone(s.results)
}
