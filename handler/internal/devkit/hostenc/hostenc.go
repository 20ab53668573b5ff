// Package hostenc encodes invocations as the Azure Functions host sends them
// to a custom handler: the development host's side of package hostproto.
//
// Its output follows hostproto's package comment (values as JSON strings
// holding their JSON encoding, byte arrays in base64, times to the second
// in the binding data), and is what hostproto's decoders read back. An
// encoding is a pure function of its arguments.
package hostenc

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

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
		return "", fmt.Errorf("hostenc: %s: %v is outside the years 1 to 9999", key, t)
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
	b, _ := marshal(s) // a string always encodes
	return string(b)
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
		return sysData{}, errors.New("hostenc: function name is empty")
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
	g, _ := uuid.NewRandomFromReader(bytes.NewReader(h.Sum(nil))) // the hash, as version 4
	return sysData{MethodName: functionName, UtcNow: utcNow, RandGuid: g.String()}, nil
}

// NewGUID returns a random version-4 GUID in the form the Functions host
// uses for invocation ids (X-Azure-Functions-InvocationId) and worker ids
// (FUNCTIONS_CUSTOMHANDLER_WORKER_ID): lower-case, 8-4-4-4-12 hex digits.
func NewGUID() string { return uuid.NewString() }
