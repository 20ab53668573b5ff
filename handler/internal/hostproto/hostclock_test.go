package hostproto

import (
	"net/http"
	"testing"
	"time"
)

func TestHostClock(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 30, 0, 123456789, time.UTC)
	for _, tc := range []struct {
		name, value string
		want        time.Time
		ok          bool
	}{
		{"absent", "", time.Time{}, false},
		{"a reading", FormatHostClock(at), at, true},
		{"an offset", "2026-12-02T05:30:00.123456789+01:00", at, true},
		{"seconds only", "2026-12-02T04:30:00Z", at.Truncate(time.Second), true},
		{"not RFC 3339", "Wed, 02 Dec 2026 04:30:00 GMT", time.Time{}, false},
		{"a number", "1764649800", time.Time{}, false},
		{"the zero time", FormatHostClock(time.Time{}), time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/OrderStatus", nil)
			if tc.value != "" {
				r.Header.Set(HeaderHostClock, tc.value)
			}
			got, ok := HostClock(r)
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Errorf("HostClock(%q) = %s, %v; want %s, %v", tc.value, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzParseHostClock: no value panics, a value it accepts is never the
// zero time, and what it accepts formats back to the same instant.
func FuzzParseHostClock(f *testing.F) {
	for _, s := range []string{"", "2026-12-02T04:30:00.5Z", "2026-12-02T05:30:00+01:00", "0001-01-01T00:00:00Z", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseHostClock(s)
		if !ok {
			return
		}
		if got.IsZero() {
			t.Fatalf("ParseHostClock(%q) accepted the zero time", s)
		}
		if back, ok := ParseHostClock(FormatHostClock(got)); !ok || !back.Equal(got) {
			t.Fatalf("ParseHostClock(FormatHostClock(%s)) = %s, %v", got, back, ok)
		}
	})
}
