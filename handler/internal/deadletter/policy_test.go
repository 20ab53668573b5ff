package deadletter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

func dead(reason string, props map[string]any) broker.Received {
	p := map[string]any{broker.PropertyDeadLetterReason: reason}
	for k, v := range props {
		p[k] = v
	}
	return broker.Received{Message: broker.Message{MessageID: "o-1:2", SessionID: "o-1", ApplicationProperties: p},
		SequenceNumber: 7, DeadLetterReason: reason}
}

// entry is the store entry of m from source k, stored at storedAt.
func entry(k dlstore.Source, m broker.Received, storedAt time.Time) dlstore.Entry {
	return deadletter.EntryOf(k, m, storedAt)
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := deadletter.Policy{Cooldown: 10 * time.Minute, MaxReplays: 3}
	tests := []struct {
		name   string
		k      dlstore.Source
		m      broker.Received
		stored time.Time
		want   deadletter.Action
	}{
		{"dlq max delivery stored now waits", dlstore.DLQ, dead("MaxDeliveryCountExceeded", nil), now, deadletter.ActionWait},
		{"dlq max delivery within the cool-down waits", dlstore.DLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-9 * time.Minute), deadletter.ActionWait},
		{"dlq max delivery past the cool-down replays", dlstore.DLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-10 * time.Minute), deadletter.ActionReplay},
		{"dlq expired past the cool-down replays", dlstore.DLQ, dead("TTLExpiredException", nil), now.Add(-time.Hour), deadletter.ActionReplay},
		{"dlq replayed twice replays again", dlstore.DLQ, dead("MaxDeliveryCountExceeded", map[string]any{"ReplayCount": int64(2)}), now.Add(-time.Hour), deadletter.ActionReplay},
		{"dlq replay cap reached is left", dlstore.DLQ, dead("MaxDeliveryCountExceeded", map[string]any{"ReplayCount": int64(3)}), now.Add(-time.Hour), deadletter.ActionLeave},
		{"dlq replay cap reached and stored now is left", dlstore.DLQ, dead("TTLExpiredException", map[string]any{"ReplayCount": int64(5)}), now, deadletter.ActionLeave},
		{"dlq invalid transition is left", dlstore.DLQ, dead("InvalidTransition", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"dlq unknown reason is left", dlstore.DLQ, dead("SomethingElse", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"dlq without reason is left", dlstore.DLQ, dead("", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"poison invalid payload is archived", dlstore.Poison, dead("InvalidPayload", nil), now, deadletter.ActionArchive},
		{"poison unknown subject is archived", dlstore.Poison, dead("UnknownSubject", nil), now, deadletter.ActionArchive},
		{"poison invalid transition is left", dlstore.Poison, dead("InvalidTransition", nil), now, deadletter.ActionLeave},
		{"poison retry window exceeded waits for its cool-down", dlstore.Poison, dead("RetryWindowExceeded", nil), now, deadletter.ActionWait},
		{"poison retry window exceeded replays after it", dlstore.Poison, dead("RetryWindowExceeded", nil), now.Add(-time.Hour), deadletter.ActionReplay},
		{"poison max delivery is left (not ours to replay)", dlstore.Poison, dead("MaxDeliveryCountExceeded", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"poison order never created is left", dlstore.Poison, dead("OrderNeverCreated", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"poison-dlq anything is left", dlstore.PoisonDLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-time.Hour), deadletter.ActionLeave},
		{"poison-dlq invalid payload is left", dlstore.PoisonDLQ, dead("InvalidPayload", nil), now, deadletter.ActionLeave},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Decide(entry(tt.k, tt.m, tt.stored), now)
			if got.Action != tt.want {
				t.Errorf("Decide = %s (%s), want %s", got.Action, got.Why, tt.want)
			}
			if got.Why == "" {
				t.Error("Decide gave no reason")
			}
		})
	}
	t.Run("closed or left entries get no action", func(t *testing.T) {
		for _, st := range []dlstore.State{dlstore.Left, dlstore.Replayed, dlstore.Archived, dlstore.Discarded} {
			e := entry(dlstore.DLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-time.Hour))
			e.State = st
			if got := p.Decide(e, now); got.Action != deadletter.ActionNone {
				t.Errorf("Decide of a %s entry = %s, want none", st, got.Action)
			}
		}
	})
	t.Run("cool-down zero replays at once", func(t *testing.T) {
		p := deadletter.Policy{Cooldown: 0, MaxReplays: 3}
		if got := p.Decide(entry(dlstore.DLQ, dead("MaxDeliveryCountExceeded", nil), now), now); got.Action != deadletter.ActionReplay {
			t.Errorf("Decide = %s, want replayed", got.Action)
		}
	})
	t.Run("max replays zero never replays", func(t *testing.T) {
		p := deadletter.Policy{Cooldown: time.Minute, MaxReplays: 0}
		if got := p.Decide(entry(dlstore.DLQ, dead("MaxDeliveryCountExceeded", nil), now.Add(-time.Hour)), now); got.Action != deadletter.ActionLeave {
			t.Errorf("Decide = %s, want left", got.Action)
		}
	})
}

func TestReplayMessage(t *testing.T) {
	t.Run("dead-lettered: properties stripped, id and counters set", func(t *testing.T) {
		m := dead("MaxDeliveryCountExceeded", map[string]any{
			broker.PropertyDeadLetterErrorDescription: "5 deliveries", "tenant": "t-1", "n": int64(4)})
		m.Subject, m.ContentType, m.CorrelationID, m.Body = "OrderStatusChanged", "application/json", "c-1", []byte(`{"x":1}`)
		got := deadletter.ReplayMessage(entry(dlstore.DLQ, m, time.Now()), nil)
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
		if got := deadletter.ReplayMessage(entry(dlstore.DLQ, m, time.Now()), nil); got.MessageID != "o-1:2:replay:2" || got.ApplicationProperties["ReplayCount"] != int64(2) {
			t.Errorf("second replay id %s count %v, want o-1:2:replay:2 and 2", got.MessageID, got.ApplicationProperties["ReplayCount"])
		}
	})
	t.Run("a parked copy goes back to its original session and subject", func(t *testing.T) {
		m := dead("InvalidTransition", map[string]any{"OriginalMessageId": "o-9:4", "OriginalSessionId": "o-9",
			"OriginalSubject": "OrderStatusChanged", "OriginalSequenceNumber": int64(12), "DeliveryCount": int64(1)})
		m.MessageID, m.SessionID = "o-9:4:parked", ""
		got := deadletter.ReplayMessage(entry(dlstore.Poison, m, time.Now()), []byte(`{"fixed":true}`))
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

// A replay carries when the message first sent was enqueued: the
// parked copy's OriginalEnqueuedTime, else the dead letter's own.
func TestReplayKeepsTheFirstEnqueuedTime(t *testing.T) {
	first := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	parked := dead("RetryWindowExceeded", map[string]any{"OriginalEnqueuedTime": first})
	parked.EnqueuedTime = first.Add(time.Hour)
	if got := deadletter.ReplayMessage(entry(dlstore.Poison, parked, time.Now()), nil).ApplicationProperties["OriginalEnqueuedTime"]; got != first {
		t.Errorf("a parked copy's replay: OriginalEnqueuedTime %v, want %s", got, first)
	}
	plain := dead("MaxDeliveryCountExceeded", nil)
	plain.EnqueuedTime = first
	if got := deadletter.ReplayMessage(entry(dlstore.DLQ, plain, time.Now()), nil).ApplicationProperties["OriginalEnqueuedTime"]; got != first {
		t.Errorf("a dead letter's replay: OriginalEnqueuedTime %v, want its EnqueuedTime %s", got, first)
	}
}

func TestReplayOfARetryStartsAFreshWindow(t *testing.T) {
	m := dead("RetryWindowExceeded", map[string]any{"OriginalMessageId": "o-3:1", "OriginalSessionId": "o-3",
		"OriginalSubject": "OrderStatusChanged", "RetryAttempt": int64(9), "FirstFailureTime": time.Now(), "LastError": "refused"})
	m.MessageID, m.SessionID = "o-3:1:parked", ""
	got := deadletter.ReplayMessage(entry(dlstore.Poison, m, time.Now()), nil)
	if got.MessageID != "o-3:1:replay:1" || got.SessionID != "o-3" {
		t.Errorf("replay = %s session %q, want o-3:1:replay:1 in o-3", got.MessageID, got.SessionID)
	}
	for _, k := range []string{"RetryAttempt", "FirstFailureTime", "LastError"} {
		if _, ok := got.ApplicationProperties[k]; ok {
			t.Errorf("replay kept retry property %s: it would not start a fresh retry window", k)
		}
	}
}

func TestDerivedIDsStayWithin128(t *testing.T) {
	order := strings.Repeat("o", 128)
	id := strings.Repeat("m", 128)
	for _, tt := range []struct {
		name string
		m    broker.Received
	}{
		{"128-character MessageId", broker.Received{Message: broker.Message{MessageID: id, SessionID: order}}},
		{"parked copy of a 128-character MessageId", broker.Received{Message: broker.Message{MessageID: "sha256-x:parked",
			ApplicationProperties: map[string]any{"OriginalMessageId": id, "OriginalSessionId": order}}}},
		{"replay 3 of a 128-character MessageId", broker.Received{Message: broker.Message{MessageID: deadletter.ReplayID(id, 2), SessionID: order,
			ApplicationProperties: map[string]any{"ReplayCount": int64(2)}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := entry(dlstore.DLQ, tt.m, time.Now())
			got := deadletter.ReplayMessage(e, nil)
			if len(got.MessageID) > 128 || got.SessionID != order {
				t.Errorf("replay id %q (%d characters) session %d characters; want at most 128 and the order", got.MessageID, len(got.MessageID), len(got.SessionID))
			}
			if again := deadletter.ReplayMessage(e, nil); again.MessageID != got.MessageID {
				t.Errorf("replay id not stable: %q then %q", got.MessageID, again.MessageID)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	a := deadletter.Fingerprint("InvalidTransition", `order "o-1" is Delivered at sequence 7 (2026-12-01T10:00:00Z); Paid 8 refused`)
	b := deadletter.Fingerprint("InvalidTransition", `order "o-9" is Delivered at sequence 12 (2026-12-02T11:30:00.5Z); Paid 13 refused`)
	c := deadletter.Fingerprint("InvalidTransition", `order "o-9" is Cancelled at sequence 12 (2026-12-02T11:30:00Z); Paid 13 refused`)
	d := deadletter.Fingerprint("InvalidPayload", `order "o-1" is Delivered at sequence 7 (2026-12-01T10:00:00Z); Paid 8 refused`)
	if a != b {
		t.Errorf("same failure, other order, numbers and time: %s and %s, want one group", a, b)
	}
	if a == c || a == d {
		t.Errorf("another failure (%s) or reason (%s) shares group %s", c, d, a)
	}
	if got := deadletter.Template("id 3f2b1c4e-aaaa-bbbb-cccc-0123456789ab, n 42"); got != "id <guid>, n <n>" {
		t.Errorf("Template = %q", got)
	}
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

func TestEntryOfKeepsPropertiesInTheStoresTypes(t *testing.T) {
	m := dead("MaxDeliveryCountExceeded", map[string]any{"i32": int32(7), "f32": float32(1.5), "u": uint64(9), "s": "x", "b": true})
	e := deadletter.EntryOf(dlstore.DLQ, m, time.Now())
	for k, want := range map[string]any{"i32": int64(7), "f32": float64(1.5), "u": "9", "s": "x", "b": true} {
		if got := e.Properties[k]; got != want {
			t.Errorf("property %s = %#v, want %#v", k, got, want)
		}
	}
	if _, ok := m.ApplicationProperties["i32"].(int32); !ok {
		t.Error("EntryOf changed the message's own properties")
	}
}

// TestReplayKeepsTheTrace: a replay is the next hop of the original's
// trace: the same trace id, a span of its own, linked to what it replays.
func TestReplayKeepsTheTrace(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	got := deadletter.ReplayMessage(entry(dlstore.DLQ, dead("MaxDeliveryCountExceeded", map[string]any{"traceparent": tp, "Diagnostic-Id": tp}), time.Now()), nil)
	next, _ := got.ApplicationProperties["traceparent"].(string)
	if !strings.HasPrefix(next, "00-0af7651916cd43dd8448eb211c80319c-") || next == tp || got.ApplicationProperties["Diagnostic-Id"] != next {
		t.Errorf("replay traceparent %q, Diagnostic-Id %v: want the trace 0af7...319c with a new span on both", next, got.ApplicationProperties["Diagnostic-Id"])
	}
	if got.ApplicationProperties["TraceLinkedFrom"] != tp {
		t.Errorf("TraceLinkedFrom = %v, want %s", got.ApplicationProperties["TraceLinkedFrom"], tp)
	}
}
