// Package msgutil holds what every broker implementation does the same way:
// deep copies of messages, the normalisation of application property values
// to the types the broker port promises, the dead-letter fields read from
// application properties, and random identifiers.
package msgutil

import (
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"time"

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

// Properties returns a normalised copy of p, nil when p is empty (Service
// Bus does not distinguish an empty property map from none).
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

// Value maps an application property value onto the types the port
// promises: string, bool, int64, float64 and time.Time (UTC, millisecond
// precision, as an AMQP timestamp carries it). Other integers and floats
// widen losslessly; anything else becomes its fmt.Sprint string.
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

// DeadLetterFields fills r's DeadLetterReason and DeadLetterErrorDescription
// from its application properties, as the Service Bus SDKs do.
func DeadLetterFields(r *broker.Received) {
	if s, ok := r.ApplicationProperties[broker.PropertyDeadLetterReason].(string); ok {
		r.DeadLetterReason = s
	}
	if s, ok := r.ApplicationProperties[broker.PropertyDeadLetterErrorDescription].(string); ok {
		r.DeadLetterErrorDescription = s
	}
}

// WithDeadLetter returns a copy of p with the dead-letter reason and
// description set.
func WithDeadLetter(p map[string]any, reason, description string) map[string]any {
	out := maps.Clone(p)
	if out == nil {
		out = make(map[string]any, 2)
	}
	out[broker.PropertyDeadLetterReason] = reason
	out[broker.PropertyDeadLetterErrorDescription] = description
	return out
}

// NewID returns a random RFC 4122 version 4 UUID in its canonical string
// form, used for message ids and lock tokens.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])  // never fails (crypto/rand documents it)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return FormatUUID(b)
}

// FormatUUID formats 16 bytes in the canonical 8-4-4-4-12 UUID form.
func FormatUUID(b [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
