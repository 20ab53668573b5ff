package dlstoretest

import (
	"slices"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// testList checks every List filter, alone and combined, on nine entries.
func testList(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	mk := func(src dlstore.Source, seq int64, order string, sec int, reason, group string) dlstore.Entry {
		e := entry(src, seq, order, sec)
		e.Reason, e.Group = reason, group
		e.Properties = map[string]any{"DeadLetterReason": reason}
		return e
	}
	const (
		mdc  = "MaxDeliveryCountExceeded"
		ttl  = "TTLExpiredException"
		inv  = "InvalidPayload"
		tr   = "InvalidTransition"
		gMDC = "MaxDeliveryCountExceeded/aaaa"
		gTTL = "TTLExpiredException/bbbb"
		gInv = "InvalidPayload/cccc"
		gTr  = "InvalidTransition/dddd"
	)
	e := []dlstore.Entry{
		mk(dlstore.DLQ, 1, "o-1", 0, mdc, gMDC),          // 0 open
		mk(dlstore.DLQ, 2, "o-2", 10, ttl, gTTL),         // 1 left
		mk(dlstore.Poison, 3, "o-1", 20, inv, gInv),      // 2 archived
		mk(dlstore.Poison, 4, "o-3", 30, tr, gTr),        // 3 left
		mk(dlstore.PoisonDLQ, 5, "o-3", 40, mdc, gMDC),   // 4 replay-due
		mk(dlstore.DLQ, 6, "o-4", 50, mdc, gMDC),         // 5 replayed
		mk(dlstore.Poison, 7, "o-4", 60, inv, gInv),      // 6 discarded
		mk(dlstore.DLQ, 8, "o-5", 70, mdc, gMDC),         // 7 open
		mk(dlstore.DLQ, 9, "o-5", 70, ttl, "other/eeee"), // 8 open, stored at the same time as 7
	}
	e[3].Description = "status Shipped after DELIVERED is not a transition"
	e[7].Body = []byte(`{"orderId":"o-5","note":"Needle in the body"}`)
	e[2].MessageID = "msg-NEEDLE-2"
	e[2].ID = dlstore.EntryID(e[2].Source, e[2].SequenceNumber, e[2].MessageID)
	for _, x := range e {
		mustPut(t, s, x)
	}
	states := []dlstore.State{dlstore.Open, dlstore.Left, dlstore.Archived, dlstore.Left, dlstore.ReplayDue,
		dlstore.Replayed, dlstore.Discarded, dlstore.Open, dlstore.Open}
	want := make([]dlstore.Entry, len(e))
	for i, x := range e {
		want[i] = stored(x)
		switch st := states[i]; st {
		case dlstore.Open:
		case dlstore.ReplayDue:
			want[i] = mustTransition(t, s, x.ID, dlstore.Transition{To: st, At: at(80 + i), ClaimedBy: "sweeper-a"})
		default:
			want[i] = mustTransition(t, s, x.ID, audited(st, 80+i, string(st)))
		}
	}
	// id lists the fixture's entries by index, in List's order.
	id := func(idx ...int) []string {
		out := []string{}
		for _, i := range idx {
			out = append(out, e[i].ID)
		}
		return out
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	if e[7].ID > e[8].ID {
		all[7], all[8] = 8, 7 // same StoredAt: by id
	}
	tied := all[7:]
	st := func(ss ...dlstore.State) []dlstore.State { return ss }
	tests := []struct {
		name string
		f    dlstore.Filter
		want []string
	}{
		{"everything", dlstore.Filter{}, id(all...)},
		{"not closed (the bounded query)", dlstore.NotClosed(), id(append([]int{0, 1, 3, 4}, tied...)...)},
		{"open", dlstore.Filter{States: st(dlstore.Open)}, id(append([]int{0}, tied...)...)},
		{"left", dlstore.Filter{States: st(dlstore.Left)}, id(1, 3)},
		{"replay-due", dlstore.Filter{States: st(dlstore.ReplayDue)}, id(4)},
		{"archived", dlstore.Filter{States: st(dlstore.Archived)}, id(2)},
		{"closed", dlstore.Filter{States: st(dlstore.Replayed, dlstore.Archived, dlstore.Discarded)}, id(2, 5, 6)},
		{"open and archived", dlstore.Filter{States: st(dlstore.Open, dlstore.Archived)}, id(append([]int{0, 2}, tied...)...)},
		{"source dlq", dlstore.Filter{Source: dlstore.DLQ}, id(append([]int{0, 1, 5}, tied...)...)},
		{"source poison-dlq", dlstore.Filter{Source: dlstore.PoisonDLQ}, id(4)},
		{"reason", dlstore.Filter{Reason: mdc}, id(0, 4, 5, 7)},
		{"group", dlstore.Filter{Group: gInv}, id(2, 6)},
		{"order", dlstore.Filter{OrderID: "o-1"}, id(0, 2)},
		{"unknown order", dlstore.Filter{OrderID: "o-9"}, id()},
		{"since (inclusive)", dlstore.Filter{Since: at(50)}, id(append([]int{5, 6}, tied...)...)},
		{"until (exclusive)", dlstore.Filter{Until: at(20)}, id(0, 1)},
		{"since and until", dlstore.Filter{Since: at(10), Until: at(41)}, id(1, 2, 3, 4)},
		{"a millisecond before", dlstore.Filter{Since: at(10).Add(-1e6), Until: at(10).Add(1e6)}, id(1)},
		{"text in the message id (any case)", dlstore.Filter{Text: "needle-2"}, id(2)},
		{"text in the body", dlstore.Filter{Text: "NEEDLE IN"}, id(7)},
		{"text in the body and the message id", dlstore.Filter{Text: "needle"}, id(2, 7)},
		{"text in the description", dlstore.Filter{Text: "after delivered"}, id(3)},
		{"text in the order id", dlstore.Filter{Text: "O-4"}, id(5, 6)},
		{"ids", dlstore.Filter{IDs: []string{e[6].ID, e[1].ID, "dlq-x"}}, id(1, 6)},
		{"not closed and text", dlstore.Filter{States: dlstore.NotClosed().States, Text: "needle"}, id(7)},
		{"not closed and reason", dlstore.Filter{States: dlstore.NotClosed().States, Reason: mdc}, id(0, 4, 7)},
		{"not closed and source and since", dlstore.Filter{States: dlstore.NotClosed().States, Source: dlstore.DLQ, Since: at(5)}, id(append([]int{1}, tied...)...)},
		{"not closed and group and until", dlstore.Filter{States: dlstore.NotClosed().States, Group: gMDC, Until: at(70)}, id(0, 4)},
		{"not closed and order", dlstore.Filter{States: dlstore.NotClosed().States, OrderID: "o-3"}, id(3, 4)},
		{"not closed and ids", dlstore.Filter{States: dlstore.NotClosed().States, IDs: []string{e[0].ID, e[2].ID}}, id(0)},
		{"order and state", dlstore.Filter{OrderID: "o-4", States: st(dlstore.Discarded)}, id(6)},
		{"order and text", dlstore.Filter{OrderID: "o-5", Text: "needle"}, id(7)},
		{"source and reason and group", dlstore.Filter{Source: dlstore.Poison, Reason: inv, Group: gInv}, id(2, 6)},
		{"reason and state and since", dlstore.Filter{Reason: mdc, States: st(dlstore.Replayed, dlstore.Open), Since: at(1)}, id(5, 7)},
		{"everything combined", dlstore.Filter{States: st(dlstore.Open), Source: dlstore.DLQ, Reason: mdc, Group: gMDC,
			OrderID: "o-5", Since: at(70), Until: at(71), Text: "needle", IDs: []string{e[7].ID}}, id(7)},
		{"nothing matches", dlstore.Filter{Source: dlstore.PoisonDLQ, Reason: inv}, id()},
	}
	byID := map[string]dlstore.Entry{}
	for _, w := range want {
		byID[w.ID] = w
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.List(ctx, tt.f)
			if err != nil {
				t.Fatalf("List(%+v): %v", tt.f, err)
			}
			if !slices.Equal(ids(got), tt.want) {
				t.Fatalf("List(%+v) =\n  %v\nwant\n  %v", tt.f, ids(got), tt.want)
			}
			for _, g := range got {
				checkEntry(t, "listed", g, byID[g.ID], false)
				if !tt.f.OnlyNotClosed() {
					// Read whole: body, properties and a usable ETag.
					checkEntry(t, "listed (whole)", g, byID[g.ID], true)
					if g.ETag == "" {
						t.Errorf("listed %s without an ETag", g.ID)
					}
				}
			}
		})
	}
	// An ETag from a whole List is the one Transition needs.
	listed, err := s.List(ctx, dlstore.Filter{OrderID: "o-2"})
	if err != nil || len(listed) != 1 {
		t.Fatalf("List(order o-2) = %d, %v", len(listed), err)
	}
	if _, err := s.Transition(ctx, listed[0], audited(dlstore.Archived, 200, "archived")); err != nil {
		t.Errorf("Transition with the ETag List returned: %v", err)
	}
}
