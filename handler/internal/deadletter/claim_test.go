package deadletter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// sendFailing fails the next n sends to the order-status queue.
type sendFailing struct {
	deadletter.Broker
	n *atomic.Int64
}

var errSend = errors.New("injected send failure")

func (b sendFailing) Send(ctx context.Context, q string, m broker.Message) error {
	if b.n.Add(-1) >= 0 {
		return errSend
	}
	return b.Broker.Send(ctx, q, m)
}

// corrected is a body the contract accepts for order o-1.
var corrected = []byte(`{"orderId":"o-1","status":"Created","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}`)

// archivedParked parks o-1:1 with a reason the policy archives, and runs a
// sweep that archives it.
func archivedParked(t *testing.T, f *fixture) {
	t.Helper()
	f.park(t, "o-1:1", "InvalidPayload")
	f.run(t, f.sweeper(deadletter.Options{}))
	if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.Archived {
		t.Fatalf("entry is %s after the sweep, want archived", e.State)
	}
}

// TestAFailedReplayByHandIsNeverFinishedLater: a corrected replay of an
// archived entry whose send fails gives the entry back archived, and no
// later run sends anything for it.
func TestAFailedReplayByHandIsNeverFinishedLater(t *testing.T) {
	f := newFixture(t)
	archivedParked(t, f)
	var n atomic.Int64
	n.Store(1)
	s := deadletter.New(sendFailing{f.mb, &n}, f.store, f.options(deadletter.Options{}))
	if _, err := s.Act(f.ctx, deadletter.ActionReplay, "o-1:1", corrected, "cli:ana"); !errors.Is(err, errSend) {
		t.Fatalf("replay with the send failing = %v, want the send's error", err)
	}
	if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.Archived || e.ClaimedBy != "" {
		t.Errorf("entry after the failed replay: %s claimed by %q; want archived, not claimed", e.State, e.ClaimedBy)
	}
	f.clk.Advance(2 * deadletter.DefaultClaimTimeout)
	f.run(t, f.sweeper(deadletter.Options{}))
	if q := f.queued(t); len(q) != 0 {
		t.Errorf("after the claim timed out, %d messages were sent (%v); want none: the operator saw the replay fail", len(q), q)
	}
	if a := f.actions(t); a["replayed"]+a["resubmitted"] != 0 {
		t.Errorf("audit entries %v; want no replay recorded", a)
	}
}

// TestAClaimOfACorrectedReplayCarriesTheCorrection: a CLI gone between
// its claim and its send (the release lost as well) leaves a claim that
// the timer finishes with the corrected body, recorded as the by-hand
// action.
func TestAClaimOfACorrectedReplayCarriesTheCorrection(t *testing.T) {
	f := newFixture(t)
	archivedParked(t, f)
	var sends, releases atomic.Int64
	sends.Store(1)
	releases.Store(1)
	s := deadletter.New(sendFailing{f.mb, &sends}, recordFailing{f.store, dlstore.Archived, &releases}, f.options(deadletter.Options{}))
	if _, err := s.Act(f.ctx, deadletter.ActionReplay, "o-1:1", corrected, "cli:ana"); err == nil {
		t.Fatal("replay with the send failing succeeded")
	}
	if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.ReplayDue {
		t.Fatalf("entry is %s, want replay-due (claimed, not released)", e.State)
	}
	f.clk.Advance(2 * deadletter.DefaultClaimTimeout)
	f.run(t, f.sweeper(deadletter.Options{}))
	q := f.queued(t)
	if len(q) > 1 {
		t.Fatalf("%d messages sent, want at most one", len(q))
	}
	for id, m := range q {
		if string(m.Body) != string(corrected) {
			t.Errorf("the timer sent %s with body %s; want the corrected body %s", id, m.Body, corrected)
		}
	}
	h := f.history(t, "o-1")
	last := h[len(h)-1]
	switch e := f.byMessage(t)["o-1:1:parked"]; {
	case len(q) == 1 && (e.State != dlstore.Replayed || last.Action != "resubmitted"):
		t.Errorf("after the timer: entry %s, last audit %s by %s; want replayed, recorded as resubmitted", e.State, last.Action, last.Actor)
	case len(q) == 0 && e.State != dlstore.Archived:
		t.Errorf("after the timer: entry %s and nothing sent; want it given back archived", e.State)
	}
}
