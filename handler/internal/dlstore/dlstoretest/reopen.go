package dlstoretest

import (
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// testClaimOfArchived: claiming an archived entry reopens it (in
// List(NotClosed()) at once), releasing it closes it, neither audited.
func testClaimOfArchived(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	e := entry(dlstore.Poison, 1, "o-1", 0)
	mustPut(t, s, e)
	mustTransition(t, s, e.ID, audited(dlstore.Archived, 5, "archived"))
	mustTransition(t, s, e.ID, dlstore.Transition{To: dlstore.ReplayDue, At: at(9), ClaimedBy: "cli#1"})
	es, err := s.List(ctx, dlstore.NotClosed())
	if err != nil || len(es) != 1 || es[0].State != dlstore.ReplayDue {
		t.Fatalf("List(not closed) with the archived entry claimed = %+v, %v; want it, replay-due", es, err)
	}
	released := mustTransition(t, s, e.ID, dlstore.Transition{To: dlstore.Archived, At: at(10)})
	if released.State != dlstore.Archived || released.ClaimedBy != "" || released.Actions != 2 {
		t.Errorf("released = %s claimed by %q, %d actions; want archived, not claimed, 2 actions", released.State, released.ClaimedBy, released.Actions)
	}
	if es, err := s.List(ctx, dlstore.NotClosed()); err != nil || len(es) != 0 {
		t.Errorf("List(not closed) after the release = %d, %v; want none", len(es), err)
	}
	h, err := s.History(ctx, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(h); got != "stored/open,archived/archived" {
		t.Errorf("History = %s, want stored/open,archived/archived (a claim and its release are no actions)", got)
	}
}
