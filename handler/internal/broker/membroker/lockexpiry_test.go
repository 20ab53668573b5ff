package membroker_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
)

// TestSessionLockExpiriesAreSummarised: a receiver that dies holding 30
// sessions (a kill in orderstatus-dev dev) leaves 30 locks to run out within one
// lock duration. The log says so in two lines, the first expiry and one
// summary of the other 29, not in 30.
func TestSessionLockExpiriesAreSummarised(t *testing.T) {
	clk := clock.Scaled(1) // real time: only AdvanceTo moves it far
	var logs bytes.Buffer
	b := membroker.New(&membroker.Options{Clock: clk, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	o := membroker.DefaultQueueOptions()
	o.RequiresSession, o.LockDuration = true, time.Minute
	if err := b.CreateQueue(orders, o); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const sessions = 30
	for i := range sessions {
		if err := b.Send(ctx, orders, broker.Message{MessageID: fmt.Sprintf("o-%d:1", i), SessionID: fmt.Sprintf("o-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range sessions {
		if _, err := b.AcceptNextSession(ctx, orders); err != nil {
			t.Fatal(err)
		}
	}
	// The receiver is gone: no renewal. Past the locks, then past the
	// summary's window, something looks at the queue.
	start := clk.Now()
	clk.AdvanceTo(start.Add(o.LockDuration + time.Second))
	if st := b.Stats(orders); st.LockedSessions != 0 {
		t.Fatalf("LockedSessions = %d after the lock duration, want 0", st.LockedSessions)
	}
	clk.AdvanceTo(start.Add(3*o.LockDuration + time.Second))
	b.Stats(orders)

	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if strings.Contains(rec["msg"].(string), "session lock") {
			recs = append(recs, rec)
		}
	}
	if len(recs) != 2 {
		t.Fatalf("%d session lock lines, want 2 (the first, then a summary):\n%s", len(recs), logs.String())
	}
	if recs[0]["session_id"] == nil {
		t.Errorf("first line %v: want the session id", recs[0])
	}
	if recs[1]["count"] != float64(sessions-1) {
		t.Errorf("summary count = %v, want %d", recs[1]["count"], sessions-1)
	}
	if ids, _ := recs[1]["session_ids"].([]any); len(ids) != 5 {
		t.Errorf("summary session_ids = %v, want the first 5", recs[1]["session_ids"])
	}
}

// TestLoneSessionLockExpiryIsLoggedAtOnce: one expiry is one line, at once.
func TestLoneSessionLockExpiryIsLoggedAtOnce(t *testing.T) {
	clk := clock.Scaled(1)
	var logs bytes.Buffer
	b := membroker.New(&membroker.Options{Clock: clk, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	o := membroker.DefaultQueueOptions()
	o.RequiresSession, o.LockDuration = true, time.Minute
	if err := b.CreateQueue(orders, o); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(t.Context(), orders, broker.Message{MessageID: "o-1:1", SessionID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcceptNextSession(t.Context(), orders); err != nil {
		t.Fatal(err)
	}
	clk.AdvanceTo(clk.Now().Add(o.LockDuration + time.Second))
	b.Stats(orders)
	if n := strings.Count(logs.String(), "session lock expired"); n != 1 {
		t.Errorf("%d lines, want 1:\n%s", n, logs.String())
	}
	clk.AdvanceTo(clk.Now().Add(5 * o.LockDuration))
	b.Stats(orders)
	if n := strings.Count(logs.String(), "session lock"); n != 1 {
		t.Errorf("a lone expiry got a summary too:\n%s", logs.String())
	}
}
