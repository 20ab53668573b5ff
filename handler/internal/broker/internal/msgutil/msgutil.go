// Package msgutil is what every broker implementation shares: deep copies of
// messages, normalised application properties, dead-letter fields, random ids.
package msgutil

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// Message returns a deep copy of m with normalised application properties.
func Message(m broker.Message) broker.Message {
	m.Body = slices.Clone(m.Body)
	m.ApplicationProperties = Properties(m.ApplicationProperties)
	return m
}

// Received returns a deep copy of r with normalised application properties.
func Received(r broker.Received) broker.Received {
	r.Message = Message(r.Message)
	return r
}

// Properties returns a normalised copy of p, nil when empty (as Service Bus has it).
func Properties(p map[string]any) map[string]any {
	if len(p) == 0 {
		return nil
	}
	out := make(map[string]any, len(p))
	for k, v := range p {
		out[k] = Value(v)
	}
	return out
}

// Value maps an application property value onto the port's types: string,
// bool, int64, float64, time.Time (UTC, milliseconds, as AMQP carries it).
// Other numbers widen losslessly; anything else becomes its string.
func Value(v any) any {
	switch x := v.(type) {
	case string, bool, int64, float64:
		return x
	case time.Time:
		return x.UTC().Truncate(time.Millisecond)
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case float32:
		return float64(x)
	case []byte:
		return string(x)
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

// DeadLetterFields fills r's dead-letter reason and description from its properties.
func DeadLetterFields(r *broker.Received) {
	if s, ok := r.ApplicationProperties[broker.PropertyDeadLetterReason].(string); ok {
		r.DeadLetterReason = s
	}
	if s, ok := r.ApplicationProperties[broker.PropertyDeadLetterErrorDescription].(string); ok {
		r.DeadLetterErrorDescription = s
	}
}

// WithDeadLetter returns a copy of p with the dead-letter reason and description set.
func WithDeadLetter(p map[string]any, reason, description string) map[string]any {
	out := maps.Clone(p)
	if out == nil {
		out = make(map[string]any, 2)
	}
	out[broker.PropertyDeadLetterReason] = reason
	out[broker.PropertyDeadLetterErrorDescription] = description
	return out
}

// NewID returns a random RFC 4122 version 4 UUID (message ids, lock tokens).
func NewID() string { return uuid.NewString() }
