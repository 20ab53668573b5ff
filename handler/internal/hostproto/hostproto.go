// Package hostproto decodes what the Azure Functions host POSTs to a custom
// handler and encodes what it wants back; it also encodes invocations the
// way the host does, for the development host.
//
// A non-HTTP invocation is POST /<FunctionName> with the body
// {"Data":{...},"Metadata":{...}}. The host encodes every value by one rule:
// byte arrays as base64 strings; DateTime and DateTimeOffset as strings
// without fractional seconds ("2026-11-29T10:20:30", meaning UTC, or
// "2026-11-29T10:20:30+00:00"); objects and dictionaries as nested JSON;
// every other value (string, int, long) as a JSON string holding its JSON
// encoding, so a SessionId o-1 arrives as "\"o-1\"" and a DeliveryCount 3 as
// "3". Null values are left out.
//
// Decoding is strict where the host's behaviour is known and lenient where
// it is not; every leniency has a test named for it:
//   - a string value may also arrive bare ("o-1"), and an integer as a bare
//     JSON number (3) or doubly quoted ("\"3\"");
//   - a time may carry fractional seconds, "Z", any offset or no zone (UTC),
//     and may itself be JSON-quoted; it is returned in UTC;
//   - ApplicationProperties may arrive as a JSON string holding the object;
//   - the timer's TimerInfo may arrive as a JSON string holding the object;
//   - unknown keys are ignored, as are the host's action and client objects
//     (MessageActions, ReceiveActions, Client, ...) and sys.
//
// The message body (a trigger declared with "dataType": "binary") must be
// one standard, padded base64 string (base64.StdEncoding, strict): that is
// what the host sends, and anything else means the trigger is misconfigured.
//
// All decoding failures are *DecodeError values naming the key.
package hostproto

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Invocation is the body of a non-HTTP invocation. Values are kept raw;
// DecodeServiceBus and DecodeTimer interpret them.
type Invocation struct {
	Data     map[string]json.RawMessage `json:"Data"`
	Metadata map[string]json.RawMessage `json:"Metadata"`
}

// DecodeError reports a part of an invocation that could not be decoded.
// Key names it the way the host's JSON does ("body", "Data.message",
// "Metadata.DeliveryCount").
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

// DecodeInvocation decodes an invocation body. The top level must be one
// JSON object; Data and Metadata may be absent or null (both are then empty,
// never nil maps) and must otherwise be objects. Other top-level keys are
// ignored. Errors are *DecodeError.
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

// decodeInvocationOnePass is DecodeInvocation's fast path, for the usual
// invocation whose every top-level value is an object or null: one pass
// over the body instead of two over Data and Metadata. It reports false
// for anything else, which decodeInvocationChecked then decodes or
// explains; where it reports true, both give the same Invocation (the
// fuzz target checks this).
func decodeInvocationOnePass(body []byte) (Invocation, bool) {
	if !json.Valid(body) {
		return Invocation{}, false
	}
	// Valid JSON from here on: the scan below need not check the syntax.
	// Values alias one copy of body, as Unmarshal's would alias copies.
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

// rawObject splits the JSON object value (valid JSON) into its members;
// absent or null gives an empty map. It reports false for any other value
// and for a key with escapes.
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

// eachMember calls f with the quoted key and the value (without the
// whitespace around it) of each member of the object starting at b[i], in
// order. b must be valid JSON.
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

// skipSpace returns the index of the first non-space byte from i.
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

// unquoteKey returns the quoted key without its quotes, and false when it
// holds an escape or a byte outside printable ASCII (which encoding/json
// would unescape or replace).
func unquoteKey(quoted []byte) (string, bool) {
	k := quoted[1 : len(quoted)-1]
	for _, c := range k {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return "", false
		}
	}
	return string(k), true
}

// decodeInvocationChecked decodes any invocation, with an error naming
// what is wrong.
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

// plainString is jsonString's fast path, for the strings the host sends:
// t is '"', then valid UTF-8 without control characters whose only escapes
// are \" \\ and \/ (a JSON string holding a JSON string, "\"o-1\"",
// is the common case), then '"'. Anything else returns false, and
// json.Unmarshal decides (it gives the same string for what this accepts).
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

// snippet quotes text (a body, a time, a number's text) for an error
// message, shortened.
func snippet(text []byte) string {
	if len(text) == 0 {
		return "nothing"
	}
	return strconv.Quote(shorten(string(text)))
}

// snippetJSON shows a JSON value for an error message, compacted and
// shortened.
func snippetJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		raw = b.Bytes()
	}
	return shorten(string(raw))
}

// shorten cuts s to at most 64 bytes, on a rune boundary, marking the cut.
func shorten(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// metaString decodes a string value: a JSON string holding a JSON string
// ("\"o-1\""), or leniently a bare JSON string ("o-1") whose content is not
// itself a JSON string. Absent and null give "".
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

// metaInt decodes an integer value of the given bit size: a JSON string
// holding a decimal integer ("3"), or leniently a bare JSON number (3) or a
// doubly quoted one ("\"3\""). Absent and null give 0.
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

// metaTime decodes a time value (see parseTime). Absent and null give the
// zero time.
func metaTime(md map[string]json.RawMessage, key string) (time.Time, error) {
	return rawTime(md[key], "Metadata."+key)
}

// rawTime decodes a JSON string holding a time, leniently also a JSON
// string holding a JSON string holding one. Absent and null give zero.
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

// parseTime parses the host's date forms: ISO 8601 with optional
// fractional seconds and "Z", an offset, or no zone, which means UTC. The
// result is in UTC and within the years 1 to 9999 (what .NET represents);
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

// Formats the host writes.
const (
	// formatUTCNoZone: a DateTime from the binding data (seconds only).
	formatUTCNoZone = "2006-01-02T15:04:05"
	// formatOffset: a DateTimeOffset from the binding data (seconds only).
	formatOffset = "2006-01-02T15:04:05-07:00"
	// formatNetOffset: Json.NET's DateTimeOffset or local DateTime inside a
	// nested object (up to seven fractional digits, trailing zeros cut).
	formatNetOffset = "2006-01-02T15:04:05.9999999-07:00"
	// formatNetUTC: Json.NET's UTC DateTime inside a nested object.
	formatNetUTC = "2006-01-02T15:04:05.9999999Z07:00"
)

// formatTime formats t in UTC with layout, after cutting it to the
// precision the layout keeps (whole seconds, or .NET's 100 ns ticks).
func formatTime(key string, t time.Time, layout string) (string, error) {
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return "", fmt.Errorf("hostproto: %s: %v is outside the years 1 to 9999", key, t)
	}
	if strings.Contains(layout, ".9") {
		t = t.Truncate(100 * time.Nanosecond)
	} else {
		t = t.Truncate(time.Second)
	}
	return t.Format(layout), nil
}

// quoteJSON returns s as the host sends a string value: the JSON encoding
// of s (Json.NET does not escape <, > and &, so neither does this).
func quoteJSON(s string) string {
	if plainASCII(s) { // ids, subjects, lock tokens: nothing to escape
		return `"` + s + `"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// plainASCII reports whether s is printable ASCII without '"' and '\\',
// which JSON (without HTML escaping) encodes as itself between quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// marshal encodes v as the host would, without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// sysData is the host's "sys" metadata object.
type sysData struct {
	MethodName string `json:"MethodName"`
	UtcNow     string `json:"UtcNow"`
	RandGuid   string `json:"RandGuid"`
}

// newSys builds "sys" for functionName at now. The host's RandGuid is
// random; here it is derived from the arguments so that an encoding is a
// pure function of its inputs (it only feeds {rand-guid} binding
// expressions, which custom handlers do not have).
func newSys(functionName string, now time.Time, seed ...string) (sysData, error) {
	if functionName == "" {
		return sysData{}, errors.New("hostproto: function name is empty")
	}
	utcNow, err := formatTime("sys.UtcNow", now, formatNetUTC)
	if err != nil {
		return sysData{}, err
	}
	h := sha256.New()
	for _, s := range append([]string{functionName, utcNow}, seed...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	g := h.Sum(nil)[:16]
	g[6] = g[6]&0x0f | 0x40 // version 4
	g[8] = g[8]&0x3f | 0x80 // RFC 4122 variant
	guid := formatGUID(g)
	return sysData{MethodName: functionName, UtcNow: utcNow, RandGuid: guid}, nil
}

// NewGUID returns a random version-4 GUID in the form the Functions host
// uses for invocation ids (X-Azure-Functions-InvocationId) and worker ids
// (FUNCTIONS_CUSTOMHANDLER_WORKER_ID).
func NewGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatGUID(b[:])
}

// formatGUID writes the 16 bytes of g as a lower-case GUID
// (8-4-4-4-12 hex digits).
func formatGUID(g []byte) string {
	var out [36]byte
	hex.Encode(out[0:8], g[0:4])
	hex.Encode(out[9:13], g[4:6])
	hex.Encode(out[14:18], g[6:8])
	hex.Encode(out[19:23], g[8:10])
	hex.Encode(out[24:36], g[10:16])
	out[8], out[13], out[18], out[23] = '-', '-', '-', '-'
	return string(out[:])
}
