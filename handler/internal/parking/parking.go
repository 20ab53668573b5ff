// Package parking copies poison messages to the poison queue with the reason and the
// original's identity, so that a custom handler, which cannot dead-letter, can answer 200.
package parking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/clip"
)

// Application property names on a parked message.
const (
	PropReason                 = "DeadLetterReason"
	PropDescription            = "DeadLetterErrorDescription"
	PropOriginalMessageID      = "OriginalMessageId"
	PropOriginalSessionID      = "OriginalSessionId"
	PropOriginalSequenceNumber = "OriginalSequenceNumber"
	PropOriginalSubject        = "OriginalSubject"
	PropOriginalEnqueuedTime   = "OriginalEnqueuedTime"
	PropDeliveryCount          = "DeliveryCount"
)

// MaxMessageIDLength is Service Bus's limit on MessageId.
const MaxMessageIDLength = contract.MaxServiceBusIDLength

// ParkedID is the copy's MessageId, stable so that duplicate detection drops a re-park:
// `<MessageId>:parked`, else `seq-<SequenceNumber>:parked` (contract.DeriveMessageID).
func ParkedID(o Original) string {
	id := o.MessageID
	if id == "" {
		id = fmt.Sprintf("seq-%d", o.SequenceNumber)
	}
	return contract.DeriveMessageID(id, ":parked")
}

// MaxDescription bounds DeadLetterErrorDescription (characters).
const MaxDescription = 1024

// Sender is the part of the broker port parking needs.
type Sender interface {
	Send(ctx context.Context, queue string, msg broker.Message) error
}

var _ Sender = broker.Broker(nil)

// ErrNotConfigured is returned by Park when no Service Bus is configured.
var ErrNotConfigured = errors.New("parking: no Service Bus configured, cannot park")

// Original is what parking keeps of the message it parks.
type Original struct {
	MessageID             string
	SessionID             string
	SequenceNumber        int64
	Subject               string
	ContentType           string
	CorrelationID         string
	EnqueuedTime          time.Time
	DeliveryCount         int32
	Body                  []byte
	ApplicationProperties map[string]any
}

// Parker sends parked copies to one queue (nil sender: ErrNotConfigured).
type Parker struct {
	sender Sender
	queue  string
}

// New returns a Parker that sends to queue through s (nil: not configured).
func New(s Sender, queue string) *Parker { return &Parker{sender: s, queue: queue} }

// Message builds the parked copy: o without SessionId, the parking properties
// set (keeping an OriginalMessageId), and the next trace hop (tracectx.Hop).
func Message(o Original, reason, description string) broker.Message {
	props := Properties(o.ApplicationProperties)
	if props == nil {
		props = make(map[string]any, 8)
	}
	props[PropReason] = reason
	props[PropDescription] = clip.String(description, MaxDescription)
	if id, ok := props[PropOriginalMessageID].(string); !ok || id == "" {
		props[PropOriginalMessageID] = o.MessageID
	}
	props[PropOriginalSessionID] = o.SessionID
	props[PropOriginalSequenceNumber] = o.SequenceNumber
	props[PropOriginalSubject] = o.Subject
	if _, ok := props[PropOriginalEnqueuedTime]; !ok {
		props[PropOriginalEnqueuedTime] = o.EnqueuedTime.UTC() // a rescheduled copy's keeps its original's
	}
	props[PropDeliveryCount] = int64(o.DeliveryCount)
	tracectx.Hop(props)
	return broker.Message{
		MessageID:             ParkedID(o),
		Subject:               o.Subject,
		ContentType:           o.ContentType,
		CorrelationID:         o.CorrelationID,
		Body:                  append([]byte(nil), o.Body...),
		ApplicationProperties: props,
	}
}

// Park sends the parked copy of o: nil only if the broker accepted it, else wrapping its sentinels.
func (p *Parker) Park(ctx context.Context, o Original, reason, description string) error {
	if p == nil || p.sender == nil {
		return ErrNotConfigured
	}
	if err := p.sender.Send(ctx, p.queue, Message(o, reason, description)); err != nil {
		return fmt.Errorf("parking: send %s to %s: %w", o.MessageID, p.queue, err)
	}
	return nil
}

// Properties returns p converted by propertyValue (nil when p is empty).
func Properties(p map[string]any) map[string]any {
	if len(p) == 0 {
		return nil
	}
	out := make(map[string]any, len(p)+8)
	for k, v := range p {
		out[k] = propertyValue(v)
	}
	return out
}

// propertyValue converts a value of the host's JSON to a type every broker carries.
func propertyValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case string, bool, int64, time.Time, nil:
		return x
	case int:
		return int64(x)
	case int32:
		return int64(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}
