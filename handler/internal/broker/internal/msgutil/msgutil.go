// Package msgutil is what every broker implementation shares: deep copies of
// messages, normalised application properties, dead-letter fields, random ids.
package msgutil

import (
	"fmt"
	"reflect"
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

// Value maps a property value onto the port's types (string, bool, int64, float64,
// time.Time in UTC milliseconds, as AMQP carries it), widening numbers, else its string.
func Value(v any) any {
	switch x := v.(type) {
	case string, bool, int64, float64:
		return x
	case time.Time:
		return x.UTC().Truncate(time.Millisecond)
	case int, int8, int16, int32, uint8, uint16, uint32:
		return reflect.ValueOf(x).Convert(reflect.TypeFor[int64]()).Int()
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

// NewID returns a random RFC 4122 version 4 UUID (message ids, lock tokens).
func NewID() string { return uuid.NewString() }
