// Package tracectx is W3C trace context on a Service Bus message: parsing,
// formatting and minting traceparent values (any version read, 00 written) in the
// application properties the Azure SDKs use (azure-sdk-for-net,
// sdk/core/Azure.Core/src/Shared/MessagingClientDiagnostics.cs: "Diagnostic-Id" and
// "traceparent" sent, "traceparent" read first, as FromProperties does).
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

// TraceParent is one W3C traceparent: trace id, parent span id and flags.
type TraceParent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// ErrInvalid: the text is not a traceparent this package can read.
var ErrInvalid = errors.New("tracectx: not a W3C traceparent (<version>-<32 hex>-<16 hex>-<2 hex>)")

// Parse reads a traceparent (w3c/trace-context, spec/20-http_request_header_format.md,
// "traceparent Header Field Values"): lower-case hex "<version>-<trace id>-<span id>-<flags>",
// neither id zero, 55 characters in version 00, a higher version read by its first four
// fields ("Versioning of traceparent"); ff is invalid.
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

// lowerHex reports whether s is lower-case hex only (the spec's HEXDIGLC).
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

// TraceIDString is the trace id in hex (Application Insights' operation_Id).
func (t TraceParent) TraceIDString() string { return hex.EncodeToString(t.TraceID[:]) }

// IsZero reports whether t is the zero value (no trace).
func (t TraceParent) IsZero() bool { return t.TraceID == [16]byte{} }

// FromProperties reads props' trace context, traceparent before Diagnostic-Id; false if neither is valid.
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

// Stamp sets both properties of props (made when nil) to t unless props
// already carries a valid trace context; it returns props and the context.
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

// PropLinkedFrom holds the traceparent a copy (parked, replayed) was made from.
const PropLinkedFrom = "TraceLinkedFrom"

// Hop marks a copy's props in place as the next hop of its trace: same trace id, a new
// span as traceparent and Diagnostic-Id, PropLinkedFrom the old one; no trace, no change.
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
