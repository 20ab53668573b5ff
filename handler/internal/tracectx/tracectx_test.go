package tracectx

import (
	"testing"
)

func TestParse(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tp, err := Parse(good)
	if err != nil || tp.String() != good || tp.TraceIDString() != "4bf92f3577b34da6a3ce929d0e0e4736" || tp.Flags != 1 {
		t.Fatalf("Parse(%q) = %v (%s), %v", good, tp, tp, err)
	}
	for _, bad := range []string{
		"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", // short
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span
		"00-4bf92f3577b34da6a3ce929d0e0e4736+00f067aa0ba902b7-01", // separator
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", // not hex
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded, want ErrInvalid", bad)
		}
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
	f.Add("00-" + "x")
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := Parse(s)
		if err != nil {
			return
		}
		if tp.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, tp.String())
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
