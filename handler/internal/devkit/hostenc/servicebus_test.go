package hostenc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// roundTripMessages are messages whose every field survives encoding
// (times in whole seconds, SessionLockedUntil in 100 ns).
func roundTripMessages() map[string]hostproto.ServiceBusMessage {
	all := canonicalMessage()
	all.CorrelationID, all.ReplyTo, all.ReplyToSessionID, all.To, all.PartitionKey, all.DeadLetterSource =
		"corr-1", "replies", "r-1", "order-status", "o-1", "order-status"
	all.DeliveryCount, all.SequenceNumber = 1<<31-1, 1<<63-1
	all.SessionLockedUntil = all.SessionLockedUntil.Add(1234500)
	all.ApplicationProperties = map[string]any{
		"ReplayedFromDeadLetter": true, "ReplayCount": json.Number("3"), "Big": json.Number("9007199254740993"),
		"Reason": "MaxDeliveryCountExceeded", "Nothing": nil, "Nested": map[string]any{"a": []any{json.Number("1"), "x"}},
	}
	odd := canonicalMessage()
	odd.SessionID, odd.MessageID, odd.Subject = `o-é<&>"q"\`, "o-1:\u2028:\t", "null"
	odd.Body = []byte{0, 0xff, 0xfe}
	noSession := canonicalMessage()
	noSession.SessionID, noSession.SessionLockedUntil = "", time.Time{}
	return map[string]hostproto.ServiceBusMessage{
		"canonical":     canonicalMessage(),
		"every field":   all,
		"odd strings":   odd,
		"no session":    noSession,
		"empty":         {},
		"no TTL":        {Body: []byte("x"), ExpiresAt: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), EnqueuedTime: time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)},
		"lock, no sess": {SessionLockedUntil: time.Date(2026, 1, 1, 0, 0, 0, 100, time.UTC)},
	}
}

func TestEncodeServiceBusRoundTrip(t *testing.T) {
	for name, m := range roundTripMessages() {
		t.Run(name, func(t *testing.T) {
			b, err := EncodeServiceBus(m, serviceBusBind, "OrderStatus", canonicalNow)
			if err != nil {
				t.Fatalf("EncodeServiceBus: %v", err)
			}
			got, err := hostproto.DecodeServiceBus(b, serviceBusBind)
			if err != nil {
				t.Fatalf("hostproto.DecodeServiceBus(%s): %v", b, err)
			}
			assertMessage(t, got, m)
		})
	}
}

// TestEncodeServiceBusCutsTimes: the host sends the binding data's times to
// the second (and nested times to .NET's 100 ns ticks), so the encoder cuts
// them as well.
func TestEncodeServiceBusCutsTimes(t *testing.T) {
	m := canonicalMessage()
	m.EnqueuedTime = m.EnqueuedTime.Add(999_999_999)
	m.ExpiresAt = m.ExpiresAt.In(time.FixedZone("UTC+2", 7200)).Add(500 * time.Millisecond)
	m.SessionLockedUntil = m.SessionLockedUntil.Add(123_456_789)
	b, err := EncodeServiceBus(m, serviceBusBind, "OrderStatus", canonicalNow)
	if err != nil {
		t.Fatal(err)
	}
	got, err := hostproto.DecodeServiceBus(b, serviceBusBind)
	if err != nil {
		t.Fatal(err)
	}
	want := canonicalMessage()
	want.SessionLockedUntil = want.SessionLockedUntil.Add(123_456_700)
	assertMessage(t, got, want)
	for _, s := range []string{`"EnqueuedTimeUtc":"2026-11-29T10:20:30"`, `"ExpiresAt":"2026-12-06T10:20:30+00:00"`, `"SessionLockedUntil":"2026-11-29T10:21:30.1234567+00:00"`} {
		if !bytes.Contains(b, []byte(s)) {
			t.Errorf("encoding %s lacks %s", b, s)
		}
	}
}

// TestEncodeServiceBusKeys checks the key set: value types always, strings
// only when non-empty, Subject twice, properties twice.
func TestEncodeServiceBusKeys(t *testing.T) {
	keys := func(m hostproto.ServiceBusMessage) []string {
		b, err := EncodeServiceBus(m, serviceBusBind, "OrderStatus", canonicalNow)
		if err != nil {
			t.Fatal(err)
		}
		var inv hostproto.Invocation
		if err := json.Unmarshal(b, &inv); err != nil {
			t.Fatal(err)
		}
		if len(inv.Data) != 1 || inv.Data[serviceBusBind] == nil {
			t.Errorf("Data = %s, want only %q", b, serviceBusBind)
		}
		var ks []string
		for k := range inv.Metadata {
			ks = append(ks, k)
		}
		return sortedStrings(ks)
	}
	always := []string{"ApplicationProperties", "DeliveryCount", "EnqueuedTime", "EnqueuedTimeUtc", "ExpiresAt", "ExpiresAtUtc", "SequenceNumber", "UserProperties", "sys"}
	if got := keys(hostproto.ServiceBusMessage{}); !reflect.DeepEqual(got, sortedStrings(always)) {
		t.Errorf("keys of an empty message = %v, want %v", got, always)
	}
	want := sortedStrings(append(always, "ContentType", "LockToken", "MessageId", "SessionActions", "SessionId", "Subject", "Label"))
	if got := keys(canonicalMessage()); !reflect.DeepEqual(got, want) {
		t.Errorf("keys of the canonical message = %v, want %v", got, want)
	}
}

func TestEncodeServiceBusIsDeterministic(t *testing.T) {
	m := roundTripMessages()["every field"]
	a, err := EncodeServiceBus(m, serviceBusBind, "OrderStatus", canonicalNow)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeServiceBus(m, serviceBusBind, "OrderStatus", canonicalNow)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("two encodings differ:\n%s\n%s", a, b)
	}
	m.DeliveryCount++
	c, err := EncodeServiceBus(m, serviceBusBind, "OrderStatus", canonicalNow)
	if err != nil {
		t.Fatal(err)
	}
	if guid(t, a) == guid(t, c) {
		t.Errorf("redelivery has the same sys.RandGuid %s, want a new one", guid(t, a))
	}
}

func guid(t *testing.T, b []byte) string {
	t.Helper()
	var v struct {
		Metadata struct {
			Sys sysData `json:"sys"`
		}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.Metadata.Sys.RandGuid
}

func TestEncodeServiceBusErrors(t *testing.T) {
	tooLate := canonicalMessage()
	tooLate.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	tooEarly := canonicalMessage()
	tooEarly.EnqueuedTime = time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC)
	badLock := canonicalMessage()
	badLock.SessionLockedUntil = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	badProps := canonicalMessage()
	badProps.ApplicationProperties = map[string]any{"f": func() {}}
	tests := []struct {
		name          string
		m             hostproto.ServiceBusMessage
		binding, fn   string
		now           time.Time
		wantSubstring string
	}{
		{"empty binding", canonicalMessage(), "", "OrderStatus", canonicalNow, "binding"},
		{"empty function", canonicalMessage(), serviceBusBind, "", canonicalNow, "function"},
		{"ExpiresAt after 9999", tooLate, serviceBusBind, "OrderStatus", canonicalNow, "ExpiresAt"},
		{"EnqueuedTime before year 1", tooEarly, serviceBusBind, "OrderStatus", canonicalNow, "EnqueuedTime"},
		{"SessionLockedUntil before year 1", badLock, serviceBusBind, "OrderStatus", canonicalNow, "SessionLockedUntil"},
		{"now after 9999", canonicalMessage(), serviceBusBind, "OrderStatus", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "UtcNow"},
		{"property not JSON", badProps, serviceBusBind, "OrderStatus", canonicalNow, "ApplicationProperties"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeServiceBus(tt.m, tt.binding, tt.fn, tt.now)
			if err == nil {
				t.Fatalf("EncodeServiceBus = %s, want an error", b)
			}
			if !strings.Contains(err.Error(), tt.wantSubstring) || !strings.HasPrefix(err.Error(), "hostenc: ") {
				t.Errorf("error %q, want one starting with hostenc: and naming %s", err, tt.wantSubstring)
			}
		})
	}
}
