package scenario

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/order"
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
			name: "number body is JSON text",
			in:   `{"sessionId":"o-1","messageId":"m","body":42}`,
			want: Line{SessionID: "o-1", MessageID: "m", ContentType: "application/json", Body: []byte(`42`)},
		},
		{
			name: "no body, no subject",
			in:   `{"sessionId":"o-1","messageId":"m"}`,
			want: Line{SessionID: "o-1", MessageID: "m"},
		},
		{
			name: "empty subject",
			in:   `{"subject":"","sessionId":"o-1","messageId":"m"}`,
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
		{
			name: "content type, correlation id, time to live",
			in:   `{"sessionId":"o-1","messageId":"m","body":{"a":1},"contentType":"application/vnd.order+json","correlationId":"c-1","timeToLive":"1h"}`,
			want: Line{SessionID: "o-1", MessageID: "m", ContentType: "application/vnd.order+json", CorrelationID: "c-1",
				TimeToLive: time.Hour, Body: []byte(`{"a":1}`)},
		},
		{
			name: "content type of a string body",
			in:   `{"sessionId":"o-1","messageId":"m","body":"<a/>","contentType":"application/xml"}`,
			want: Line{SessionID: "o-1", MessageID: "m", ContentType: "application/xml", Body: []byte(`<a/>`)},
		},
		{
			name: "null and empty optional fields are absent",
			in: `{"subject":null,"sessionId":"o-1","messageId":"m","body":null,"scheduleAfter":"","sendAfter":null,` +
				`"timeToLive":"","contentType":null,"correlationId":"","applicationProperties":null}`,
			want: Line{SessionID: "o-1", MessageID: "m"},
		},
		{
			name: "null properties left out, nested ones as JSON text",
			in:   `{"sessionId":"o-1","messageId":"m","applicationProperties":{"gone":null,"obj":{"a": [1, 2]},"arr":[true, "x"]}}`,
			want: Line{SessionID: "o-1", MessageID: "m", ApplicationProperties: map[string]any{"obj": `{"a":[1,2]}`, "arr": `[true,"x"]`}},
		},
		{
			name: "only null properties",
			in:   `{"sessionId":"o-1","messageId":"m","applicationProperties":{"gone":null}}`,
			want: Line{SessionID: "o-1", MessageID: "m"},
		},
		{
			name: "field names in any case",
			in:   `{"SessionID":"o-1","MESSAGEID":"m","ScheduleAfter":"1s"}`,
			want: Line{SessionID: "o-1", MessageID: "m", ScheduleAfter: time.Second},
		},
		{
			name: "byte order mark",
			in:   "\uFEFF" + `{"sessionId":"o-1","messageId":"m"}`,
			want: Line{SessionID: "o-1", MessageID: "m"},
		},
		{
			name: "ids at the limit",
			in:   `{"sessionId":"` + strings.Repeat("s", 128) + `","messageId":"` + strings.Repeat("m", 128) + `"}`,
			want: Line{SessionID: strings.Repeat("s", 128), MessageID: strings.Repeat("m", 128)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warnings []string
			got, err := Parse(strings.NewReader(tt.in+"\n"), "w.jsonl", &Options{Warn: func(m string) { warnings = append(warnings, m) }})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.want.Pos = "w.jsonl:1"
			if len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
			// A line without a subject or a body is sent, with a warning.
			var wantWarnings []string
			if tt.want.Subject == "" {
				wantWarnings = append(wantWarnings, "w.jsonl:1: no subject; sending it without one (the handler parks it as UnknownSubject)")
			}
			if tt.want.Body == nil {
				wantWarnings = append(wantWarnings, "w.jsonl:1: no body; sending an empty one (the handler parks it as InvalidPayload)")
			}
			if !reflect.DeepEqual(warnings, wantWarnings) {
				t.Errorf("warnings:\n got %q\nwant %q", warnings, wantWarnings)
			}
		})
	}
}

func TestParseWarnings(t *testing.T) {
	in := `{"subject":"S","sessionId":"o-1","messageId":"a","body":"x","note":"x","Extra":1}` + "\n" +
		`{"sessionId":"o-1","messageId":"b","note":"y"}` + "\n" +
		`{"subject":"S","sessionId":"o-1","body":{"orderId":"o-1"}}` + "\n"
	var warnings []string
	lines, err := Parse(strings.NewReader(in), "dir/w.jsonl", &Options{Warn: func(m string) { warnings = append(warnings, m) }})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(lines) != 3 || lines[2].MessageID != "w.jsonl:3" {
		t.Fatalf("Parse: got %+v, want three lines, the last with MessageId w.jsonl:3", lines)
	}
	want := []string{
		`dir/w.jsonl:1: unknown field "Extra" ignored (reported once)`,
		`dir/w.jsonl:1: unknown field "note" ignored (reported once)`,
		`dir/w.jsonl:2: no subject; sending it without one (the handler parks it as UnknownSubject)`,
		`dir/w.jsonl:2: no body; sending an empty one (the handler parks it as InvalidPayload)`,
		`dir/w.jsonl:3: no messageId; sending it as "w.jsonl:3"`,
	}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings:\n got %q\nwant %q", warnings, want)
	}
	// Without Options, the same input parses and warns nobody.
	if _, err := Parse(strings.NewReader(in), "w.jsonl", nil); err != nil {
		t.Errorf("Parse without options: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	big := strings.Repeat("x", MaxMessageBytes)
	tests := []struct {
		name, in, want string
	}{
		{"not an object", `[1]`, "one JSON object"},
		{"invalid json", `{"sessionId":`, "invalid JSON"},
		{"missing session", `{"messageId":"m"}`, "sessionId is missing"},
		{"null session", `{"sessionId":null,"messageId":"m"}`, "sessionId is missing"},
		{"empty session", `{"sessionId":"","messageId":"m"}`, "sessionId is missing"},
		{"number for a string", `{"sessionId":"o-1","messageId":5}`, "messageId: want a string"},
		{"bad schedule", `{"sessionId":"o-1","messageId":"m","scheduleAfter":"30 minutes"}`, "scheduleAfter"},
		{"negative schedule", `{"sessionId":"o-1","messageId":"m","scheduleAfter":"-1s"}`, "scheduleAfter"},
		{"bad send after", `{"sessionId":"o-1","messageId":"m","sendAfter":5}`, "sendAfter: want a string"},
		{"bad time to live", `{"sessionId":"o-1","messageId":"m","timeToLive":"soon"}`, "timeToLive"},
		{"properties not an object", `{"sessionId":"o-1","messageId":"m","applicationProperties":[1]}`, "applicationProperties: want an object"},
		{"one field twice", `{"sessionId":"o-1","messageId":"m","MessageId":"n"}`, `"MessageId" and "messageId" name the same field`},
		{"trailing data", `{"sessionId":"o-1","messageId":"m"} {}`, "after the JSON object"},
		{"session id too long", `{"sessionId":"` + strings.Repeat("s", 129) + `","messageId":"m"}`, "sessionId has 129 characters"},
		{"message id too long", `{"sessionId":"o-1","messageId":"` + strings.Repeat("m", 129) + `"}`, "messageId has 129 characters"},
		{"message too large", `{"sessionId":"o-1","messageId":"m","body":"` + big + `"}`, "over the Service Bus limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := `{"sessionId":"o-1","messageId":"ok"}` + "\n\n" + tt.in + "\n"
			_, err := Parse(strings.NewReader(in), "w.jsonl", nil)
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
	lines, err := ReadFile(path, nil)
	if err != nil || len(lines) != 2 || lines[1].MessageID != "b" || lines[1].Pos != path+":2" {
		t.Errorf("ReadFile: got %+v, %v", lines, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	if _, err := ReadFile(missing, nil); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("ReadFile of a missing file: got %v, want an error naming it", err)
	}
}

func TestLineMessage(t *testing.T) {
	l := Line{Subject: "S", SessionID: "o-1", MessageID: "m", ContentType: "application/json", Body: []byte("{}"),
		ApplicationProperties: map[string]any{"k": "v"}, CorrelationID: "c", TimeToLive: time.Hour}
	m := l.Message()
	m.Body[0] = 'x'
	m.ApplicationProperties["k"] = "changed"
	if string(l.Body) != "{}" || l.ApplicationProperties["k"] != "v" {
		t.Errorf("Message shares memory with the line")
	}
	if m.SessionID != "o-1" || m.MessageID != "m" || m.Subject != "S" || m.ContentType != "application/json" ||
		m.CorrelationID != "c" || m.TimeToLive != time.Hour {
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
			if l.ScheduleAfter != CheckAfter || l.MessageID != contract.TimeoutMessageID(l.SessionID, 1) {
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

// TestDemoEventTimes: the demo's events look like a real day's orders, all
// before the time it is played, so no occurredAt can be later than the
// updatedAt the handler writes; an order's events occur in sequence order.
func TestDemoEventTimes(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	lines := Demo(DemoOptions{Seed: 7, Orders: 300, Now: now})
	dayStart := now.Add(-DemoQuietEnd - DemoDay)
	bySeq := map[string]map[int64]time.Time{}
	var firstCreated, lastCreated time.Time
	for _, l := range lines {
		var u order.Update
		if json.Unmarshal(l.Body, &u) != nil || u.OccurredAt.IsZero() {
			continue // timeouts and the bad-JSON poison carry no time
		}
		if !u.OccurredAt.Before(now) || u.OccurredAt.Before(dayStart) {
			t.Errorf("%s: occurredAt %s, want within [%s, %s)", l.MessageID, u.OccurredAt, dayStart, now)
		}
		if u.OrderID != l.SessionID {
			continue // the mismatch poison
		}
		if bySeq[u.OrderID] == nil {
			bySeq[u.OrderID] = map[int64]time.Time{}
		}
		bySeq[u.OrderID][u.Sequence] = u.OccurredAt
		if u.Sequence == 1 {
			if firstCreated.IsZero() || u.OccurredAt.Before(firstCreated) {
				firstCreated = u.OccurredAt
			}
			if u.OccurredAt.After(lastCreated) {
				lastCreated = u.OccurredAt
			}
		}
	}
	for id, times := range bySeq {
		for seq, at := range times {
			if prev, ok := times[seq-1]; ok && at.Before(prev) {
				t.Errorf("%s: sequence %d occurred at %s, before sequence %d at %s", id, seq, at, seq-1, prev)
			}
		}
	}
	// Spread over the day, not bunched in a few minutes.
	if span := lastCreated.Sub(firstCreated); span < DemoDay*9/10 {
		t.Errorf("orders created over %s (%s to %s), want most of %s", span, firstCreated, lastCreated, DemoDay)
	}
}
