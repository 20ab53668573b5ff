package dltable_test

import (
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
)

// TestPurgeRacingARestore: an entry restored after the purge read it (with
// more audit rows than one transaction deletes) survives the purge with
// its whole history: nothing is deleted unless the entry's conditional
// delete holds.
func TestPurgeRacingARestore(t *testing.T) {
	s := newTable(t, nil)
	ctx := t.Context()
	e := entry("o-1", 1)
	if _, err := s.Put(ctx, e, "a"); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := cur.StoredAt
	step := func(to dlstore.State, action string) {
		t.Helper()
		at = at.Add(time.Second)
		if cur, err = s.Transition(ctx, cur, dlstore.Transition{To: to, At: at, Audit: &dlstore.AuditEntry{Action: action}}); err != nil {
			t.Fatalf("Transition to %s: %v", to, err)
		}
	}
	for cur.Actions < 120 {
		step(dlstore.Archived, "archived")
		step(dlstore.Open, "restored")
	}
	step(dlstore.Archived, "archived")
	want := cur.Actions
	fired := false
	dltable.SetCrash(s, func(p string) error {
		if p == dltable.PointPurgeBeforeDelete && !fired {
			fired = true
			read, err := s.Get(ctx, e.ID)
			if err != nil {
				return err
			}
			at = at.Add(time.Second)
			_, err = s.Transition(ctx, read, dlstore.Transition{To: dlstore.Open, At: at, Audit: &dlstore.AuditEntry{Action: "restored"}})
			return err
		}
		return nil
	})
	n, err := s.Purge(ctx, at.Add(time.Hour), 10)
	if err != nil || n != 0 || !fired {
		t.Fatalf("Purge racing a restore = %d, %v (restore ran: %v); want 0, nil, true", n, err, fired)
	}
	got, err := s.Get(ctx, e.ID)
	if err != nil || got.State != dlstore.Open {
		t.Fatalf("Get after the purge = %s, %v; want the restored entry", got.State, err)
	}
	if h, err := s.History(ctx, e.OrderID); err != nil || len(h) != want+1 {
		t.Errorf("History after the purge: %d audit entries, %v; want all %d", len(h), err, want+1)
	}
	dltable.SetCrash(s, nil)
	cur = got
	step(dlstore.Archived, "archived")
	if n, err := s.Purge(ctx, at.Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1, nil", n, err)
	}
	if h, err := s.History(ctx, e.OrderID); err != nil || len(h) != 0 {
		t.Errorf("History after the purge: %d audit entries, %v; want none", len(h), err)
	}
}
