package deadletter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
)

func dead(reason string, props map[string]any) broker.Received {
	p := map[string]any{broker.PropertyDeadLetterReason: reason}
	for k, v := range props {
		p[k] = v
	}
	return broker.Received{Message: broker.Message{MessageID: "o-1:2", SessionID: "o-1", ApplicationProperties: p},
		SequenceNumber: 7, DeadLetterReason: reason}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := deadletter.Policy{Cooldown: 10 * time.Minute, MaxReplays: 3}
	tests := []struct {
		name string
		k    deadletter.Kind
		m    broker.Received
		seen time.Time
		want deadletter.Action
	}{
		{"dlq max delivery never seen waits", deadletter.DLQ, dead("MaxDeliveryCountExceeded", nil), time.Time{}, deadletter.ActionWait},
		{"dlq max delivery within the cool-down waits", deadletter.DLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-9 * time.Minute), deadletter.ActionWait},
		{"dlq max delivery past the cool-down replays", deadletter.DLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-10 * time.Minute), deadletter.ActionReplay},
		{"dlq expired past the cool-down replays", deadletter.DLQ, dead("TTLExpiredException", nil), now.Add(-time.Hour), deadletter.ActionReplay},
		{"dlq replayed twice replays again", deadletter.DLQ, dead("MaxDeliveryCountExceeded", map[string]any{"ReplayCount": int64(2)}), now.Add(-time.Hour), deadletter.ActionReplay},
		{"dlq replay cap reached is left", deadletter.DLQ, dead("MaxDeliveryCountExceeded", map[string]any{"ReplayCount": int64(3)}), now.Add(-time.Hour), deadletter.ActionLeave},
		{"dlq replay cap reached and never seen is left", deadletter.DLQ, dead("TTLExpiredException", map[string]any{"ReplayCount": int64(5)}), time.Time{}, deadletter.ActionLeave},
		{"dlq invalid transition is left", deadletter.DLQ, dead("InvalidTransition", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"dlq unknown reason is left", deadletter.DLQ, dead("SomethingElse", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"dlq without reason is left", deadletter.DLQ, dead("", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"poison invalid payload is archived", deadletter.Poison, dead("InvalidPayload", nil), time.Time{}, deadletter.ActionArchive},
		{"poison unknown subject is archived", deadletter.Poison, dead("UnknownSubject", nil), time.Time{}, deadletter.ActionArchive},
		{"poison invalid transition is left", deadletter.Poison, dead("InvalidTransition", nil), time.Time{}, deadletter.ActionLeave},
		{"poison max delivery is left (not ours to replay)", deadletter.Poison, dead("MaxDeliveryCountExceeded", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"poison-dlq anything is untouched", deadletter.PoisonDLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-time.Hour), deadletter.ActionUntouched},
		{"poison-dlq invalid payload is untouched", deadletter.PoisonDLQ, dead("InvalidPayload", nil), time.Time{}, deadletter.ActionUntouched},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Decide(tt.k, tt.m, tt.seen, now)
			if got.Action != tt.want {
				t.Errorf("Decide = %s (%s), want %s", got.Action, got.Why, tt.want)
			}
			if got.Why == "" {
				t.Error("Decide gave no reason")
			}
		})
	}
	t.Run("cool-down zero replays at first sight", func(t *testing.T) {
		p := deadletter.Policy{Cooldown: 0, MaxReplays: 3}
		if got := p.Decide(deadletter.DLQ, dead("MaxDeliveryCountExceeded", nil), now, now); got.Action != deadletter.ActionReplay {
			t.Errorf("Decide = %s, want replayed", got.Action)
		}
	})
	t.Run("max replays zero never replays", func(t *testing.T) {
		p := deadletter.Policy{Cooldown: time.Minute, MaxReplays: 0}
		if got := p.Decide(deadletter.DLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-time.Hour), now); got.Action != deadletter.ActionLeave {
			t.Errorf("Decide = %s, want left", got.Action)
		}
	})
}

func TestReplayMessage(t *testing.T) {
	t.Run("dead-lettered: properties stripped, id and counters set", func(t *testing.T) {
		m := dead("MaxDeliveryCountExceeded", map[string]any{
			broker.PropertyDeadLetterErrorDescription: "5 deliveries", "tenant": "t-1", "n": int64(4)})
		m.Subject, m.ContentType, m.CorrelationID, m.Body = "OrderStatusChanged", "application/json", "c-1", []byte(`{"x":1}`)
		got := deadletter.ReplayMessage(m, nil)
		if got.MessageID != "o-1:2:replay:1" || got.SessionID != "o-1" || got.Subject != "OrderStatusChanged" ||
			got.ContentType != "application/json" || got.CorrelationID != "c-1" || string(got.Body) != `{"x":1}` {
			t.Errorf("replay = %+v", got)
		}
		want := map[string]any{"tenant": "t-1", "n": int64(4), "ReplayedFromDeadLetter": "MaxDeliveryCountExceeded", "ReplayCount": int64(1)}
		if len(got.ApplicationProperties) != len(want) {
			t.Errorf("properties = %v, want %v", got.ApplicationProperties, want)
		}
		for k, v := range want {
			if got.ApplicationProperties[k] != v {
				t.Errorf("property %s = %#v, want %#v", k, got.ApplicationProperties[k], v)
			}
		}
		if _, ok := m.ApplicationProperties["ReplayCount"]; ok {
			t.Error("ReplayMessage changed the original's properties")
		}
	})
	t.Run("a replay replayed again counts on from its original id", func(t *testing.T) {
		m := dead("MaxDeliveryCountExceeded", map[string]any{"ReplayCount": int64(1), "ReplayedFromDeadLetter": "MaxDeliveryCountExceeded"})
		m.MessageID = "o-1:2:replay:1"
		if got := deadletter.ReplayMessage(m, nil); got.MessageID != "o-1:2:replay:2" || got.ApplicationProperties["ReplayCount"] != int64(2) {
			t.Errorf("second replay id %s count %v, want o-1:2:replay:2 and 2", got.MessageID, got.ApplicationProperties["ReplayCount"])
		}
	})
	t.Run("a parked copy goes back to its original session and subject", func(t *testing.T) {
		m := dead("InvalidTransition", map[string]any{"OriginalMessageId": "o-9:4", "OriginalSessionId": "o-9",
			"OriginalSubject": "OrderStatusChanged", "OriginalSequenceNumber": int64(12), "DeliveryCount": int64(1)})
		m.MessageID, m.SessionID = "o-9:4:parked", ""
		got := deadletter.ReplayMessage(m, []byte(`{"fixed":true}`))
		if got.MessageID != "o-9:4:replay:1" || got.SessionID != "o-9" || got.Subject != "OrderStatusChanged" || string(got.Body) != `{"fixed":true}` {
			t.Errorf("replay of a parked copy = %+v", got)
		}
		for _, k := range []string{"OriginalMessageId", "OriginalSessionId", "OriginalSubject", "OriginalSequenceNumber", "DeliveryCount", "DeadLetterReason"} {
			if _, ok := got.ApplicationProperties[k]; ok {
				t.Errorf("replay kept property %s", k)
			}
		}
	})
	t.Run("a long id is hashed to fit 128 characters, stably", func(t *testing.T) {
		long := strings.Repeat("x", 125)
		a, b := deadletter.ReplayID(long, 1), deadletter.ReplayID(long, 1)
		if a != b || len(a) > 128 || !strings.HasSuffix(a, ":replay:1") {
			t.Errorf("ReplayID of a long id = %q (again %q)", a, b)
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		msg  broker.Message
		ok   bool
	}{
		{"good update", broker.Message{SessionID: "o-1", Subject: "OrderStatusChanged", Body: []byte(`{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}`)}, true},
		{"good timeout", broker.Message{SessionID: "o-1", Subject: "PaymentTimeoutCheck", Body: []byte(`{"orderId":"o-1"}`)}, true},
		{"not JSON", broker.Message{SessionID: "o-1", Subject: "OrderStatusChanged", Body: []byte(`nope`)}, false},
		{"session mismatch", broker.Message{SessionID: "o-2", Subject: "OrderStatusChanged", Body: []byte(`{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}`)}, false},
		{"unknown subject", broker.Message{SessionID: "o-1", Subject: "Other", Body: []byte(`{}`)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := deadletter.Validate(tt.msg); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestReplayKeepsTheTrace: a replay is the next hop of the original's
// trace: the same trace id, a span of its own, linked to what it replays.
func TestReplayKeepsTheTrace(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	got := deadletter.ReplayMessage(dead("MaxDeliveryCountExceeded", map[string]any{"traceparent": tp, "Diagnostic-Id": tp}), nil)
	next, _ := got.ApplicationProperties["traceparent"].(string)
	if !strings.HasPrefix(next, "00-0af7651916cd43dd8448eb211c80319c-") || next == tp || got.ApplicationProperties["Diagnostic-Id"] != next {
		t.Errorf("replay traceparent %q, Diagnostic-Id %v: want the trace 0af7...319c with a new span on both", next, got.ApplicationProperties["Diagnostic-Id"])
	}
	if got.ApplicationProperties["TraceLinkedFrom"] != tp {
		t.Errorf("TraceLinkedFrom = %v, want %s", got.ApplicationProperties["TraceLinkedFrom"], tp)
	}
}
