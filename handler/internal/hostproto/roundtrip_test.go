package hostproto_test

// The decoders against the development host's encoders (package hostenc):
// the fuzz targets that round-trip what they decode, and the benchmarks.
// An external test package, because hostenc imports hostproto.

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// The invocation times of the canonical invocations.
var (
	canonicalNow      = time.Date(2026, 11, 29, 10, 20, 31, 123456700, time.UTC)
	canonicalTimerNow = time.Date(2026, 11, 29, 10, 20, 0, 3456700, time.UTC)
)

// FuzzDecodeServiceBus: never panics; failures are *DecodeError; an
// accepted message encodes, and decodes back to itself with its times cut
// to what the host sends (whole seconds, 100 ns for SessionLockedUntil).
func FuzzDecodeServiceBus(f *testing.F) {
	hostproto.AddGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := hostproto.DecodeServiceBus(body, hostproto.ServiceBusBind)
		if err != nil {
			var de *hostproto.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is a %T, want *DecodeError", err, err)
			}
			return
		}
		e1, err := hostenc.EncodeServiceBus(m, hostproto.ServiceBusBind, "OrderStatus", canonicalNow)
		if err != nil {
			t.Fatalf("EncodeServiceBus(%+v): %v", m, err)
		}
		m2, err := hostproto.DecodeServiceBus(e1, hostproto.ServiceBusBind)
		if err != nil {
			t.Fatalf("decoding the encoding %s: %v", e1, err)
		}
		want := m
		want.EnqueuedTime = m.EnqueuedTime.Truncate(time.Second)
		want.ExpiresAt = m.ExpiresAt.Truncate(time.Second)
		want.SessionLockedUntil = m.SessionLockedUntil.Truncate(100 * time.Nanosecond)
		hostproto.AssertMessage(t, m2, want)
		e2, err := hostenc.EncodeServiceBus(m2, hostproto.ServiceBusBind, "OrderStatus", canonicalNow)
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("encoding is not stable:\n%s\n%s (%v)", e1, e2, err)
		}
	})
}

// FuzzDecodeTimer: as FuzzDecodeServiceBus, for timer invocations.
func FuzzDecodeTimer(f *testing.F) {
	hostproto.AddGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		ti, err := hostproto.DecodeTimer(body, hostproto.TimerBind)
		if err != nil {
			var de *hostproto.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is a %T, want *DecodeError", err, err)
			}
			return
		}
		e1, err := hostenc.EncodeTimer(ti, hostproto.TimerBind, "DeadLetterSweeper", canonicalTimerNow)
		if err != nil {
			t.Fatalf("EncodeTimer(%+v): %v", ti, err)
		}
		ti2, err := hostproto.DecodeTimer(e1, hostproto.TimerBind)
		if err != nil {
			t.Fatalf("decoding the encoding %s: %v", e1, err)
		}
		want := ti
		want.Last = ti.Last.Truncate(100 * time.Nanosecond)
		want.Next = ti.Next.Truncate(100 * time.Nanosecond)
		want.LastUpdated = ti.LastUpdated.Truncate(100 * time.Nanosecond)
		if ti2 != want {
			t.Fatalf("round trip of %+v gives %+v (encoded %s)", want, ti2, e1)
		}
	})
}

// everyField is the canonical message with every field set (hostenc's
// round-trip message "every field").
func everyField() hostproto.ServiceBusMessage {
	m := hostproto.CanonicalMessage()
	m.CorrelationID, m.ReplyTo, m.ReplyToSessionID, m.To, m.PartitionKey, m.DeadLetterSource =
		"corr-1", "replies", "r-1", "order-status", "o-1", "order-status"
	m.DeliveryCount, m.SequenceNumber = 1<<31-1, 1<<63-1
	m.SessionLockedUntil = m.SessionLockedUntil.Add(1234500)
	m.ApplicationProperties = map[string]any{
		"ReplayedFromDeadLetter": true, "ReplayCount": json.Number("3"), "Big": json.Number("9007199254740993"),
		"Reason": "MaxDeliveryCountExceeded", "Nothing": nil, "Nested": map[string]any{"a": []any{json.Number("1"), "x"}},
	}
	return m
}

func BenchmarkDecodeServiceBus(b *testing.B) {
	body, err := hostenc.EncodeServiceBus(everyField(), hostproto.ServiceBusBind, "OrderStatus", canonicalNow)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := hostproto.DecodeServiceBus(body, hostproto.ServiceBusBind); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeServiceBus(b *testing.B) {
	m := everyField()
	for b.Loop() {
		if _, err := hostenc.EncodeServiceBus(m, hostproto.ServiceBusBind, "OrderStatus", canonicalNow); err != nil {
			b.Fatal(err)
		}
	}
}
