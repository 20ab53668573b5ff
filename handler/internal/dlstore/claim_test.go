package dlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlmem"
)

// TestNeedsNoAudit: a claim and its release to any state a replay may be
// claimed from (archived included) go without an audit entry; every
// action does not.
func TestNeedsNoAudit(t *testing.T) {
	for _, c := range []struct {
		from, to dlstore.State
		want     bool
	}{
		{dlstore.Open, dlstore.ReplayDue, true},
		{dlstore.Archived, dlstore.ReplayDue, true},
		{dlstore.ReplayDue, dlstore.Open, true},
		{dlstore.ReplayDue, dlstore.Left, true},
		{dlstore.ReplayDue, dlstore.Archived, true},
		{dlstore.ReplayDue, dlstore.Replayed, false},
		{dlstore.ReplayDue, dlstore.Discarded, false},
		{dlstore.Open, dlstore.Archived, false},
		{dlstore.Archived, dlstore.Open, false},
	} {
		if got := dlstore.NeedsNoAudit(c.from, c.to); got != c.want {
			t.Errorf("NeedsNoAudit(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

// TestClaimRoundTrip: what Claim.String writes ParseClaim reads back; any
// other ClaimedBy is a plain claim from open.
func TestClaimRoundTrip(t *testing.T) {
	for _, c := range []dlstore.Claim{
		{By: "sweeper#1a2b3c4d", From: dlstore.Open},
		{By: "cli:ana#1a2b3c4d", From: dlstore.Archived, Corrected: true},
		{By: "cli:a (b)#00000000", From: dlstore.Left, Corrected: true},
	} {
		if got := dlstore.ParseClaim(c.String()); got != c {
			t.Errorf("ParseClaim(%q) = %+v, want %+v", c.String(), got, c)
		}
	}
	for _, s := range []string{"sweeper-a", "x (from replayed)", "x (from nowhere, corrected)", "x (from open"} {
		if got := dlstore.ParseClaim(s); got != (dlstore.Claim{By: s, From: dlstore.Open}) {
			t.Errorf("ParseClaim(%q) = %+v, want a plain claim by it from open", s, got)
		}
	}
}

// TestReleaseToArchivedWritesNoAudit: a claim of an archived entry is
// released back to archived with no audit entry (dlmem; the conformance
// suite has no case for it).
func TestReleaseToArchivedWritesNoAudit(t *testing.T) {
	ctx := context.Background()
	s := dlmem.New()
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	e := dlstore.Entry{ID: "poison-1", Source: dlstore.Poison, MessageID: "o-1:1:parked", OrderID: "o-1", StoredAt: at}
	if _, err := s.Put(ctx, e, "sweeper"); err != nil {
		t.Fatal(err)
	}
	step := func(to dlstore.State, audit *dlstore.AuditEntry, claim string) dlstore.Entry {
		t.Helper()
		cur, err := s.Get(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Minute)
		next, err := s.Transition(ctx, cur, dlstore.Transition{To: to, At: at, Audit: audit, ClaimedBy: claim})
		if err != nil {
			t.Fatalf("%s -> %s: %v", cur.State, to, err)
		}
		return next
	}
	step(dlstore.Archived, &dlstore.AuditEntry{Action: "archived", Actor: "sweeper"}, "")
	claim := dlstore.Claim{By: "cli:ana#1a2b3c4d", From: dlstore.Archived, Corrected: true}.String()
	if got := step(dlstore.ReplayDue, nil, claim); got.ClaimedBy != claim {
		t.Errorf("ClaimedBy = %q, want %q kept verbatim", got.ClaimedBy, claim)
	}
	if got := step(dlstore.Archived, nil, ""); got.State != dlstore.Archived || got.ClaimedBy != "" || got.Actions != 2 {
		t.Errorf("released = %s claimed by %q, %d actions; want archived, no claim, 2 actions", got.State, got.ClaimedBy, got.Actions)
	}
}
