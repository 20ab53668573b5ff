package tracectx

import (
	"strconv"
	"testing"
)

// TestParse follows the W3C Trace Context recommendation, section
// "traceparent Header" (version 00: exactly 55 characters; version ff
// invalid) and "Versioning of traceparent" (a higher version: the first
// four fields, when the flags end the value or a '-' follows them).
func TestParse(t *testing.T) {
	const (
		ids  = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
		good = "00-" + ids + "-01"
	)
	want := TraceParent{
		TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	}
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"version 00", good, true},
		{"version 00, not sampled", "00-" + ids + "-00", true},
		{"version 00 with more after the flags", good + "-what-comes-next", false},
		{"version 00 with a character more", good + "0", false},
		{"a higher version, as long as 00", "01-" + ids + "-01", true},
		{"a higher version with fields of its own", "cc-" + ids + "-01-what-the-future-holds", true},
		{"a higher version with an empty field after the flags", "fe-" + ids + "-01-", true},
		{"a higher version, no dash after the flags", "01-" + ids + "-01x", false},
		{"a higher version, flags cut short", "01-" + ids + "-1", false},
		{"a higher version with upper-case ids", "01-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"version ff", "ff-" + ids + "-01", false},
		{"version ff with more", "ff-" + ids + "-01-x", false},
		{"version in upper case", "0A-" + ids + "-01", false},
		{"version not hex", "0g-" + ids + "-01", false},
		{"empty", "", false},
		{"short", "00-" + ids, false},
		{"upper case", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"zero trace", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"zero span", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"separator", "00-4bf92f3577b34da6a3ce929d0e0e4736+00f067aa0ba902b7-01", false},
		{"not hex", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
		{"higher version, zero trace", "02-00000000000000000000000000000000-00f067aa0ba902b7-01-x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Parse(tt.in)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("Parse(%q): %v, want it read", tt.in, err)
			case !tt.ok && err == nil:
				t.Fatalf("Parse(%q) = %v, want ErrInvalid", tt.in, tp)
			case !tt.ok:
				return
			}
			flags, _ := strconv.ParseUint(tt.in[53:55], 16, 8)
			if tp.TraceID != want.TraceID || tp.SpanID != want.SpanID || tp.Flags != byte(flags) {
				t.Errorf("Parse(%q) = %+v, want the ids of %s and flags %s", tt.in, tp, ids, tt.in[53:55])
			}
			// Written again as the highest version this package knows.
			if got := tp.String(); got != "00"+tt.in[2:55] {
				t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, "00"+tt.in[2:55])
			}
		})
	}
}

func TestFromPropertiesReadsAsTheSDKs(t *testing.T) {
	a, b := New(), New()
	tests := []struct {
		name  string
		props map[string]any
		want  TraceParent
		ok    bool
	}{
		{"traceparent first", map[string]any{PropTraceParent: a.String(), PropDiagnosticID: b.String()}, a, true},
		{"Diagnostic-Id alone (older SDKs)", map[string]any{PropDiagnosticID: b.String()}, b, true},
		{"an invalid traceparent falls back", map[string]any{PropTraceParent: "junk", PropDiagnosticID: b.String()}, b, true},
		{"not a string", map[string]any{PropTraceParent: 7}, TraceParent{}, false},
		{"none", nil, TraceParent{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FromProperties(tt.props)
			if got != tt.want || ok != tt.ok {
				t.Errorf("FromProperties = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestStampKeepsAnExistingContext(t *testing.T) {
	a, b := New(), New()
	props, got := Stamp(nil, a)
	if got != a || props[PropTraceParent] != a.String() || props[PropDiagnosticID] != a.String() {
		t.Fatalf("Stamp(nil) = %v, %v", props, got)
	}
	props, got = Stamp(props, b) // a parked copy, a replay: the original trace stays
	if got != a || props[PropTraceParent] != a.String() {
		t.Errorf("Stamp over an existing context = %v, %v; want %v kept", props, got, a)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-" + "x")
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := Parse(s)
		if err != nil {
			return
		}
		// Read: the first four fields, of version 00 exactly or of a
		// higher version (not ff), with the end or a '-' after them.
		if len(s) < 55 || s[:2] == "ff" || (s[:2] == "00" && len(s) != 55) || (len(s) > 55 && s[55] != '-') {
			t.Fatalf("Parse(%q) = %v, want ErrInvalid", s, tp)
		}
		if got := tp.String(); got != "00"+s[2:55] {
			t.Fatalf("Parse(%q).String() = %q, want %q", s, got, "00"+s[2:55])
		}
		if again, err := Parse(tp.String()); err != nil || again != tp {
			t.Fatalf("Parse(%q) = %v, %v; want %v", tp.String(), again, err, tp)
		}
	})
}

func TestHopKeepsTheTraceWithASpanOfItsOwn(t *testing.T) {
	orig := New()
	props := map[string]any{PropDiagnosticID: orig.String(), "tenant": "t1"}
	Hop(props)
	next, ok := FromProperties(props)
	if !ok || next.TraceID != orig.TraceID || next.SpanID == orig.SpanID {
		t.Fatalf("after Hop: %v (ok %v), want trace %s with a new span", next, ok, orig.TraceIDString())
	}
	if props[PropLinkedFrom] != orig.String() || props[PropTraceParent] != props[PropDiagnosticID] || props["tenant"] != "t1" {
		t.Errorf("props %v: want the link to %s, both properties equal, the rest kept", props, orig)
	}
	Hop(props) // a replay of the parked copy: linked to the copy
	again, _ := FromProperties(props)
	if props[PropLinkedFrom] != next.String() || again.TraceID != orig.TraceID {
		t.Errorf("second hop: linked from %v, trace %s; want %s and the same trace", props[PropLinkedFrom], again.TraceIDString(), next)
	}
	none := map[string]any{"tenant": "t1"}
	Hop(none)
	if len(none) != 1 {
		t.Errorf("Hop without a trace context changed %v", none)
	}
}
