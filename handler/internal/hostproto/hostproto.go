// Package hostproto decodes what the Azure Functions host POSTs to a custom
// handler and encodes what it wants back (the development host's side is
// devkit/hostenc). A non-HTTP invocation is POST /<FunctionName> with
// {"Data":{...},"Metadata":{...}}: byte arrays as base64, times without
// fractional seconds, objects as nested JSON, every other value as a JSON string
// holding its JSON ("\"o-1\"", "3"), nulls left out. Decoding is strict where the
// host's behaviour is known and lenient where it is not (each leniency has a test
// named for it); failures are *DecodeError values naming the key.
package hostproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orderstatus/orderstatus/handler/internal/clip"
)

// Invocation is a non-HTTP invocation's body, values raw for DecodeServiceBus and DecodeTimer.
type Invocation struct {
	Data     map[string]json.RawMessage `json:"Data"`
	Metadata map[string]json.RawMessage `json:"Metadata"`
}

// DecodeError reports a part of an invocation that could not be decoded; Key
// names it as the host's JSON does ("body", "Metadata.DeliveryCount").
type DecodeError struct {
	Key string
	Err error
}

func (e *DecodeError) Error() string { return "hostproto: " + e.Key + ": " + e.Err.Error() }

// Unwrap returns the underlying cause.
func (e *DecodeError) Unwrap() error { return e.Err }

func decodeErr(key, format string, args ...any) *DecodeError {
	return &DecodeError{Key: key, Err: fmt.Errorf(format, args...)}
}

// DecodeInvocation decodes an invocation body, one JSON object whose Data and
// Metadata are objects, absent or null (then empty, not nil). Errors are *DecodeError.
func DecodeInvocation(body []byte) (Invocation, error) {
	trimmed := bytes.TrimLeft(body, jsonSpace)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Invocation{}, decodeErr("body", "not a JSON object: %s", snippet(body))
	}
	if inv, ok := decodeInvocationOnePass(body); ok {
		return inv, nil
	}
	return decodeInvocationChecked(body)
}

// decodeInvocationOnePass is DecodeInvocation's fast path; on false decodeInvocationChecked decides.
func decodeInvocationOnePass(body []byte) (Invocation, bool) {
	if !json.Valid(body) {
		return Invocation{}, false
	}
	// Valid JSON from here on; values alias one copy of body.
	body = bytes.Clone(body)
	var data, metadata []byte
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return Invocation{}, false
	}
	ok := true
	eachMember(body, i, func(key, value []byte) {
		switch k, plain := unquoteKey(key); {
		case !plain:
			ok = false // leave escaped keys to encoding/json
		case k == "Data":
			data = value // the last one wins, as in Unmarshal
		case k == "Metadata":
			metadata = value
		}
	})
	if !ok {
		return Invocation{}, false
	}
	inv := Invocation{}
	if inv.Data, ok = rawObject(data); !ok {
		return Invocation{}, false
	}
	if inv.Metadata, ok = rawObject(metadata); !ok {
		return Invocation{}, false
	}
	return inv, true
}

// rawObject splits a JSON object (absent or null: empty); false for another value or an escaped key.
func rawObject(value []byte) (map[string]json.RawMessage, bool) {
	m := map[string]json.RawMessage{}
	if value == nil || string(value) == "null" {
		return m, true
	}
	if value[0] != '{' {
		return nil, false
	}
	ok := true
	eachMember(value, 0, func(key, v []byte) {
		k, plain := unquoteKey(key)
		if !plain {
			ok = false
			return
		}
		m[k] = json.RawMessage(v[:len(v):len(v)]) // the last one wins
	})
	return m, ok
}

// eachMember calls f with each quoted key and value of the object at b[i] (valid JSON).
func eachMember(b []byte, i int, f func(key, value []byte)) {
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return
	}
	for {
		keyEnd := stringEnd(b, i)
		key := b[i:keyEnd]
		i = skipSpace(b, skipSpace(b, keyEnd)+1) // past the colon
		end := valueEnd(b, i)
		f(key, b[i:end])
		i = skipSpace(b, end)
		if b[i] != ',' {
			return // '}'
		}
		i = skipSpace(b, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index after the JSON string starting at b[i].
func stringEnd(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// valueEnd returns the index after the JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
			i++
		}
		return i
	}
}

// unquoteKey strips the quotes; false for an escape or a byte outside printable ASCII.
func unquoteKey(quoted []byte) (string, bool) {
	k := quoted[1 : len(quoted)-1]
	for _, c := range k {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return "", false
		}
	}
	return string(k), true
}

// decodeInvocationChecked decodes any invocation, with an error naming what is wrong.
func decodeInvocationChecked(body []byte) (Invocation, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return Invocation{}, decodeErr("body", "not valid JSON: %v", err)
	}
	inv := Invocation{Data: map[string]json.RawMessage{}, Metadata: map[string]json.RawMessage{}}
	for _, part := range []struct {
		key string
		dst *map[string]json.RawMessage
	}{{"Data", &inv.Data}, {"Metadata", &inv.Metadata}} {
		raw, ok := top[part.key]
		if !ok || isNull(raw) {
			continue
		}
		if bytes.TrimLeft(raw, jsonSpace)[0] != '{' {
			return Invocation{}, decodeErr(part.key, "want a JSON object, got %s", snippetJSON(raw))
		}
		if err := json.Unmarshal(raw, part.dst); err != nil {
			return Invocation{}, decodeErr(part.key, "%v", err)
		}
	}
	return inv, nil
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\r\n"

// isNull reports whether raw is absent or the JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.Trim(raw, jsonSpace)
	return len(t) == 0 || string(t) == "null"
}

// jsonString returns the string raw holds, if raw is exactly a JSON string.
func jsonString(raw []byte) (string, bool) {
	t := bytes.Trim(raw, jsonSpace)
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	if s, ok := plainString(t); ok {
		return s, true
	}
	var s string
	if err := json.Unmarshal(t, &s); err != nil {
		return "", false
	}
	return s, true
}

// plainString is jsonString's fast path for a quoted valid UTF-8 string without
// control characters whose only escapes are \" \\ and \/; false otherwise.
func plainString(t []byte) (string, bool) {
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return "", false
	}
	inner := t[1 : len(t)-1]
	escapes := 0
	for i := 0; i < len(inner); i++ {
		switch c := inner[i]; {
		case c < 0x20 || c == '"':
			return "", false
		case c == '\\':
			if i+1 == len(inner) {
				return "", false
			}
			switch inner[i+1] {
			case '"', '\\', '/':
				escapes++
				i++
			default:
				return "", false
			}
		}
	}
	if !utf8.Valid(inner) {
		return "", false
	}
	if escapes == 0 {
		return string(inner), true
	}
	out := make([]byte, 0, len(inner)-escapes)
	for i := 0; i < len(inner); i++ {
		if inner[i] == '\\' {
			i++
		}
		out = append(out, inner[i])
	}
	return string(out), true
}

func snippet(text []byte) string {
	if len(text) == 0 {
		return "nothing"
	}
	return strconv.Quote(clip.String(string(text), 64))
}

func snippetJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		raw = b.Bytes()
	}
	return clip.String(string(raw), 64)
}

// metaString decodes a JSON string holding one ("\"o-1\""), leniently a bare one; absent: "".
func metaString(md map[string]json.RawMessage, key string) (string, error) {
	raw, ok := md[key]
	if !ok || isNull(raw) {
		return "", nil
	}
	s, ok := jsonString(raw)
	if !ok {
		return "", decodeErr("Metadata."+key, "want a JSON string, got %s", snippetJSON(raw))
	}
	if inner, ok := jsonString([]byte(s)); ok {
		return inner, nil
	}
	return s, nil
}

// metaInt decodes a JSON string holding an integer ("3"), leniently bare or doubly quoted; absent: 0.
func metaInt(md map[string]json.RawMessage, key string, bitSize int) (int64, error) {
	raw, ok := md[key]
	if !ok || isNull(raw) {
		return 0, nil
	}
	text := string(bytes.Trim(raw, jsonSpace))
	if s, ok := jsonString(raw); ok {
		text = s
		if inner, ok := jsonString([]byte(s)); ok {
			text = inner
		}
	}
	n, err := strconv.ParseInt(text, 10, bitSize)
	if err != nil {
		return 0, decodeErr("Metadata."+key, "%s is not a %d-bit integer", snippet([]byte(text)), bitSize)
	}
	return n, nil
}

// metaTime decodes a time value (see parseTime); absent and null give zero.
func metaTime(md map[string]json.RawMessage, key string) (time.Time, error) {
	return rawTime(md[key], "Metadata."+key)
}

// rawTime decodes a JSON string holding a time (leniently doubly quoted), or zero.
func rawTime(raw json.RawMessage, key string) (time.Time, error) {
	if isNull(raw) {
		return time.Time{}, nil
	}
	s, ok := jsonString(raw)
	if !ok {
		return time.Time{}, decodeErr(key, "want a time as a JSON string, got %s", snippetJSON(raw))
	}
	if inner, ok := jsonString([]byte(s)); ok {
		s = inner
	}
	t, err := parseTime(s)
	if err != nil {
		return time.Time{}, &DecodeError{Key: key, Err: err}
	}
	return t, nil
}

// Layouts parseTime accepts. Fractional seconds are optional in both.
const (
	layoutZoned  = "2006-01-02T15:04:05.999999999Z07:00"
	layoutNoZone = "2006-01-02T15:04:05.999999999"
)

// parseTime parses ISO 8601 with optional fractional seconds and "Z", an offset or
// no zone (UTC), into UTC within the years 1 to 9999 (what .NET represents);
// .NET's MinValue, 0001-01-01T00:00:00, is the zero time.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(layoutZoned, s)
	if err != nil {
		var err2 error
		if t, err2 = time.Parse(layoutNoZone, s); err2 != nil {
			return time.Time{}, fmt.Errorf("%s is not an ISO 8601 date and time", snippet([]byte(s)))
		}
	}
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}, fmt.Errorf("%s is outside the years 1 to 9999", snippet([]byte(s)))
	}
	return t, nil
}
