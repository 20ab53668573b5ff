package sbbroker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error // nil: no sentinel
	}{
		{"lock lost", &azservicebus.Error{Code: azservicebus.CodeLockLost}, broker.ErrLockLost},
		{"not found", &azservicebus.Error{Code: azservicebus.CodeNotFound}, broker.ErrNotFound},
		{"timeout", &azservicebus.Error{Code: azservicebus.CodeTimeout}, broker.ErrTransient},
		{"connection lost", &azservicebus.Error{Code: azservicebus.CodeConnectionLost}, broker.ErrTransient},
		{"closed", &azservicebus.Error{Code: azservicebus.CodeClosed}, broker.ErrTransient},
		{"unauthorized", &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}, broker.ErrTransient},
		{"too large", fmt.Errorf("send: %w", azservicebus.ErrMessageTooLarge), broker.ErrInvalid},
		{"no session id", &amqp.Error{Condition: amqp.ErrCondNotAllowed}, broker.ErrInvalid},
		{"no such queue", &amqp.Error{Condition: amqp.ErrCondNotFound}, broker.ErrNotFound},
		{"server busy", &amqp.Error{Condition: "com.microsoft:server-busy"}, broker.ErrTransient},
		{"deadline", fmt.Errorf("receive: %w", context.DeadlineExceeded), broker.ErrTransient},
		{"cancelled", context.Canceled, nil},
		{"unknown", errors.New("boom"), nil},
	}
	sentinels := []error{broker.ErrLockLost, broker.ErrNotFound, broker.ErrTransient, broker.ErrInvalid}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			if !errors.Is(got, tc.err) {
				t.Errorf("classify(%v) = %v, which lost the original error", tc.err, got)
			}
			for _, s := range sentinels {
				if is, want := errors.Is(got, s), s == tc.want; is != want {
					t.Errorf("classify(%v) = %v: errors.Is %v = %v, want %v", tc.err, got, s, is, want)
				}
			}
		})
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
	once := classify(&azservicebus.Error{Code: azservicebus.CodeTimeout})
	if twice := classify(once); twice != once {
		t.Errorf("classify of a classified error wrapped it again: %v", twice)
	}
}

func TestToSB(t *testing.T) {
	props := map[string]any{"n": 7, "s": "x"}
	body := []byte("body")
	m := toSB(broker.Message{
		MessageID: "o-1:2", SessionID: "o-1", Subject: "OrderStatusChanged", ContentType: "application/json",
		Body: body, ApplicationProperties: props, TimeToLive: time.Hour,
	})
	if *m.MessageID != "o-1:2" || *m.SessionID != "o-1" || *m.Subject != "OrderStatusChanged" ||
		*m.ContentType != "application/json" || *m.TimeToLive != time.Hour || m.CorrelationID != nil {
		t.Errorf("toSB fields wrong: %+v", m)
	}
	if got := m.ApplicationProperties["n"]; got != int64(7) {
		t.Errorf("property n = %#v, want int64(7)", got)
	}
	m.ApplicationProperties["s"] = "changed"
	m.Body[0] = 'X'
	if props["s"] != "x" || string(body) != "body" {
		t.Error("toSB shares the property map or the body with the caller")
	}
	if anon := toSB(broker.Message{}); anon.MessageID == nil || *anon.MessageID == "" || anon.SessionID != nil {
		t.Errorf("toSB without MessageID: MessageID %v SessionID %v, want a fresh id and no session", anon.MessageID, anon.SessionID)
	}
}

func TestFromSB(t *testing.T) {
	seq, enq := int64(42), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reason := broker.ReasonMaxDeliveryCountExceeded
	rm := &azservicebus.ReceivedMessage{
		MessageID:             "m",
		SessionID:             ptr("o-1"),
		Body:                  []byte("b"),
		ApplicationProperties: map[string]any{"i": int32(3), broker.PropertyDeadLetterReason: reason},
		SequenceNumber:        &seq,
		DeliveryCount:         2,
		EnqueuedTime:          &enq,
		DeadLetterReason:      &reason,
		LockToken:             [16]byte{0x01, 0x02, 15: 0xff},
		State:                 azservicebus.MessageStateScheduled,
	}
	r := fromSB(rm)
	if r.MessageID != "m" || r.SessionID != "o-1" || r.SequenceNumber != 42 || r.DeliveryCount != 2 ||
		!r.EnqueuedTime.Equal(enq) || r.DeadLetterReason != reason || !r.Scheduled {
		t.Errorf("fromSB = %+v", r)
	}
	if want := "01020000-0000-0000-0000-0000000000ff"; r.LockToken != want {
		t.Errorf("LockToken = %q, want %q", r.LockToken, want)
	}
	if got := r.ApplicationProperties["i"]; got != int64(3) {
		t.Errorf("property i = %#v, want int64(3)", got)
	}
	r.ApplicationProperties["i"] = "changed"
	r.Body[0] = 'X'
	if rm.ApplicationProperties["i"] != int32(3) || string(rm.Body) != "b" {
		t.Error("fromSB shares the property map or the body with the SDK message")
	}
	if empty := fromSB(&azservicebus.ReceivedMessage{}); empty.LockToken != "" || empty.SequenceNumber != 0 {
		t.Errorf("fromSB of an empty message = %+v", empty)
	}
}

func TestTrackBounded(t *testing.T) {
	b := newBroker(nil, options(&Options{MaxTracked: 2}))
	src := broker.Source{Queue: "q"}
	for _, tok := range []string{"a", "b", "c"} {
		b.track(&trackedMessage{token: tok, src: src, msg: &azservicebus.ReceivedMessage{MessageID: tok}})
	}
	if _, ok := b.lookup(src, "a"); ok {
		t.Error("oldest token still tracked past MaxTracked")
	}
	if _, ok := b.lookup(src, "c"); !ok {
		t.Error("newest token not tracked")
	}
	if _, ok := b.lookup(broker.Source{Queue: "q", DeadLetter: true}, "c"); ok {
		t.Error("token found for another source")
	}
	err := b.Complete(context.Background(), src, broker.Received{LockToken: "a"})
	if !errors.Is(err, broker.ErrLockLost) {
		t.Errorf("Complete of a forgotten message = %v, want ErrLockLost", err)
	}
}

func ptr[T any](v T) *T { return &v }
