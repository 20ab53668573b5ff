package parking

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

type fakeSender struct {
	sent  []broker.Message
	queue string
	err   error
}

func (f *fakeSender) Send(_ context.Context, queue string, m broker.Message) error {
	if f.err != nil {
		return f.err
	}
	f.queue = queue
	f.sent = append(f.sent, m)
	return nil
}

func original() Original {
	return Original{
		MessageID: "o-1:2", SessionID: "o-1", SequenceNumber: 17, Subject: "OrderStatusChanged",
		ContentType: "application/json", EnqueuedTime: time.Date(2026, 11, 29, 10, 20, 30, 0, time.UTC),
		DeliveryCount: 2, Body: []byte(`{not json`), ApplicationProperties: map[string]any{"tenant": "t1", PropReason: "old"},
	}
}

func TestParkSendsTheContractMessage(t *testing.T) {
	f := &fakeSender{}
	o := original()
	if err := New(f, "order-status-poison").Park(context.Background(), o, "InvalidPayload", "body is not valid JSON"); err != nil {
		t.Fatalf("Park: %v", err)
	}
	if f.queue != "order-status-poison" || len(f.sent) != 1 {
		t.Fatalf("sent %d messages to %q, want 1 to order-status-poison", len(f.sent), f.queue)
	}
	m := f.sent[0]
	if m.MessageID != "o-1:2:parked" || m.SessionID != "" || string(m.Body) != `{not json` || m.Subject != o.Subject || m.ContentType != o.ContentType {
		t.Errorf("message = %+v", m)
	}
	want := map[string]any{
		PropReason: "InvalidPayload", PropDescription: "body is not valid JSON", PropOriginalMessageID: "o-1:2",
		PropOriginalSessionID: "o-1", PropOriginalSequenceNumber: int64(17), PropOriginalSubject: "OrderStatusChanged",
		PropOriginalEnqueuedTime: o.EnqueuedTime, PropDeliveryCount: int64(2), "tenant": "t1",
	}
	for k, v := range want {
		if got := m.ApplicationProperties[k]; got != v {
			t.Errorf("property %s = %#v, want %#v", k, got, v)
		}
	}
	if o.ApplicationProperties[PropReason] != "old" {
		t.Error("Park changed the original's properties")
	}
}

func TestParkErrors(t *testing.T) {
	if err := New(nil, "q").Park(context.Background(), original(), "r", "d"); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("nil sender: err = %v, want ErrNotConfigured", err)
	}
	f := &fakeSender{err: broker.ErrTransient}
	err := New(f, "q").Park(context.Background(), original(), "r", "d")
	if !errors.Is(err, broker.ErrTransient) || !strings.Contains(err.Error(), "o-1:2") {
		t.Errorf("err = %v, want it to wrap ErrTransient and name the message", err)
	}
}

func TestDescriptionIsBounded(t *testing.T) {
	m := Message(original(), "r", strings.Repeat("é", 5000))
	d := m.ApplicationProperties[PropDescription].(string)
	if n := len([]rune(d)); n != MaxDescription {
		t.Errorf("description has %d characters, want %d", n, MaxDescription)
	}
}

func TestPropertyValuesAreBrokerTypes(t *testing.T) {
	o := original()
	o.ApplicationProperties = map[string]any{
		"int": json.Number("42"), "float": json.Number("1.5"), "nested": map[string]any{"a": 1.0}, "list": []any{"x"},
		"bool": true, "str": "s", "f64int": 7.0,
	}
	props := Message(o, "r", "d").ApplicationProperties
	want := map[string]any{"int": int64(42), "float": 1.5, "nested": `{"a":1}`, "list": `["x"]`, "bool": true, "str": "s", "f64int": int64(7)}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("%s = %#v (%T), want %#v", k, props[k], props[k], v)
		}
	}
}

func TestParkedID(t *testing.T) {
	long := strings.Repeat("x", 122)
	tests := []struct {
		name string
		o    Original
		want string
	}{
		{"message id", Original{MessageID: "o-1:2", SequenceNumber: 9}, "o-1:2:parked"},
		{"no message id", Original{SequenceNumber: 9}, "seq-9:parked"},
		{"longest kept", Original{MessageID: strings.Repeat("x", 121)}, strings.Repeat("x", 121) + ":parked"},
		{"too long is hashed", Original{MessageID: long}, "sha256-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParkedID(tt.o)
			if !strings.HasPrefix(got, tt.want) || len(got) > MaxMessageIDLength {
				t.Errorf("ParkedID = %q (%d chars), want prefix %q and at most %d chars", got, len(got), tt.want, MaxMessageIDLength)
			}
			if got != ParkedID(tt.o) {
				t.Error("ParkedID is not stable")
			}
		})
	}
	if ParkedID(Original{SequenceNumber: 1}) == ParkedID(Original{SequenceNumber: 2}) {
		t.Error("two originals without MessageId share a parked id")
	}
	if ParkedID(Original{MessageID: long}) == ParkedID(Original{MessageID: long + "y"}) {
		t.Error("two long ids share a parked id")
	}
}

// A rescheduled copy carries the MessageId first sent in OriginalMessageId;
// parking keeps it instead of naming the copy.
func TestMessageKeepsAnExistingOriginalMessageID(t *testing.T) {
	o := Original{MessageID: "o-1:2:retry:7", SessionID: "o-1", ApplicationProperties: map[string]any{PropOriginalMessageID: "o-1:2"}}
	m := Message(o, "RetryWindowExceeded", "store down")
	if got := m.ApplicationProperties[PropOriginalMessageID]; got != "o-1:2" {
		t.Errorf("OriginalMessageId = %v, want o-1:2", got)
	}
	if m.MessageID != "o-1:2:retry:7:parked" {
		t.Errorf("MessageId = %s, want o-1:2:retry:7:parked", m.MessageID)
	}
}

// A parked rescheduled copy keeps when its original was first enqueued;
// a first-time message gets its own EnqueuedTime.
func TestMessageKeepsTheFirstEnqueuedTime(t *testing.T) {
	first := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	copied := Original{MessageID: "o-1:2:retry:7", SessionID: "o-1", EnqueuedTime: first.Add(time.Hour),
		ApplicationProperties: map[string]any{PropOriginalEnqueuedTime: first}}
	if got := Message(copied, "RetryWindowExceeded", "store down").ApplicationProperties[PropOriginalEnqueuedTime]; got != first {
		t.Errorf("a copy parked: %s = %v, want the first %s", PropOriginalEnqueuedTime, got, first)
	}
	orig := Original{MessageID: "o-1:2", SessionID: "o-1", EnqueuedTime: first}
	if got := Message(orig, "InvalidTransition", "x").ApplicationProperties[PropOriginalEnqueuedTime]; got != first {
		t.Errorf("an original parked: %s = %v, want its EnqueuedTime %s", PropOriginalEnqueuedTime, got, first)
	}
}

// TestParkedCopyKeepsTheTrace: the parked copy is the next hop of the
// original's trace, linked to it.
func TestParkedCopyKeepsTheTrace(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	o := Original{MessageID: "o-1:2", SessionID: "o-1", ApplicationProperties: map[string]any{"Diagnostic-Id": tp}}
	m := Message(o, "InvalidPayload", "d")
	next, _ := m.ApplicationProperties["traceparent"].(string)
	if !strings.HasPrefix(next, "00-0af7651916cd43dd8448eb211c80319c-") || next == tp || m.ApplicationProperties["TraceLinkedFrom"] != tp {
		t.Errorf("parked copy: traceparent %q, linked from %v; want the original's trace with a span of its own, linked to %s",
			next, m.ApplicationProperties["TraceLinkedFrom"], tp)
	}
	if o.ApplicationProperties["Diagnostic-Id"] != tp || len(o.ApplicationProperties) != 1 {
		t.Errorf("the original's properties changed: %v", o.ApplicationProperties)
	}
}
