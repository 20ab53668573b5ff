package deadletters

import (
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// replay --id of an entry another actor claimed a moment ago (a replay
// under way) sends nothing and leaves the claim as it is: exit 1, one line
// that names the claimant.
func TestReplayByIDLeavesAFreshClaimAlone(t *testing.T) {
	f := newFixture(t)
	e := f.put(dlstore.DLQ, 7, "o-1:2", "o-1", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
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

// replay --id with edits: --dry-run shows the message as it would be sent,
// properties included, and sends nothing; an edit the message cannot take
// exits 2 in one line naming its flag, before anything is written; the
// replay sends the edited message (a body from stdin with --body -), and
// find --order shows the audit entry saying what changed.
func TestReplayWithEdits(t *testing.T) {
	f := newFixture(t)
	e := f.putProps(map[string]any{"tenant": "t-1", "attempt": int64(1), "debug": "on"})
	edits := []string{"--set-property", "tenant=t-2", "--set-property", "attempt=2", "--remove-property", "debug"}
	r := f.record()
	res := f.must(append([]string{"replay", "--id", e.ID, "--dry-run"}, edits...)...)
	for _, want := range []string{"would replay " + e.ID, "o-1:2:replay:1", "property tenant", "t-2 (string)", "2 (int64)", `"status":"Paid"`} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "debug") {
		t.Errorf("dry run still shows the removed property:\n%s", res.stdout)
	}
	ls := lines(t, f.must(append([]string{"replay", "--id", e.ID, "--dry-run", "--json"}, edits...)...).stdout)
	if m, _ := ls[0]["message"].(map[string]any); len(ls) != 1 || m["properties"].(map[string]any)["tenant"] != "t-2" {
		t.Errorf("dry run --json: %v", ls)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set-property", "tenant"}, "--set-property"},
		{[]string{"--set-property", "attempt=two"}, "--set-property"},
		{[]string{"--set-property", "ReplayCount=3"}, "--set-property"},
		{[]string{"--remove-property", "absent"}, "--remove-property"},
		{[]string{"--subject", "NoSuchSubject"}, "--subject"},
		{[]string{"--body", "-", "--set-property", "tenant=t-3"}, "--body, --set-property: deadletter: the message would be parked again"},
	} {
		f.stdin = strings.NewReader("not json")
		res := f.run(append([]string{"replay", "--id", e.ID}, tc.args...)...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("replay %q: exit %d, stderr %q; want 2 naming %q", tc.args, res.code, res.stderr, tc.want)
		}
		oneLineErr(t, res.stderr)
	}
	if res := f.run("replay", "--state", "open", "--set-property", "tenant=x", "--yes"); res.code != exitUsage || !strings.Contains(res.stderr, "--set-property needs --id") {
		t.Errorf("edits with a filter: exit %d, %q", res.code, res.stderr)
	}
	if w := r.written(); len(w) != 0 {
		t.Errorf("dry runs and refused edits wrote: %v", w)
	}

	f.stdin = strings.NewReader(string(updateBody("o-1", "Shipped", 2)))
	f.must(append([]string{"replay", "--id", e.ID, "--body", "-"}, edits...)...)
	sent := f.peek(broker.Source{Queue: f.q.Queue})
	if len(sent) != 1 || !strings.Contains(string(sent[0].Body), "Shipped") || sent[0].ApplicationProperties["tenant"] != "t-2" ||
		sent[0].ApplicationProperties["attempt"] != int64(2) || sent[0].ApplicationProperties["debug"] != nil {
		t.Fatalf("sent %+v", sent)
	}
	text := f.must("find", "--order", "o-1", "--json").stdout
	for _, want := range []string{`"actor":"cli:`, `replayed by hand, edited: set attempt=\"2\"; set tenant=\"t-2\"; removed debug; body replaced (`} {
		if !strings.Contains(text, want) {
			t.Errorf("find --order lacks %s:\n%s", want, text)
		}
	}
}
