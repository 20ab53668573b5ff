package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Find returns the entry an operator names: by entry id, or by MessageId
// (its own, or the OriginalMessageId of a parked copy or a retry), the
// newest when several match. ErrNoMessage when none does.
func (s *Sweeper) Find(ctx context.Context, id string) (dlstore.Entry, error) {
	e, err := s.store.Get(ctx, id)
	if err == nil {
		return e, nil
	}
	if !errors.Is(err, dlstore.ErrNotFound) {
		return dlstore.Entry{}, err
	}
	all, err := s.store.List(ctx, dlstore.Filter{Text: id})
	if err != nil {
		return dlstore.Entry{}, err
	}
	var found []dlstore.Entry
	for _, e := range all {
		if e.MessageID == id || OriginalID(e) == id {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		return dlstore.Entry{}, fmt.Errorf("%w: %q is neither an entry id nor the MessageId of a stored dead letter", ErrNoMessage, id)
	}
	return s.store.Get(ctx, found[len(found)-1].ID)
}

// Select returns the entries a bulk action will work on: those the store
// lists for f now, exactly as List(f) does. The set is fixed here, by the
// entries listed: those stored later are not in it, and no StoredAt is
// compared with this sweeper's clock (the clock that stamped it may be
// ahead: a development host's that skipped idle time, another instance's).
func (s *Sweeper) Select(ctx context.Context, f dlstore.Filter) ([]dlstore.Entry, error) {
	return s.store.List(ctx, f)
}

// Act carries out action a (replayed, archived, discarded, restored) on
// one entry by hand, as actor: replay ignores the cool-down and the replay
// cap (a human decided), and with body sends it instead of the stored one
// (checked against the contract first: ErrInvalidBody, nothing changes). A
// replay of a parked message is recorded as resubmitted.
func (s *Sweeper) Act(ctx context.Context, a Action, id string, body []byte, actor string) (Item, error) {
	e, err := s.Find(ctx, id)
	if err != nil {
		return Item{MessageID: id, Action: a}, err
	}
	now := s.Now()
	if a == ActionReplay && e.Source != DLQ {
		a = ActionResubmit
	}
	d := Decision{Action: a, Why: byHand(a, body != nil)}
	return s.apply(ctx, e.ID, d, body, actor, now)
}

func byHand(a Action, corrected bool) string {
	switch {
	case corrected:
		return string(a) + " by hand with a corrected body"
	default:
		return string(a) + " by hand"
	}
}

// BulkReport is what a bulk action did.
type BulkReport struct {
	Action Action         `json:"action"`
	Total  int            `json:"total"`
	Done   int            `json:"done"`
	Failed int            `json:"failed"`
	Counts map[string]int `json:"counts"`
	Items  []Item         `json:"items"`
}

// Bulk carries out action a on the entries of set (from Select) by hand,
// at the sweeper's rate, calling progress after each. One entry that
// fails (changed meanwhile, not possible in its state) is reported and
// never stops the others; an unreachable store or broker ends it with an
// error, the report saying how far it got.
func (s *Sweeper) Bulk(ctx context.Context, a Action, set []dlstore.Entry, actor string, progress func(done int, it Item)) (BulkReport, error) {
	rep := BulkReport{Action: a, Total: len(set), Counts: map[string]int{}, Items: []Item{}}
	var next time.Time
	for i, e := range set {
		if err := pace(ctx, &next, s.o.RatePerSecond); err != nil {
			return rep, err
		}
		act := a
		if act == ActionReplay && e.Source != DLQ {
			act = ActionResubmit
		}
		now := s.Now()
		it, err := s.apply(ctx, e.ID, Decision{Action: act, Why: byHand(act, false) + " (bulk)"}, nil, actor, now)
		if err != nil {
			it.Error = err.Error()
			rep.Failed++
			rep.Counts["failed"]++
		} else {
			rep.Done++
			rep.Counts[string(it.Action)]++
		}
		rep.Items = append(rep.Items, it)
		if progress != nil {
			progress(i+1, it)
		}
		if err != nil && (errors.Is(err, dlstore.ErrUnavailable) || ctx.Err() != nil) {
			return rep, err
		}
	}
	return rep, nil
}

// Group is one failure group: the entries that share a source, a reason
// and a Fingerprint of their description.
type Group struct {
	ID       string    `json:"group"`
	Source   Kind      `json:"source"`
	Reason   string    `json:"reason"`
	Template string    `json:"template"`
	Count    int       `json:"count"`
	Orders   int       `json:"orders"`
	First    time.Time `json:"first_seen"`
	Last     time.Time `json:"last_seen"`
	// States counts the group's entries by state.
	States map[string]int `json:"states"`
	// Action is what the policy does with the group's entries now.
	Action Action `json:"action"`
}

// Groups returns the failure groups of the entries matching f (by default
// the ones that are not closed), largest first.
func (s *Sweeper) Groups(ctx context.Context, f dlstore.Filter) ([]Group, error) {
	if len(f.States) == 0 {
		f.States = dlstore.NotClosed().States
	}
	entries, err := s.store.List(ctx, f)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	type key struct {
		src            Kind
		reason, finger string
	}
	by := map[key]*Group{}
	orders := map[key]map[string]bool{}
	for _, e := range entries {
		k := key{e.Source, e.Reason, e.Group}
		g := by[k]
		if g == nil {
			d := s.decideAt(e, now)
			if d.Action == ActionNone && e.State == dlstore.Left {
				d.Action = ActionLeave // as the dry run says: left for a human
			}
			g = &Group{ID: e.Group, Source: e.Source, Reason: e.Reason, Template: Template(e.Description), First: e.StoredAt,
				States: map[string]int{}, Action: d.Action}
			by[k] = g
			orders[k] = map[string]bool{}
		}
		g.Count++
		g.States[string(e.State)]++
		orders[k][e.OrderID] = true
		if e.StoredAt.Before(g.First) {
			g.First = e.StoredAt
		}
		if e.StoredAt.After(g.Last) {
			g.Last = e.StoredAt
		}
	}
	out := make([]Group, 0, len(by))
	for k, g := range by {
		g.Orders = len(orders[k])
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Source, b.Source), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// OrderReport is everything the dead-letter store knows of one order.
type OrderReport struct {
	OrderID string               `json:"order_id"`
	Entries []dlstore.Entry      `json:"entries"`
	History []dlstore.AuditEntry `json:"history"`
}

// Order returns one order's entries (every state) and audit entries, in
// time order.
func (s *Sweeper) Order(ctx context.Context, orderID string) (OrderReport, error) {
	entries, err := s.store.List(ctx, dlstore.Filter{OrderID: orderID})
	if err != nil {
		return OrderReport{}, err
	}
	hist, err := s.store.History(ctx, orderID)
	if err != nil {
		return OrderReport{}, err
	}
	return OrderReport{OrderID: orderID, Entries: entries, History: hist}, nil
}

// Stats measures every source now without draining or acting (the CLI's
// stats): the store's entries that are not closed and what waits in
// Service Bus. What cannot be read is named in the second result; the
// rest is still measured.
func (s *Sweeper) Stats(ctx context.Context) ([]Stat, []string, error) {
	now := s.Now()
	queued, bad, _ := s.peekAll(ctx)
	entries, err := s.store.List(ctx, dlstore.NotClosed())
	if err != nil {
		bad = append(bad, "the dead-letter store ("+err.Error()+")")
	}
	if len(bad) == len(Kinds)+1 {
		return nil, bad, fmt.Errorf("deadletter: nothing could be read: %v", bad)
	}
	return Stats(entries, queued, now), bad, nil
}
