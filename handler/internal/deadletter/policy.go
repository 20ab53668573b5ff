// Package deadletter owns what happens to messages that automatic
// processing could not finish: the policy (replay, archive, or leave for a
// human, by source and reason), the sweeper that applies it within bounds,
// the audit and archive tables, the deadletter_stats line and metrics, and
// the by-hand replay and discard the operator CLI offers. The
// DeadLetterSweeper timer function and `handler deadletters` both call it,
// so the timer and the runbooks act alike.
//
// The sources:
//
//	dlq         order-status/$DeadLetterQueue (MaxDeliveryCountExceeded, TTLExpiredException)
//	poison      order-status-poison, where the handler parks poison copies
//	poison-dlq  order-status-poison/$DeadLetterQueue (a parked message expired or failed 10 deliveries)
//
// A message left for a human is set aside with Service Bus deferral, so no
// later sweep raises its delivery count (abandon would, and the poison
// queue dead-letters at 10); Peek still shows it, and replay and discard
// receive it by sequence number.
package deadletter

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/msgid"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/tracectx"
)

// Kind names a source in flags, log lines, metric labels and table keys.
type Kind string

// The sources, in the order a sweep visits them.
const (
	DLQ       Kind = "dlq"
	Poison    Kind = "poison"
	PoisonDLQ Kind = "poison-dlq"
)

// Kinds lists every source.
var Kinds = []Kind{DLQ, Poison, PoisonDLQ}

// ParseKind reads a --source value.
func ParseKind(s string) (Kind, bool) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, true
		}
	}
	return "", false
}

// Queues names the two queues the sources live on.
type Queues struct {
	Queue, PoisonQueue string
}

// Source returns the broker source of k.
func (q Queues) Source(k Kind) broker.Source {
	switch k {
	case DLQ:
		return broker.Source{Queue: q.Queue, DeadLetter: true}
	case Poison:
		return broker.Source{Queue: q.PoisonQueue}
	default:
		return broker.Source{Queue: q.PoisonQueue, DeadLetter: true}
	}
}

// Application properties a replay carries.
const (
	PropReplayedFrom = "ReplayedFromDeadLetter"
	PropReplayCount  = "ReplayCount"
)

// Action is what the policy does with a message.
type Action string

// Actions, as they appear in audit rows, summaries and the
// orderstatus_deadletter_actions_total metric. Seen is recorded once per
// message (the start of its cool-down); Wait is a message in its
// cool-down, set aside until it ends; Left is a message set aside for a
// human.
const (
	ActionSeen      Action = "seen"
	ActionWait      Action = "wait"
	ActionReplay    Action = "replayed"
	ActionArchive   Action = "archived"
	ActionDiscard   Action = "discarded"
	ActionLeave     Action = "left"
	ActionResubmit  Action = "resubmitted"
	ActionUntouched Action = "untouched"
)

// Policy holds the knobs of the decision (app settings
// DEAD_LETTER_REPLAY_COOLDOWN and DEAD_LETTER_MAX_REPLAYS).
type Policy struct {
	// Cooldown is how long after the sweeper first saw a dead-lettered
	// message it may replay it (Service Bus records no dead-lettering
	// time, so the first sweep that sees it starts the clock).
	Cooldown time.Duration
	// MaxReplays: a message replayed that many times already is left for a
	// human.
	MaxReplays int
}

// Decision is the policy's verdict on one message, with the reason in
// words for `sweep --dry-run` and the logs.
type Decision struct {
	Action Action
	Why    string
}

// Decide applies the policy to m, found on source k. seen is when the
// sweeper first saw m (zero if never); now is on the same clock. It is a
// pure function: the sweeper, the dry run and the tests call it alike.
//
//	dlq, MaxDeliveryCountExceeded or TTLExpiredException:
//	    replayed MaxReplays times already  -> left
//	    never seen or within the cool-down -> wait (seen recorded)
//	    otherwise                          -> replayed
//	poison, InvalidPayload or UnknownSubject -> archived (then completed)
//	dlq or poison, any other reason          -> left
//	poison-dlq, any reason                   -> untouched (counted, reported)
func (p Policy) Decide(k Kind, m broker.Received, seen, now time.Time) Decision {
	reason := m.DeadLetterReason
	switch k {
	case PoisonDLQ:
		return Decision{ActionUntouched, "on the poison queue's dead-letter queue: a parked message expired or failed 10 deliveries; a human decides"}
	case DLQ:
		if reason == broker.ReasonMaxDeliveryCountExceeded || reason == broker.ReasonTTLExpired {
			if n := ReplayCount(m); n >= p.MaxReplays {
				return Decision{ActionLeave, fmt.Sprintf("replayed %d times already (DEAD_LETTER_MAX_REPLAYS=%d): a human decides", n, p.MaxReplays)}
			}
			if seen.IsZero() {
				return Decision{ActionWait, fmt.Sprintf("first seen now: replay after the %s cool-down", p.Cooldown)}
			}
			if left := seen.Add(p.Cooldown).Sub(now); left > 0 {
				return Decision{ActionWait, fmt.Sprintf("in its cool-down (first seen %s): replay in %s", seen.UTC().Format(time.RFC3339), left.Round(time.Second))}
			}
			return Decision{ActionReplay, fmt.Sprintf("%s and past its %s cool-down: replay %d of %d", reason, p.Cooldown, ReplayCount(m)+1, p.MaxReplays)}
		}
	case Poison:
		if reason == order.ReasonInvalidPayload || reason == order.ReasonUnknownSubject {
			return Decision{ActionArchive, reason + ": bad data never gets better; archive, then remove"}
		}
	}
	if reason == "" {
		return Decision{ActionLeave, "no dead-letter reason: a human decides"}
	}
	return Decision{ActionLeave, reason + ": needs a human (set aside by deferral)"}
}

// ReplayCount is the ReplayCount property of m (0 if absent).
func ReplayCount(m broker.Received) int {
	switch v := m.ApplicationProperties[PropReplayCount].(type) {
	case int64:
		return int(v)
	case float64:
		return int(v)
	case string:
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}

// OriginalID is the id a replay's MessageId is built from: the message's
// own id without a `:replay:<n>` suffix it got from an earlier replay,
// and for a parked copy the OriginalMessageId it carries.
func OriginalID(m broker.Received) string {
	if s, ok := m.ApplicationProperties[parking.PropOriginalMessageID].(string); ok && s != "" {
		return s
	}
	id := m.MessageID
	if n := ReplayCount(m); n > 0 {
		id = strings.TrimSuffix(id, ":replay:"+strconv.Itoa(n))
	}
	return id
}

// ReplayID is the MessageId of replay n of the message whose original id
// is original: `<original>:replay:<n>`, or `sha256-<hex>:replay:<n>` when
// that would pass 128 characters. It is the same for the same n, so a
// replay sent twice (a lost lock between send and complete) is dropped by
// duplicate detection.
func ReplayID(original string, n int) string {
	return msgid.Derive(original, ":replay:"+strconv.Itoa(n))
}

// strippedProperties are the application properties a replay drops: the
// dead-letter reason and description (Service Bus sets them on
// dead-lettering; a copy that kept them would read as dead-lettered) and
// what parking added.
var strippedProperties = []string{
	broker.PropertyDeadLetterReason, broker.PropertyDeadLetterErrorDescription,
	parking.PropOriginalMessageID, parking.PropOriginalSessionID, parking.PropOriginalSequenceNumber,
	parking.PropOriginalSubject, parking.PropOriginalEnqueuedTime, parking.PropDeliveryCount,
}

// ReplayMessage builds replay number ReplayCount(m)+1 of m: same session,
// body, subject, content type, correlation id and application properties
// (without the dead-letter and parking properties), a new MessageId
// (ReplayID), and ReplayedFromDeadLetter (the reason) and ReplayCount set.
// A parked copy goes back to its original session and subject. body, when
// not nil, replaces the body (an operator's correction).
func ReplayMessage(m broker.Received, body []byte) broker.Message {
	n := ReplayCount(m) + 1
	props := maps.Clone(m.ApplicationProperties)
	for _, k := range strippedProperties {
		delete(props, k)
	}
	if props == nil {
		props = map[string]any{}
	}
	props[PropReplayedFrom] = m.DeadLetterReason
	props[PropReplayCount] = int64(n)
	tracectx.Hop(props) // the same trace, a span of the replay's own, linked
	out := broker.Message{
		MessageID:             ReplayID(OriginalID(m), n),
		SessionID:             m.SessionID,
		Subject:               m.Subject,
		ContentType:           m.ContentType,
		CorrelationID:         m.CorrelationID,
		Body:                  append([]byte(nil), m.Body...),
		ApplicationProperties: props,
	}
	if s, ok := m.ApplicationProperties[parking.PropOriginalSessionID].(string); ok && s != "" {
		out.SessionID = s
	}
	if s, ok := m.ApplicationProperties[parking.PropOriginalSubject].(string); ok && s != "" {
		out.Subject = s
	}
	if body != nil {
		out.Body = append([]byte(nil), body...)
	}
	return out
}

// Validate checks a body about to be sent to the order-status queue
// against the message contract (package order), as the handler will: nil,
// or a *order.PoisonError saying why it would be parked again.
func Validate(msg broker.Message) error {
	switch msg.Subject {
	case order.SubjectStatusChanged:
		_, err := order.ParseUpdate(msg.Body, msg.SessionID)
		return err
	case order.SubjectPaymentTimeout:
		_, err := order.ParseTimeoutCheck(msg.Body, msg.SessionID)
		return err
	}
	return &order.PoisonError{Reason: order.ReasonUnknownSubject, Description: fmt.Sprintf("no handler for subject %q", msg.Subject)}
}
