package devhost

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// goldenDir holds the real host's payloads, shared with hostproto.
const goldenDir = "../../hostproto/testdata"

// TestEncodingMatchesGolden proves that the development host invokes the
// handler with exactly the payload of the real host: for each golden
// Service Bus invocation, the message it describes, taken through the
// broker's Received and the host's encoding, gives the golden JSON back
// (compared as JSON values; sys.RandGuid is random in the host and left
// out).
func TestEncodingMatchesGolden(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"servicebus_session.json",
		"servicebus_redelivery.json",
		"servicebus_application_properties.json",
	} {
		t.Run(name, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join(goldenDir, name))
			if err != nil {
				t.Fatal(err)
			}
			m, err := hostproto.DecodeServiceBus(golden, "message")
			if err != nil {
				t.Fatalf("decode golden: %v", err)
			}
			var inv struct {
				Metadata struct {
					Sys struct{ UtcNow string } `json:"sys"`
				}
			}
			if err := json.Unmarshal(golden, &inv); err != nil {
				t.Fatal(err)
			}
			now, err := time.Parse(time.RFC3339Nano, inv.Metadata.Sys.UtcNow)
			if err != nil {
				t.Fatal(err)
			}
			props := map[string]any{}
			for k, v := range m.ApplicationProperties {
				if n, ok := v.(json.Number); ok {
					v, _ = n.Int64() // the broker keeps integers as int64
				}
				props[k] = v
			}
			r := broker.Received{
				Message: broker.Message{
					MessageID: m.MessageID, SessionID: m.SessionID, Subject: m.Subject, ContentType: m.ContentType,
					CorrelationID: m.CorrelationID, Body: m.Body, ApplicationProperties: props,
				},
				SequenceNumber: m.SequenceNumber, DeliveryCount: m.DeliveryCount,
				EnqueuedTime: m.EnqueuedTime, ExpiresAt: m.ExpiresAt, LockToken: m.LockToken,
			}
			got, err := hostenc.EncodeServiceBus(hostMessage(r, m.SessionLockedUntil, clock.Identity()), "message", "OrderStatus", now)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if g, w := normalise(t, got), normalise(t, golden); !reflect.DeepEqual(g, w) {
				gj, _ := json.MarshalIndent(g, "", "  ")
				wj, _ := json.MarshalIndent(w, "", "  ")
				t.Errorf("the development host's invocation differs from the host's:\n got %s\nwant %s", gj, wj)
			}
		})
	}
}

func normalise(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if md, ok := v["Metadata"].(map[string]any); ok {
		if sys, ok := md["sys"].(map[string]any); ok {
			delete(sys, "RandGuid")
		}
	}
	return v
}
