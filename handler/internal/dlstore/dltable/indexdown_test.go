package dltable_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
)

// indexWritesDown answers every write to the index partition with 503
// while down is set, and passes every other request on to Azurite.
type indexWritesDown struct{ down atomic.Bool }

func (f *indexWritesDown) Do(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && f.down.Load() {
		hit := strings.Contains(req.URL.Path, "index~notclosed")
		if !hit && req.Body != nil {
			b, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(b))
			hit = !strings.Contains(req.URL.Path, "$batch") && bytes.Contains(b, []byte("index~notclosed"))
		}
		if hit {
			return serviceError(req, http.StatusServiceUnavailable, "ServerBusy", "The server is busy."), nil
		}
	}
	return http.DefaultClient.Do(req)
}

// TestReopenWithTheIndexDown: a change from a closed state to one not
// closed (a restore, a claim of an archived entry) while the index cannot
// be written either fails whole (the entry stays closed) or leaves the
// entry listed by List(NotClosed()); never an entry not closed that is
// not listed.
func TestReopenWithTheIndexDown(t *testing.T) {
	for _, tt := range []struct {
		name string
		t    dlstore.Transition
	}{
		{"restore", dlstore.Transition{To: dlstore.Open, Audit: &dlstore.AuditEntry{Action: "restored"}}},
		{"claim", dlstore.Transition{To: dlstore.ReplayDue, ClaimedBy: "cli#1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			table := newTable(t, nil).Table()
			fault := &indexWritesDown{}
			s, err := dltable.Open(testenv.Azurite(t), table, fault, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			read := archivedEntry(t, s)
			e := read
			fault.down.Store(true)
			tr := tt.t
			tr.At = read.UpdatedAt.Add(time.Minute)
			_, terr := s.Transition(ctx, read, tr)
			fault.down.Store(false)
			// Listed before any Get: nothing else ever reads an entry the
			// index leaves out.
			listed := ids(t, s, dlstore.NotClosed())
			got, err := s.Get(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case terr == nil && listed[e.ID] != tt.t.To:
				t.Errorf("Transition to %s with the index down succeeded, and List(not closed) = %v; want %s listed", tt.t.To, listed, e.ID)
			case terr != nil && (!errors.Is(terr, dlstore.ErrUnavailable) || got.State != dlstore.Archived):
				t.Errorf("Transition to %s with the index down: %v, entry now %s; want ErrUnavailable and the entry still archived", tt.t.To, terr, got.State)
			}
		})
	}
}
