package hostproto

import (
	"net/http"
	"time"
)

// HeaderHostClock is not part of the Functions host's protocol: the host
// never sends it. The development host adds it to every invocation with
// its clock's reading as it sends the request (RFC 3339, nanoseconds):
// the clock its in-memory broker runs on, which may run faster than the
// wall clock or be fast-forwarded. The reading is a lower bound of the
// broker's clock for as long as the call lasts (that clock only moves
// forward), so that a handler can schedule from it without asking the
// broker for the time, one loopback call less, where being behind by the
// call's duration changes nothing it promises. In Azure the handler's
// clock is its own and nothing needs asking.
const HeaderHostClock = "X-Orderstatus-Host-Clock"

// HostClock returns the host clock reading r's invocation carries, and
// whether it carries a usable one: a value that is not RFC 3339, or is
// the zero time, is ignored (the handler asks the broker instead).
func HostClock(r *http.Request) (time.Time, bool) {
	return ParseHostClock(r.Header.Get(HeaderHostClock))
}

// ParseHostClock parses a HeaderHostClock value; ok is false for an empty,
// malformed or zero one.
func ParseHostClock(s string) (t time.Time, ok bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.IsZero() {
		return time.Time{}, false
	}
	return t, true
}

// FormatHostClock is the header's value for t (UTC, RFC 3339 with
// nanoseconds): ParseHostClock(FormatHostClock(t)) is t.
func FormatHostClock(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
