package dltable_test

import (
	"errors"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
)

// TestReopenAfterAnOldFailedReopen: the index row left by a reopening that
// crashed before its transaction, once older than the grace, is not taken
// for stale while a later reopening of the entry is under way: a Get
// between that reopening's index write and its transaction, then a crash
// after its transaction, still leave the entry listed.
func TestReopenAfterAnOldFailedReopen(t *testing.T) {
	s := newTable(t, &dltable.Options{IndexGrace: time.Second})
	ctx := t.Context()
	read := archivedEntry(t, s)
	tr := dlstore.Transition{To: dlstore.Open, At: read.UpdatedAt.Add(time.Minute), Audit: &dlstore.AuditEntry{Action: "restored"}}
	dltable.SetCrash(s, crashAt(dltable.PointTransitionBeforeWrite))
	if _, err := s.Transition(ctx, read, tr); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	fired := false
	dltable.SetCrash(s, func(p string) error {
		switch {
		case p == dltable.PointTransitionBeforeWrite && !fired:
			fired = true
			_, err := s.Get(ctx, read.ID) // another actor's read, meanwhile
			return err
		case p == dltable.PointTransitionAfterEntry:
			return errCrash
		}
		return nil
	})
	if _, err := s.Transition(ctx, read, tr); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	if listed := ids(t, s, dlstore.NotClosed()); listed[read.ID] == "" {
		t.Errorf("restored entry not listed: %v", listed)
	}
}
