package scenario_test

import (
	"bytes"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/publish"
)

// TestDemoUsesTheContractEncoder: every well-formed message of the demo is
// exactly what the producers' encoder (package publish) builds for it,
// properties and body bytes; only the deliberate poison differs.
func TestDemoUsesTheContractEncoder(t *testing.T) {
	var checked, timeouts int
	for _, l := range scenario.Demo(scenario.DemoOptions{Seed: 7, Orders: 120}) {
		var want publish.Message
		var err error
		switch l.Subject {
		case order.SubjectStatusChanged:
			u, perr := order.ParseUpdate(l.Body, l.SessionID)
			if perr != nil {
				continue // poison on purpose
			}
			want, err = publish.StatusMessage(u)
			checked++
		case order.SubjectPaymentTimeout:
			c, perr := order.ParseTimeoutCheck(l.Body, l.SessionID)
			if perr != nil || c.CreatedSequence < 1 {
				t.Fatalf("%s: %s names no Created (%v)", l.MessageID, l.Body, perr)
			}
			want, err = publish.TimeoutMessageFor(l.SessionID, c.CreatedSequence)
			timeouts++
		default:
			continue
		}
		if err != nil {
			t.Fatalf("%s: encoder: %v", l.MessageID, err)
		}
		got := l.Message()
		if l.SendAfter == scenario.LateReplayAfter {
			want.MessageID += ":late" // a late replay's own MessageId
		}
		if got.MessageID != want.MessageID || got.SessionID != want.SessionID || got.Subject != want.Subject ||
			got.ContentType != want.ContentType || !bytes.Equal(got.Body, want.Body) {
			t.Errorf("demo line %s:\n got %+v %s\nwant %+v %s", l.MessageID, got, got.Body, want, want.Body)
		}
	}
	if checked < 300 || timeouts < 2 {
		t.Errorf("checked %d status changes and %d timeouts, want at least 300 and 2", checked, timeouts)
	}
}
