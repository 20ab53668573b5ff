// Package tracectx is W3C trace context as it travels on a Service Bus
// message: the traceparent value (read in any version, written as version
// 00), carried in the application properties the Azure SDKs use. It owns parsing, formatting and minting;
// the publisher stamps messages with it and the handler logs its trace id.
//
// The Azure SDKs' messaging diagnostics (azure-sdk-for-net,
// sdk/core/Azure.Core/src/Shared/MessagingClientDiagnostics.cs) write the
// producer's span as both "Diagnostic-Id" and "traceparent" (plus
// "tracestate") when they send, and read "traceparent" first, then
// "Diagnostic-Id", when they receive; FromProperties reads them in the
// same order, and Properties writes both.
package tracectx

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// Application property names.
const (
	PropTraceParent  = "traceparent"
	PropDiagnosticID = "Diagnostic-Id"
)

// TraceParent is one W3C traceparent: a trace, the span that is the parent
// of what follows, and the trace flags.
type TraceParent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// ErrInvalid: the text is not a traceparent this package can read.
var ErrInvalid = errors.New("tracectx: not a W3C traceparent (<version>-<32 hex>-<16 hex>-<2 hex>)")

// Parse reads a traceparent as the W3C Trace Context recommendation
// (w3c/trace-context, spec/20-http_request_header_format.md) defines it:
// "<version>-<trace id>-<span id>-<flags>", lower-case hex, neither id all
// zeros. Version 00 is exactly that, 55 characters ("traceparent Header
// Field Values"). A higher version is read by its first four fields when
// the flags end the value or a '-' follows them; what comes after is not
// read ("Versioning of traceparent"). Version ff is invalid. String writes
// the result as version 00, the highest version this package knows, as
// the recommendation asks of a vendor that passes the trace on.
func Parse(s string) (TraceParent, error) {
	var t TraceParent
	if len(s) < 55 || !lowerHex(s[0:2]) || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return t, ErrInvalid
	}
	switch version := s[0:2]; {
	case version == "ff":
		return t, ErrInvalid
	case version == "00" && len(s) != 55:
		return t, ErrInvalid
	case len(s) > 55 && s[55] != '-':
		return t, ErrInvalid
	}
	if !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) {
		return t, ErrInvalid
	}
	var flags [1]byte
	_, _ = hex.Decode(t.TraceID[:], []byte(s[3:35])) // checked: lower-case hex
	_, _ = hex.Decode(t.SpanID[:], []byte(s[36:52]))
	_, _ = hex.Decode(flags[:], []byte(s[53:55]))
	t.Flags = flags[0]
	if t.TraceID == ([16]byte{}) || t.SpanID == ([8]byte{}) {
		return TraceParent{}, ErrInvalid
	}
	return t, nil
}

// lowerHex reports whether s is lower-case hex digits only (the
// recommendation's HEXDIGLC).
func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// New mints a sampled traceparent with a random trace and span.
func New() TraceParent {
	var t TraceParent
	for t.TraceID == ([16]byte{}) || t.SpanID == ([8]byte{}) {
		_, _ = rand.Read(t.TraceID[:])
		_, _ = rand.Read(t.SpanID[:])
	}
	t.Flags = 1
	return t
}

// String formats t as a version 00 traceparent.
func (t TraceParent) String() string {
	return fmt.Sprintf("00-%s-%s-%02x", hex.EncodeToString(t.TraceID[:]), hex.EncodeToString(t.SpanID[:]), t.Flags)
}

// TraceIDString is the trace id in hex: what Application Insights calls
// operation_Id.
func (t TraceParent) TraceIDString() string { return hex.EncodeToString(t.TraceID[:]) }

// IsZero reports whether t is the zero value (no trace).
func (t TraceParent) IsZero() bool { return t.TraceID == [16]byte{} }

// FromProperties reads the trace context of a message's application
// properties: traceparent, else Diagnostic-Id, as the Azure SDKs do. ok is
// false when neither holds a valid traceparent.
func FromProperties(props map[string]any) (t TraceParent, ok bool) {
	for _, k := range []string{PropTraceParent, PropDiagnosticID} {
		if s, isString := props[k].(string); isString {
			if t, err := Parse(s); err == nil {
				return t, true
			}
		}
	}
	return TraceParent{}, false
}

// Stamp sets both properties to t on props (creating the map when nil),
// unless props already carries a valid trace context, which it keeps; it
// returns the map and the trace context the message carries.
func Stamp(props map[string]any, t TraceParent) (map[string]any, TraceParent) {
	if have, ok := FromProperties(props); ok {
		return props, have
	}
	if props == nil {
		props = map[string]any{}
	}
	props[PropTraceParent] = t.String()
	props[PropDiagnosticID] = t.String()
	return props, t
}

// PropLinkedFrom names the traceparent a copy was made from: a parked
// copy's original, a replay's dead-lettered or parked message.
const PropLinkedFrom = "TraceLinkedFrom"

// Hop marks props, the application properties of a copy of a message
// (parked, replayed, rescheduled), as the next hop of the same trace: the
// trace id stays, so one query by trace id finds every hop; the copy gets
// a span of its own as its traceparent and Diagnostic-Id, and
// PropLinkedFrom holds the traceparent it came from. Properties without a
// trace context are left as they are. props is changed in place.
func Hop(props map[string]any) {
	from, ok := FromProperties(props)
	if !ok {
		return
	}
	next := from
	for next.SpanID == from.SpanID || next.SpanID == ([8]byte{}) {
		_, _ = rand.Read(next.SpanID[:])
	}
	props[PropLinkedFrom] = from.String()
	props[PropTraceParent] = next.String()
	props[PropDiagnosticID] = next.String()
}
