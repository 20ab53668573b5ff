// Package deadletter owns what happens to messages automatic processing could not
// finish: the policy (replay, archive, or leave for a human), the sweeper draining the
// dead-letter sources into dlstore, the retention purge, the stats and the operators'
// actions. Nothing is deferred (SessionLockLost, Azure/azure-sdk-for-net #34662); each
// action is a conditional write with its audit entry, so a crash never loses its record.
package deadletter

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
)

// Queues names the two queues the sources live on.
type Queues struct {
	Queue, PoisonQueue string
}

// Source returns the broker source of k.
func (q Queues) Source(k dlstore.Source) broker.Source {
	switch k {
	case dlstore.DLQ:
		return broker.Source{Queue: q.Queue, DeadLetter: true}
	case dlstore.Poison:
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

// Action is what the policy or an operator does with an entry.
type Action string

// Actions, as audit entries, reports and metrics name them. Stored is a message
// drained into the store; Wait an entry in its cool-down (nothing written).
const (
	ActionStored    Action = dlstore.ActionStored
	ActionWait      Action = "wait"
	ActionReplay    Action = "replayed"
	ActionArchive   Action = "archived"
	ActionDiscard   Action = "discarded"
	ActionLeave     Action = "left"
	ActionResubmit  Action = "resubmitted"
	ActionRestore   Action = "restored"
	ActionPurge     Action = "purged"
	ActionNone      Action = "none"
	ActionFailed    Action = "failed"
	ActionUntouched Action = "untouched"
)

// ReasonRetryWindowExceeded is the parking reason the policy replays (good data).
const ReasonRetryWindowExceeded = order.ReasonRetryWindowExceeded

// Policy holds the decision's knobs (DEAD_LETTER_REPLAY_COOLDOWN, DEAD_LETTER_MAX_REPLAYS).
type Policy struct {
	// Cooldown is how long after StoredAt an entry may be replayed.
	Cooldown time.Duration
	// MaxReplays: an entry replayed that many times is left for a human.
	MaxReplays int
}

// Decision is the policy's verdict on one entry, with the reason in words.
type Decision struct {
	Action Action
	Why    string
}

func replayable(k dlstore.Source, reason string) bool {
	switch k {
	case dlstore.DLQ:
		return reason == broker.ReasonMaxDeliveryCountExceeded || reason == broker.ReasonTTLExpired
	case dlstore.Poison:
		return reason == ReasonRetryWindowExceeded
	}
	return false
}

// Decide applies the policy to entry e at now (the broker's clock); it is pure.
// A closed or left entry gets ActionNone; otherwise:
//
//	dlq, MaxDeliveryCountExceeded or TTLExpiredException,
//	poison, RetryWindowExceeded:
//	    replayed MaxReplays times already  -> left
//	    within the cool-down from StoredAt  -> wait
//	    otherwise                          -> replayed
//	poison, InvalidPayload or UnknownSubject -> archived
//	anything else (InvalidTransition, poison-dlq, no reason) -> left
func (p Policy) Decide(e dlstore.Entry, now time.Time) Decision {
	if e.State.Closed() || e.State == dlstore.Left {
		return Decision{ActionNone, "already " + string(e.State)}
	}
	reason := e.Reason
	if replayable(e.Source, reason) {
		if e.ReplayCount >= p.MaxReplays {
			return Decision{ActionLeave, fmt.Sprintf("replayed %d times already (DEAD_LETTER_MAX_REPLAYS=%d): a human decides", e.ReplayCount, p.MaxReplays)}
		}
		if left := e.StoredAt.Add(p.Cooldown).Sub(now); left > 0 {
			return Decision{ActionWait, fmt.Sprintf("in its %s cool-down (stored %s): replay in %s", p.Cooldown,
				e.StoredAt.UTC().Format(time.RFC3339), left.Round(time.Second))}
		}
		return Decision{ActionReplay, fmt.Sprintf("%s and past its %s cool-down: replay %d of %d", reason, p.Cooldown, e.ReplayCount+1, p.MaxReplays)}
	}
	switch {
	case e.Source == dlstore.PoisonDLQ:
		return Decision{ActionLeave, "from the poison queue's dead-letter queue: a parked message expired or failed 10 deliveries; a human decides"}
	case e.Source == dlstore.Poison && (reason == order.ReasonInvalidPayload || reason == order.ReasonUnknownSubject):
		return Decision{ActionArchive, reason + ": bad data never gets better; archive it"}
	case reason == "":
		return Decision{ActionLeave, "no dead-letter reason: a human decides"}
	}
	return Decision{ActionLeave, reason + ": needs a human"}
}

// ReplayCount is the ReplayCount application property (0 if absent).
func ReplayCount(props map[string]any) int {
	switch v := props[PropReplayCount].(type) {
	case int64:
		return int(v)
	case int32:
		return int(v)
	case int:
		return v
	case float64:
		return int(v)
	case string:
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}

// OriginalID is the id a replay's MessageId is built from: the OriginalMessageId
// of a parked copy or retry, else the MessageId without its `:replay:<n>`.
func OriginalID(e dlstore.Entry) string {
	if s, ok := e.Properties[parking.PropOriginalMessageID].(string); ok && s != "" {
		return s
	}
	id := e.MessageID
	if n := ReplayCount(e.Properties); n > 0 {
		id = strings.TrimSuffix(id, ":replay:"+strconv.Itoa(n))
	}
	return id
}

// ReplayID is the MessageId of replay n of original: `<original>:replay:<n>`
// within 128 characters (contract.DeriveMessageID), so duplicate detection drops a resend.
func ReplayID(original string, n int) string {
	return contract.DeriveMessageID(original, ":replay:"+strconv.Itoa(n))
}

// strippedProperties are what a replay drops: dead-letter, parking (but OriginalEnqueuedTime), retry.
var strippedProperties = []string{
	broker.PropertyDeadLetterReason, broker.PropertyDeadLetterErrorDescription,
	parking.PropOriginalMessageID, parking.PropOriginalSessionID, parking.PropOriginalSequenceNumber,
	parking.PropOriginalSubject, parking.PropDeliveryCount,
	// reschedule.Properties by name; TestReplayStripsEveryRetryProperty checks them.
	"RetryAttempt", "FirstFailureTime", "LastError", "RetryScheduledAt", "RetryEpisodeAttempt",
}

// ReplayMessage builds replay e.ReplayCount+1 of e (a parked copy's original session
// and subject), MessageId ReplayID; a non-nil body replaces e's.
func ReplayMessage(e dlstore.Entry, body []byte) broker.Message {
	n := e.ReplayCount + 1
	props := maps.Clone(e.Properties)
	for _, k := range strippedProperties {
		delete(props, k)
	}
	if props == nil {
		props = map[string]any{}
	}
	props[PropReplayedFrom] = e.Reason
	props[PropReplayCount] = int64(n)
	if _, ok := props[parking.PropOriginalEnqueuedTime]; !ok && !e.EnqueuedTime.IsZero() {
		// order.Decide judges a change without occurredAt by it.
		props[parking.PropOriginalEnqueuedTime] = e.EnqueuedTime.UTC()
	}
	tracectx.Hop(props) // the same trace, a span of the replay's own, linked
	out := broker.Message{
		MessageID:             ReplayID(OriginalID(e), n),
		SessionID:             e.SessionID,
		Subject:               e.Subject,
		ContentType:           e.ContentType,
		CorrelationID:         e.CorrelationID,
		Body:                  append([]byte(nil), e.Body...),
		ApplicationProperties: props,
	}
	if s, ok := e.Properties[parking.PropOriginalSessionID].(string); ok && s != "" {
		out.SessionID = s
	}
	if s, ok := e.Properties[parking.PropOriginalSubject].(string); ok && s != "" {
		out.Subject = s
	}
	if body != nil {
		out.Body = append([]byte(nil), body...)
	}
	return out
}

// Validate checks msg against the message contract (package order) as the
// handler will: nil, or a *order.PoisonError saying why it would be parked.
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

// EntryOf is the Open store entry of message m received from source k at now.
func EntryOf(k dlstore.Source, m broker.Received, now time.Time) dlstore.Entry {
	return dlstore.Entry{
		ID:             dlstore.EntryID(k, m.SequenceNumber, m.MessageID),
		Source:         k,
		SequenceNumber: m.SequenceNumber,
		MessageID:      m.MessageID,
		OrderID:        sessionOf(m),
		SessionID:      m.SessionID,
		Subject:        m.Subject,
		ContentType:    m.ContentType,
		CorrelationID:  m.CorrelationID,
		Body:           m.Body,
		Properties:     normalProperties(m.ApplicationProperties),
		Reason:         m.DeadLetterReason,
		Description:    m.DeadLetterErrorDescription,
		DeliveryCount:  m.DeliveryCount,
		EnqueuedTime:   m.EnqueuedTime,
		StoredAt:       now,
		Group:          Fingerprint(m.DeadLetterReason, m.DeadLetterErrorDescription),
		ReplayCount:    ReplayCount(m.ApplicationProperties),
		State:          dlstore.Open,
	}
}

// normalProperties converts props to the store's types: numbers widened, else text.
func normalProperties(props map[string]any) map[string]any {
	if props == nil {
		return nil
	}
	out := make(map[string]any, len(props))
	for k, v := range props {
		switch x := v.(type) {
		case string, bool, int64, float64, time.Time:
			out[k] = x
		case int:
			out[k] = int64(x)
		case int8:
			out[k] = int64(x)
		case int16:
			out[k] = int64(x)
		case int32:
			out[k] = int64(x)
		case uint8:
			out[k] = int64(x)
		case uint16:
			out[k] = int64(x)
		case uint32:
			out[k] = int64(x)
		case float32:
			out[k] = float64(x)
		default:
			out[k] = fmt.Sprint(x)
		}
	}
	return out
}

// sessionOf is m's order: a parked copy's original session, else its own.
func sessionOf(m broker.Received) string {
	if s, ok := m.ApplicationProperties[parking.PropOriginalSessionID].(string); ok && s != "" {
		return s
	}
	return m.SessionID
}
