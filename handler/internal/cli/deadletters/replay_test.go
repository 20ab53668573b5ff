package deadletters

import (
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// replay --id of an entry another actor claimed a moment ago (a replay
// under way) sends nothing and leaves the claim as it is: exit 1, one line
// that names the claimant.
func TestReplayByIDLeavesAFreshClaimAlone(t *testing.T) {
	f := newFixture(t)
	e := f.put(deadletter.DLQ, 7, "o-1:2", "o-1", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	claimedAt := f.clk.Now()
	claimed, err := f.st.Transition(f.ctx, f.entry(e.ID), dlstore.Transition{To: dlstore.ReplayDue, At: claimedAt, ClaimedBy: "sweeper#0a1b2c3d"})
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Minute) // well within the claim's timeout
	r := f.record()
	for _, id := range []string{e.ID, e.MessageID} {
		res := f.run("replay", "--id", id)
		if res.code != exitFailure {
			t.Errorf("replay --id %s of a freshly claimed entry: exit %d, want 1 (stdout %q, stderr %q)", id, res.code, res.stdout, res.stderr)
		}
		oneLineErr(t, res.stderr)
		if !strings.Contains(res.stderr, "sweeper#0a1b2c3d") {
			t.Errorf("stderr %q does not name the claimant", res.stderr)
		}
	}
	for _, w := range r.written() {
		if strings.HasPrefix(w, "send ") || strings.HasPrefix(w, "transition ") {
			t.Errorf("replay of a freshly claimed entry wrote %q (all: %v)", w, r.written())
		}
	}
	if sent := f.peek(broker.Source{Queue: f.q.Queue}); len(sent) != 0 {
		t.Errorf("sent %d messages, want none", len(sent))
	}
	got := f.entry(e.ID)
	if got.State != dlstore.ReplayDue || got.ClaimedBy != claimed.ClaimedBy || !got.ClaimedAt.Equal(claimedAt) || got.ReplayCount != 0 {
		t.Errorf("entry %s claimed by %q at %s, %d replays; want the claim untouched (replay-due, %q at %s, 0 replays)",
			got.State, got.ClaimedBy, got.ClaimedAt, got.ReplayCount, claimed.ClaimedBy, claimedAt)
	}
}
