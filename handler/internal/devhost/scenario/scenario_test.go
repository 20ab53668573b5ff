package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"orderstatus/handler/internal/order"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Line
	}{
		{
			name: "json body",
			in:   `{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}`,
			want: Line{Subject: "OrderStatusChanged", SessionID: "o-1", MessageID: "o-1:1", ContentType: "application/json",
				Body: []byte(`{"orderId":"o-1","status":"Created","sequence":1}`)},
		},
		{
			name: "string body sent as is",
			in:   `{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:x","body":"{not json"}`,
			want: Line{Subject: "OrderStatusChanged", SessionID: "o-1", MessageID: "o-1:x", Body: []byte(`{not json`)},
		},
		{
			name: "string body with escapes",
			in:   `{"sessionId":"o-1","messageId":"m","body":"a\"b\n"}`,
			want: Line{SessionID: "o-1", MessageID: "m", Body: []byte("a\"b\n")},
		},
		{
			name: "number and null bodies are JSON text",
			in:   `{"sessionId":"o-1","messageId":"m","body":42}`,
			want: Line{SessionID: "o-1", MessageID: "m", ContentType: "application/json", Body: []byte(`42`)},
		},
		{
			name: "null body",
			in:   `{"sessionId":"o-1","messageId":"m","body":null}`,
			want: Line{SessionID: "o-1", MessageID: "m", ContentType: "application/json", Body: []byte(`null`)},
		},
		{
			name: "no body, no subject",
			in:   `{"sessionId":"o-1","messageId":"m"}`,
			want: Line{SessionID: "o-1", MessageID: "m"},
		},
		{
			name: "schedule, send after, properties",
			in: `{"subject":"PaymentTimeoutCheck","sessionId":"o-1","messageId":"o-1:payment-timeout","body":{"orderId":"o-1"},` +
				`"scheduleAfter":"30m","sendAfter":"1m30s","applicationProperties":{"s":"x","i":3,"f":1.5,"b":true,"e":1e3}}`,
			want: Line{Subject: "PaymentTimeoutCheck", SessionID: "o-1", MessageID: "o-1:payment-timeout", ContentType: "application/json",
				Body: []byte(`{"orderId":"o-1"}`), ScheduleAfter: 30 * time.Minute, SendAfter: 90 * time.Second,
				ApplicationProperties: map[string]any{"s": "x", "i": int64(3), "f": 1.5, "b": true, "e": 1000.0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in+"\n"), "w.jsonl")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.want.Pos = "w.jsonl:1"
			if len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"not an object", `[1]`, "one JSON object"},
		{"invalid json", `{"sessionId":`, "invalid JSON"},
		{"unknown field", `{"sesionId":"o-1","messageId":"m"}`, "sesionId"},
		{"missing session", `{"messageId":"m"}`, "sessionId is missing"},
		{"empty message id", `{"sessionId":"o-1","messageId":""}`, "messageId is missing"},
		{"bad schedule", `{"sessionId":"o-1","messageId":"m","scheduleAfter":"30 minutes"}`, "scheduleAfter"},
		{"negative schedule", `{"sessionId":"o-1","messageId":"m","scheduleAfter":"-1s"}`, "scheduleAfter"},
		{"bad send after", `{"sessionId":"o-1","messageId":"m","sendAfter":5}`, "invalid JSON"},
		{"nested property", `{"sessionId":"o-1","messageId":"m","applicationProperties":{"k":{"a":1}}}`, "applicationProperties.k"},
		{"trailing data", `{"sessionId":"o-1","messageId":"m"} {}`, "after the JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := `{"sessionId":"o-1","messageId":"ok"}` + "\n\n" + tt.in + "\n"
			_, err := Parse(strings.NewReader(in), "w.jsonl")
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse: got %v, want a *LineError wrapping ErrSyntax", err)
			}
			if le.Pos != "w.jsonl:3" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse: got %q, want position w.jsonl:3 and %q", err, tt.want)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	data := `{"sessionId":"o-1","messageId":"a"}` + "\n" + `{"sessionId":"o-2","messageId":"b"}` // no final newline
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := ReadFile(path)
	if err != nil || len(lines) != 2 || lines[1].MessageID != "b" || lines[1].Pos != path+":2" {
		t.Errorf("ReadFile: got %+v, %v", lines, err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil {
		t.Errorf("ReadFile of a missing file: got nil error")
	}
}

func TestLineMessage(t *testing.T) {
	l := Line{Subject: "S", SessionID: "o-1", MessageID: "m", ContentType: "application/json", Body: []byte("{}"),
		ApplicationProperties: map[string]any{"k": "v"}}
	m := l.Message()
	m.Body[0] = 'x'
	m.ApplicationProperties["k"] = "changed"
	if string(l.Body) != "{}" || l.ApplicationProperties["k"] != "v" {
		t.Errorf("Message shares memory with the line")
	}
	if m.SessionID != "o-1" || m.MessageID != "m" || m.Subject != "S" || m.ContentType != "application/json" {
		t.Errorf("Message: got %+v", m)
	}
}

func TestDemo(t *testing.T) {
	lines := Demo(DemoOptions{Seed: 1, Orders: 300})
	if again := Demo(DemoOptions{Seed: 1, Orders: 300}); !reflect.DeepEqual(lines, again) {
		t.Fatalf("Demo is not deterministic for one seed")
	}
	if other := Demo(DemoOptions{Seed: 2, Orders: 300}); reflect.DeepEqual(lines, other) {
		t.Errorf("Demo gives the same workload for seeds 1 and 2")
	}

	var (
		updates   = map[string][]order.Update{} // order -> updates in send order
		ids       = map[string]int{}
		timeouts  int
		poison    = map[string]int{}
		late      int
		reordered int
	)
	for _, l := range lines {
		ids[l.MessageID]++
		if l.SendAfter > 0 {
			late++
			if l.SendAfter != LateReplayAfter {
				t.Errorf("%s: sendAfter %s, want %s", l.MessageID, l.SendAfter, LateReplayAfter)
			}
			continue
		}
		switch l.Subject {
		case order.SubjectPaymentTimeout:
			timeouts++
			if l.ScheduleAfter != PaymentTimeout || l.MessageID != l.SessionID+":payment-timeout" {
				t.Errorf("timeout line: got %+v", l)
			}
		case order.SubjectStatusChanged:
			u, err := order.ParseUpdate(l.Body, l.SessionID)
			if err != nil {
				var pe *order.PoisonError
				if errors.As(err, &pe) {
					poison[pe.Reason]++
				}
				continue
			}
			if ids[l.MessageID] > 1 {
				continue // an immediate duplicate
			}
			updates[u.OrderID] = append(updates[u.OrderID], u)
		default:
			poison[order.ReasonUnknownSubject]++
		}
	}
	if len(updates) != 300 {
		t.Errorf("orders: got %d, want 300", len(updates))
	}
	invalidTransition := 0
	for id, us := range updates {
		if len(us) < 1 || len(us) > 6 {
			t.Errorf("%s: %d events, want 1 to 6", id, len(us))
		}
		for i := 1; i < len(us); i++ {
			if us[i].Sequence < us[i-1].Sequence {
				reordered++
				break
			}
		}
		for i := 1; i < len(us); i++ {
			if us[i-1].Status == order.Delivered && us[i].Sequence > us[i-1].Sequence {
				invalidTransition++
			}
		}
	}
	dups := 0
	for _, n := range ids {
		if n > 1 {
			dups += n - 1
		}
	}
	if dups < 20 || late == 0 {
		t.Errorf("duplicates: got %d (late %d), want about 5%% of %d, some late", dups, late, len(lines))
	}
	if reordered < 10 {
		t.Errorf("reordered orders: got %d, want about 30", reordered)
	}
	if timeouts < 8 {
		t.Errorf("payment timeouts: got %d, want about 5%% of orders plus 2", timeouts)
	}
	if poison[order.ReasonInvalidPayload] < 2 || poison[order.ReasonUnknownSubject] < 1 {
		t.Errorf("poison: got %v, want bad JSON, mismatch and unknown subject", poison)
	}
	if invalidTransition == 0 {
		t.Errorf("no order has an update after Delivered")
	}
}
