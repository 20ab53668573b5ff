// Package deadletter owns what happens to messages that automatic
// processing could not finish: the policy (replay, archive, or leave for a
// human, by source and reason), the sweeper that drains every dead-letter
// source into the dead-letter store (package dlstore) and applies the policy
// to its entries within a deadline and a rate, the retention purge, the
// deadletter_stats line and metrics, and the operators' actions on entries
// (find, groups, replay, discard, archive, restore, one by one or in bulk).
// The DeadLetterSweeper timer function and `orderstatus deadletters` both call
// it, so the timer and the runbooks act alike.
//
// The sources, drained in this order:
//
//	dlq         order-status/$DeadLetterQueue (MaxDeliveryCountExceeded, TTLExpiredException)
//	poison      order-status-poison, where the handler parks poison copies
//	poison-dlq  order-status-poison/$DeadLetterQueue (a parked message expired or failed 10 deliveries)
//
// Nothing is deferred: Service Bus deferral fails in the dead-letter queue
// of a session-enabled queue when another receiver reads the message back
// (SessionLockLost, Azure/azure-sdk-for-net #34662), and deferred messages
// never expire. A drain receives a message, stores it insert-if-absent,
// then completes it; a crash between the two repeats the insert (already
// there) and completes. It abandons only what it received and could not
// store, and receives nothing while the store is down (every abandon spends
// a delivery: see Sweeper). Every action after that is a
// conditional change of the entry with its audit entry in the same atomic
// write, and a replay is sent before it is recorded: a crash may repeat an
// action (duplicate detection drops a replay sent twice under the same
// MessageId; the sequence rule absorbs it after the window), never leave one
// unrecorded.
package deadletter

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/msgid"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
)

// Kind names a source in flags, log lines, metric labels and keys.
type Kind = dlstore.Source

// The sources, in the order a sweep drains them.
const (
	DLQ       = dlstore.DLQ
	Poison    = dlstore.Poison
	PoisonDLQ = dlstore.PoisonDLQ
)

// Kinds lists every source.
var Kinds = dlstore.Sources

// ParseKind reads a --source value.
func ParseKind(s string) (Kind, bool) { return dlstore.ParseSource(s) }

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

// Action is what the policy or an operator does with an entry.
type Action string

// Actions, as they appear in audit entries, reports and the
// orderstatus_deadletter_actions_total metric. Stored is a message drained
// into the store; Wait an entry in its cool-down (nothing written).
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

// ReasonRetryWindowExceeded is the parking reason the policy replays: a
// message whose transient failures outlasted the handler's retry window is
// good data that met a bad moment (package order defines it).
const ReasonRetryWindowExceeded = order.ReasonRetryWindowExceeded

// Policy holds the knobs of the decision (app settings
// DEAD_LETTER_REPLAY_COOLDOWN and DEAD_LETTER_MAX_REPLAYS).
type Policy struct {
	// Cooldown is how long after an entry reached the store it may be
	// replayed (its StoredAt: the drain stores a message within one sweep
	// period of its dead-lettering).
	Cooldown time.Duration
	// MaxReplays: an entry replayed that many times already is left for a
	// human.
	MaxReplays int
}

// Decision is the policy's verdict on one entry, with the reason in words
// for `sweep --dry-run` and the logs.
type Decision struct {
	Action Action
	Why    string
}

// replayable reports whether the policy replays entries of source k with
// reason: the broker's own dead-lettering of a message that failed or
// expired, and a parked message whose retry window ran out.
func replayable(k Kind, reason string) bool {
	switch k {
	case DLQ:
		return reason == broker.ReasonMaxDeliveryCountExceeded || reason == broker.ReasonTTLExpired
	case Poison:
		return reason == ReasonRetryWindowExceeded
	}
	return false
}

// Decide applies the policy to entry e at now (the broker's clock). It is
// a pure function: the sweeper, the dry run and the tests call it alike.
//
//	dlq, MaxDeliveryCountExceeded or TTLExpiredException,
//	poison, RetryWindowExceeded:
//	    replayed MaxReplays times already  -> left
//	    within the cool-down from StoredAt  -> wait
//	    otherwise                          -> replayed
//	poison, InvalidPayload or UnknownSubject -> archived
//	anything else (InvalidTransition, poison-dlq, no reason) -> left
//
// An entry that is closed, or left already, gets ActionNone.
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
	case e.Source == PoisonDLQ:
		return Decision{ActionLeave, "from the poison queue's dead-letter queue: a parked message expired or failed 10 deliveries; a human decides"}
	case e.Source == Poison && (reason == order.ReasonInvalidPayload || reason == order.ReasonUnknownSubject):
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

// OriginalID is the id a replay's MessageId is built from: the
// OriginalMessageId a parked copy or a rescheduled retry carries, else the
// entry's own MessageId without a `:replay:<n>` suffix it got from an
// earlier replay.
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

// ReplayID is the MessageId of replay n of the message whose original id
// is original: `<original>:replay:<n>`, kept within 128 characters by
// msgid.Derive. It is the same for the same n, so a replay sent twice (a
// crash between send and record) is dropped by duplicate detection.
func ReplayID(original string, n int) string {
	return msgid.Derive(original, ":replay:"+strconv.Itoa(n))
}

// strippedProperties are the application properties a replay drops: the
// dead-letter reason and description (a copy that kept them would read as
// dead-lettered), what parking added but OriginalEnqueuedTime (which says
// when the message first sent was enqueued), and what a rescheduled retry
// carried (a replay starts a fresh retry window).
var strippedProperties = []string{
	broker.PropertyDeadLetterReason, broker.PropertyDeadLetterErrorDescription,
	parking.PropOriginalMessageID, parking.PropOriginalSessionID, parking.PropOriginalSequenceNumber,
	parking.PropOriginalSubject, parking.PropDeliveryCount,
	// reschedule.Properties but OriginalMessageId (listed above), by name:
	// reschedule's tests import this package, so it cannot import that one.
	// TestReplayStripsEveryRetryProperty fails when one of its names is missing.
	"RetryAttempt", "FirstFailureTime", "LastError", "RetryScheduledAt", "RetryEpisodeAttempt",
}

// ReplayMessage builds replay number e.ReplayCount+1 of e: same session,
// body, subject, content type, correlation id and application properties
// (without the dead-letter, parking and retry properties), a new MessageId
// (ReplayID), and ReplayedFromDeadLetter (the reason) and ReplayCount set.
// A parked copy goes back to its original session and subject. body, when
// not nil, replaces the body (an operator's correction).
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
		// When the message first sent was enqueued travels on: a change
		// without an occurredAt is judged by it (order.Decide).
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

// Validate checks a message about to be sent to the order-status queue
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

// EntryOf is the store entry of message m received from source k at now
// (the broker's clock): every field of the message, its id, order, replay
// count and failure group.
func EntryOf(k Kind, m broker.Received, now time.Time) dlstore.Entry {
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

// normalProperties returns props with every value in the types the store
// keeps exactly (string, bool, int64, float64, time.Time): other integer
// and float widths are widened, anything else is written as text. The
// broker port promises these types already; this keeps a message from
// an adapter that does not from being refused by the store.
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

// sessionOf is the order a message belongs to: a parked copy's original
// session, else its own.
func sessionOf(m broker.Received) string {
	if s, ok := m.ApplicationProperties[parking.PropOriginalSessionID].(string); ok && s != "" {
		return s
	}
	return m.SessionID
}
