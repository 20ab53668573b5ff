package deadletter_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlops"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlmem"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// ops is s with the operators' actions.
func ops(s *deadletter.Sweeper) dlops.Ops { return dlops.Ops{Sweeper: s} }

// history is the audit trail of one entry, by action, with actors.
func (f *fixture) history(t *testing.T, orderID string) []dlstore.AuditEntry {
	t.Helper()
	h, err := f.store.History(f.ctx, orderID)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestActionsByHandAreAudited(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-1:2", "o-1")
	f.park(t, "o-2:1", "InvalidTransition")
	f.park(t, "o-3:1", "InvalidTransition")
	s := f.sweeper(deadletter.Options{})
	f.run(t, s)

	// Replay ignores the cool-down (a human decided).
	it, err := ops(s).Act(f.ctx, deadletter.ActionReplay, "o-1:2", nil, "cli:ana")
	if err != nil || it.NewMessageID != "o-1:2:replay:1" || !it.Done {
		t.Fatalf("replay by hand = %+v, %v", it, err)
	}
	// A parked message found by its original id; a replay of it is a resubmit.
	if it, err = ops(s).Act(f.ctx, deadletter.ActionReplay, "o-2:1", nil, "cli:ana"); err != nil || it.Action != deadletter.ActionResubmit {
		t.Fatalf("resubmit by hand = %+v, %v", it, err)
	}
	if _, err = ops(s).Act(f.ctx, deadletter.ActionDiscard, "o-3:1:parked", nil, "cli:bo"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		order, action, actor string
		to                   dlstore.State
	}{
		{"o-1", "replayed", "cli:ana", dlstore.Replayed},
		{"o-2", "resubmitted", "cli:ana", dlstore.Replayed},
		{"o-3", "discarded", "cli:bo", dlstore.Discarded},
	} {
		h := f.history(t, c.order)
		last := h[len(h)-1]
		if last.Action != c.action || last.Actor != c.actor || last.To != c.to || last.N != len(h) {
			t.Errorf("%s: last audit entry = %+v, want %s by %s to %s, numbered %d", c.order, last, c.action, c.actor, c.to, len(h))
		}
	}
	t.Run("a by-hand action whose audit write fails changes nothing", func(t *testing.T) {
		f := newFixture(t)
		f.park(t, "o-9:1", "InvalidTransition")
		f.run(t, f.sweeper(deadletter.Options{}))
		f.mem.Fail(dlmem.OpTransition, 1)
		if _, err := ops(f.sweeper(deadletter.Options{})).Act(f.ctx, deadletter.ActionDiscard, "o-9:1", nil, "cli:x"); !errors.Is(err, dlstore.ErrUnavailable) {
			t.Fatalf("discard with the store failing = %v, want unavailable", err)
		}
		if e := f.byMessage(t)["o-9:1:parked"]; e.State != dlstore.Left {
			t.Errorf("entry is %s after a failed discard, want left (unchanged)", e.State)
		}
		if a := f.actions(t); a["discarded"] != 0 {
			t.Error("an audit entry was written for a discard that did not happen")
		}
	})
}

func TestActErrors(t *testing.T) {
	f := newFixture(t)
	f.park(t, "o-1:1", "InvalidPayload") // archived by the run
	f.park(t, "o-2:1", "InvalidTransition")
	s := f.sweeper(deadletter.Options{})
	f.run(t, s)
	if _, err := ops(s).Act(f.ctx, deadletter.ActionDiscard, "nope", nil, "cli:x"); !errors.Is(err, deadletter.ErrNoMessage) {
		t.Errorf("discard of a missing id = %v, want ErrNoMessage", err)
	}
	if _, err := ops(s).Act(f.ctx, deadletter.ActionReplay, "o-2:1", &dlops.Edit{Body: []byte(`{"orderId":"o-2","status":"Nope","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}`)}, "cli:x"); !errors.Is(err, deadletter.ErrInvalidBody) {
		t.Errorf("replay with a bad body = %v, want ErrInvalidBody", err)
	}
	var pe *order.PoisonError
	if _, err := ops(s).Act(f.ctx, deadletter.ActionReplay, "o-2:1", &dlops.Edit{Body: []byte(`nope`)}, "cli:x"); !errors.As(err, &pe) {
		t.Errorf("replay with a bad body = %v, want the contract's reason", err)
	}
	if e := f.byMessage(t)["o-2:1:parked"]; e.State != dlstore.Left {
		t.Errorf("a refused replay changed the entry to %s", e.State)
	}
	if _, err := ops(s).Act(f.ctx, deadletter.ActionRestore, "o-2:1", nil, "cli:x"); err != nil {
		t.Errorf("restore of a left entry = %v, want it reopened", err)
	}
	if _, err := ops(s).Act(f.ctx, deadletter.ActionRestore, "o-2:1", nil, "cli:x"); !errors.Is(err, deadletter.ErrNotActionable) {
		t.Errorf("restore of an open entry = %v, want ErrNotActionable", err)
	}
	// Restore an archived message, correct it and replay it.
	if it, err := ops(s).Act(f.ctx, deadletter.ActionRestore, "o-1:1", nil, "cli:x"); err != nil || it.State != string(dlstore.Open) {
		t.Fatalf("restore of an archived entry = %+v, %v", it, err)
	}
	good := []byte(`{"orderId":"o-1","status":"Created","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}`)
	if it, err := ops(s).Act(f.ctx, deadletter.ActionReplay, "o-1:1", &dlops.Edit{Body: good}, "cli:x"); err != nil || it.NewMessageID != "o-1:1:replay:1" {
		t.Fatalf("replay of the restored entry = %+v, %v", it, err)
	}
	if r, ok := f.queued(t)["o-1:1:replay:1"]; !ok || string(r.Body) != string(good) || r.SessionID != "o-1" {
		t.Errorf("corrected replay = %+v (found %v)", r, ok)
	}
	if _, err := ops(s).Act(f.ctx, deadletter.ActionDiscard, "o-1:1", nil, "cli:x"); !errors.Is(err, deadletter.ErrNotActionable) {
		t.Errorf("discard of a replayed entry = %v, want ErrNotActionable", err)
	}
}

func TestBulkWorksOnTheSetFixedAtTheStart(t *testing.T) {
	f := newFixture(t)
	for i := range 6 {
		f.park(t, fmt.Sprintf("o-%d:1", i), "InvalidTransition")
	}
	s := f.sweeper(deadletter.Options{})
	f.run(t, s)
	set, err := ops(s).Select(f.ctx, dlstore.Filter{Reason: "InvalidTransition", States: []dlstore.State{dlstore.Left}})
	if err != nil || len(set) != 6 {
		t.Fatalf("Select = %d, %v", len(set), err)
	}
	f.clk.Advance(time.Second)
	for i := 6; i < 9; i++ { // new poison arrives while the bulk action runs
		f.park(t, fmt.Sprintf("o-%d:1", i), "InvalidTransition")
	}
	f.run(t, s)
	var progressed int
	rep, err := ops(s).Bulk(f.ctx, deadletter.ActionDiscard, set, "cli:ana", func(done int, _ deadletter.Item) { progressed = done })
	if err != nil || rep.Done != 6 || rep.Failed != 0 || progressed != 6 {
		t.Fatalf("Bulk = %+v, %v (progress %d)", rep, err, progressed)
	}
	states := map[dlstore.State]int{}
	for _, e := range f.entries(t, dlstore.Filter{}) {
		states[e.State]++
	}
	if states[dlstore.Discarded] != 6 || states[dlstore.Left] != 3 {
		t.Errorf("states = %v, want 6 discarded and the 3 that arrived later untouched", states)
	}
	t.Run("entries stored by a clock ahead of this sweeper's are in the set", func(t *testing.T) {
		o := f.options(deadletter.Options{})
		o.Now = func() time.Time { return f.clk.Now().Add(-time.Hour) }
		behind := deadletter.New(f.mb, f.store, o)
		got, err := ops(behind).Select(f.ctx, dlstore.Filter{Reason: "InvalidTransition", States: []dlstore.State{dlstore.Left}})
		if err != nil || len(got) != 3 {
			t.Errorf("Select on a clock an hour behind = %d entries, %v; want the 3 left ones the store lists", len(got), err)
		}
	})
	t.Run("an entry changed meanwhile is reported and the rest go on", func(t *testing.T) {
		again, err := ops(s).Bulk(f.ctx, deadletter.ActionDiscard, set[:2], "cli:ana", nil)
		if err != nil || again.Failed != 2 || again.Done != 0 {
			t.Errorf("discarding discarded entries = %+v, %v; want 2 failed, reported", again, err)
		}
	})
}

func TestGroupsAndOrder(t *testing.T) {
	f := newFixture(t)
	for i := range 4 {
		f.park(t, fmt.Sprintf("o-%d:1", i), "InvalidTransition")
	}
	f.deadLetter(t, "o-1:2", "o-1")
	s := f.sweeper(deadletter.Options{})
	f.run(t, s)
	groups, err := ops(s).Groups(f.ctx, dlstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Count != 4 || groups[0].Orders != 4 || groups[0].Action != deadletter.ActionLeave ||
		groups[0].Template != `because of o-<n>:<n>` {
		t.Fatalf("groups = %+v, want the 4 parked ones (template masked) first, then the dead letter", groups)
	}
	if g := groups[1]; g.Count != 1 || g.Action != deadletter.ActionWait || g.Source != dlstore.DLQ {
		t.Errorf("second group = %+v", g)
	}
	if _, err := ops(s).Act(f.ctx, deadletter.ActionReplay, "o-1:2", nil, "cli:ana"); err != nil {
		t.Fatal(err)
	}
	rep, err := ops(s).Order(f.ctx, "o-1")
	if err != nil || len(rep.Entries) != 2 {
		t.Fatalf("Order = %d entries, %v; want the parked copy and the dead letter of o-1", len(rep.Entries), err)
	}
	var replayed bool
	for _, a := range rep.History {
		replayed = replayed || (a.Action == "replayed" && a.Actor == "cli:ana" && a.NewMessageID == "o-1:2:replay:1")
	}
	if !replayed {
		t.Errorf("history of o-1 = %+v, want the replay by cli:ana", rep.History)
	}
}
