package dltable_test

import (
	"errors"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
)

// archivedEntry stores an entry and archives it, returning it as read.
func archivedEntry(t *testing.T, s *dltable.Store) dlstore.Entry {
	t.Helper()
	ctx := t.Context()
	e := entry("o-1", 1)
	if _, err := s.Put(ctx, e, "a"); err != nil {
		t.Fatal(err)
	}
	read, err := s.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, read, dlstore.Transition{To: dlstore.Archived, At: read.StoredAt.Add(time.Minute),
		Audit: &dlstore.AuditEntry{Action: "archived"}}); err != nil {
		t.Fatal(err)
	}
	if read, err = s.Get(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	return read
}

// TestCrashInReopen: a crash between the writes of a change from a closed
// state to one not closed (a restore, a claim of an archived entry) never
// leaves an entry that is not closed out of List(NotClosed()); a crash
// before the entry's write leaves an index row that says more than the
// truth, which a Get removes.
func TestCrashInReopen(t *testing.T) {
	for _, tt := range []struct {
		name string
		t    dlstore.Transition
	}{
		{"restore", dlstore.Transition{To: dlstore.Open, Audit: &dlstore.AuditEntry{Action: "restored"}}},
		{"claim", dlstore.Transition{To: dlstore.ReplayDue, ClaimedBy: "cli#1"}},
	} {
		for _, point := range []string{dltable.PointTransitionBeforeWrite, dltable.PointTransitionAfterEntry} {
			t.Run(tt.name+"/"+point, func(t *testing.T) {
				s := newTable(t, &dltable.Options{IndexGrace: time.Nanosecond})
				ctx := t.Context()
				read := archivedEntry(t, s)
				dltable.SetCrash(s, crashAt(point))
				tr := tt.t
				tr.At = read.UpdatedAt.Add(time.Minute)
				if _, err := s.Transition(ctx, read, tr); !errors.Is(err, errCrash) {
					t.Fatalf("Transition with a crash: %v, want the crash", err)
				}
				if point == dltable.PointTransitionAfterEntry {
					// The entry is not closed now: listed before any Get.
					if listed := ids(t, s, dlstore.NotClosed()); listed[read.ID] == "" {
						t.Errorf("List(not closed) after a crash after the entry's write = %v; want %s listed", listed, read.ID)
					}
				}
				got, err := s.Get(ctx, read.ID)
				if err != nil {
					t.Fatal(err)
				}
				listed := ids(t, s, dlstore.NotClosed())
				if !got.State.Closed() && listed[read.ID] != got.State {
					t.Errorf("List(not closed) after the crash and a Get = %v; want %s listed as %s", listed, read.ID, got.State)
				}
				if got.State.Closed() && len(listed) != 0 {
					t.Errorf("List(not closed) after the crash and a Get = %v; want none (the entry is %s)", listed, got.State)
				}
			})
		}
	}
}
