package deadletter_test

import (
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

// TestReplayStripsEveryRetryProperty: a replay drops every property a
// rescheduled copy or the settle step carries (reschedule.Properties), so
// the replayed message starts a fresh retry window.
func TestReplayStripsEveryRetryProperty(t *testing.T) {
	props := map[string]any{"Keep": "yes"}
	for _, k := range reschedule.Properties {
		props[k] = int64(1)
	}
	e := dlstore.Entry{ID: "dlq-1", Source: dlstore.DLQ, MessageID: "m-1", SessionID: "o-1", Body: []byte(`{}`),
		Properties: props, StoredAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	msg := deadletter.ReplayMessage(e, nil)
	for _, k := range reschedule.Properties {
		if _, ok := msg.ApplicationProperties[k]; ok {
			t.Errorf("the replay keeps %s; every reschedule.Properties name is stripped", k)
		}
	}
	if msg.ApplicationProperties["Keep"] != "yes" {
		t.Errorf("the replay dropped an application property of the producer's: %v", msg.ApplicationProperties)
	}
}
