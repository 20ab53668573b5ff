// Package dlops is what operators do by hand with the dead-letter store, for
// bin/orderstatus deadletters and its MCP tools only, not bin/handler; every
// action goes through the sweeper's Apply, with its audit.
package dlops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Ops is a sweeper with the operators' actions.
type Ops struct{ *deadletter.Sweeper }

// Find returns the newest entry with entry id or MessageId id (its own, or a
// parked copy's or retry's original); deadletter.ErrNoMessage when none.
func (s Ops) Find(ctx context.Context, id string) (dlstore.Entry, error) {
	e, err := s.Store().Get(ctx, id)
	if err == nil {
		return e, nil
	}
	if !errors.Is(err, dlstore.ErrNotFound) {
		return dlstore.Entry{}, err
	}
	all, err := s.Store().List(ctx, dlstore.Filter{Text: id})
	if err != nil {
		return dlstore.Entry{}, err
	}
	var found []dlstore.Entry
	for _, e := range all {
		if e.MessageID == id || deadletter.OriginalID(e) == id {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		return dlstore.Entry{}, fmt.Errorf("%w: %q is neither an entry id nor the MessageId of a stored dead letter", deadletter.ErrNoMessage, id)
	}
	return s.Store().Get(ctx, found[len(found)-1].ID)
}

// Select returns the entries a bulk action works on, as List(f) lists them
// now; no StoredAt is compared with this sweeper's clock.
func (s Ops) Select(ctx context.Context, f dlstore.Filter) ([]dlstore.Entry, error) {
	return s.Store().List(ctx, f)
}

// Act carries out a on one entry by hand, as actor: replay skips cool-down
// and cap, and makes ed first (checked: *EditError, deadletter.ErrInvalidBody);
// the audit entry's detail says what ed changed.
func (s Ops) Act(ctx context.Context, a deadletter.Action, id string, ed *Edit, actor string) (deadletter.Item, error) {
	e, err := s.Find(ctx, id)
	if err != nil {
		return deadletter.Item{MessageID: id, Action: a}, err
	}
	if !ed.IsZero() && a != deadletter.ActionReplay {
		return deadletter.ItemOf(e, a, ""), fmt.Errorf("dlops: only a replay takes edits, not %s", a)
	}
	now := s.Now()
	if a == deadletter.ActionReplay && e.Source != dlstore.DLQ {
		a = deadletter.ActionResubmit
	}
	why := string(a) + " by hand"
	if !ed.IsZero() {
		why += ", edited: " + ed.describe()
	}
	return s.Apply(ctx, e.ID, deadletter.Decision{Action: a, Why: why}, ed.hook(), actor, now)
}

// BulkReport is what a bulk action did.
type BulkReport struct {
	Action deadletter.Action `json:"action"`
	Total  int               `json:"total"`
	Done   int               `json:"done"`
	Failed int               `json:"failed"`
	Counts map[string]int    `json:"counts"`
	Items  []deadletter.Item `json:"items"`
}

// Bulk carries out a by hand on set at the sweeper's rate, calling progress
// per entry; only an unreachable store or broker stops it.
func (s Ops) Bulk(ctx context.Context, a deadletter.Action, set []dlstore.Entry, actor string, progress func(done int, it deadletter.Item)) (BulkReport, error) {
	rep := BulkReport{Action: a, Total: len(set), Counts: map[string]int{}, Items: []deadletter.Item{}}
	var next time.Time
	for i, e := range set {
		if err := deadletter.Pace(ctx, &next, s.RatePerSecond()); err != nil {
			return rep, err
		}
		act := a
		if act == deadletter.ActionReplay && e.Source != dlstore.DLQ {
			act = deadletter.ActionResubmit
		}
		now := s.Now()
		it, err := s.Apply(ctx, e.ID, deadletter.Decision{Action: act, Why: string(act) + " by hand (bulk)"}, nil, actor, now)
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

// Pinned splits set, as listed, into the entries still as listed (state,
// update time and number of actions) and the ids of those changed or gone
// since: a bulk action confirmed later acts on the first only.
func (s Ops) Pinned(ctx context.Context, set []dlstore.Entry) (same []dlstore.Entry, changed []string, err error) {
	f := dlstore.Filter{}
	for _, e := range set {
		f.IDs = append(f.IDs, e.ID)
		if !slices.Contains(f.States, e.State) {
			f.States = append(f.States, e.State)
		}
	}
	cur, err := s.Store().List(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	now := make(map[string]dlstore.Entry, len(cur))
	for _, e := range cur {
		now[e.ID] = e
	}
	for _, e := range set {
		c, ok := now[e.ID]
		if ok && c.State == e.State && c.UpdatedAt.Equal(e.UpdatedAt) && c.Actions == e.Actions {
			same = append(same, c)
		} else {
			changed = append(changed, e.ID)
		}
	}
	return same, changed, nil
}

// Group is the entries sharing a source, reason and Fingerprint.
type Group struct {
	ID       string         `json:"group"`
	Source   dlstore.Source `json:"source"`
	Reason   string         `json:"reason"`
	Template string         `json:"template"`
	Count    int            `json:"count"`
	Orders   int            `json:"orders"`
	First    time.Time      `json:"first_seen"`
	Last     time.Time      `json:"last_seen"`
	// States counts the group's entries by state.
	States map[string]int `json:"states"`
	// Action is what the policy does with the group's entries now.
	Action deadletter.Action `json:"action"`
}

// Groups returns the failure groups of f's entries, largest first.
func (s Ops) Groups(ctx context.Context, f dlstore.Filter) ([]Group, error) {
	if len(f.States) == 0 {
		f.States = dlstore.NotClosed().States
	}
	entries, err := s.Store().List(ctx, f)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	type key struct {
		src            dlstore.Source
		reason, finger string
	}
	by := map[key]*Group{}
	orders := map[key]map[string]bool{}
	for _, e := range entries {
		k := key{e.Source, e.Reason, e.Group}
		g := by[k]
		if g == nil {
			d := s.DecideAt(e, now)
			if d.Action == deadletter.ActionNone && e.State == dlstore.Left {
				d.Action = deadletter.ActionLeave // as the dry run says: left for a human
			}
			g = &Group{ID: e.Group, Source: e.Source, Reason: e.Reason, Template: deadletter.Template(e.Description), First: e.StoredAt,
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

// Order returns one order's entries (every state) and audit, in time order.
func (s Ops) Order(ctx context.Context, orderID string) (OrderReport, error) {
	entries, err := s.Store().List(ctx, dlstore.Filter{OrderID: orderID})
	if err != nil {
		return OrderReport{}, err
	}
	hist, err := s.Store().History(ctx, orderID)
	if err != nil {
		return OrderReport{}, err
	}
	return OrderReport{OrderID: orderID, Entries: entries, History: hist}, nil
}

// Stats measures every source now, naming what cannot be read.
func (s Ops) Stats(ctx context.Context) ([]deadletter.Stat, []string, error) {
	now := s.Now()
	queued, bad, _ := s.PeekSources(ctx)
	entries, err := s.Store().List(ctx, dlstore.NotClosed())
	if err != nil {
		bad = append(bad, "the dead-letter store ("+err.Error()+")")
	}
	if len(bad) == len(dlstore.Sources)+1 {
		return nil, bad, fmt.Errorf("deadletter: nothing could be read: %v", bad)
	}
	return deadletter.Stats(entries, queued, now), bad, nil
}

// DryRun reports what a sweep would do now and writes nothing (creates no
// table); Unreadable lists what could not be read.
func (s Ops) DryRun(ctx context.Context) (deadletter.Report, error) {
	rep := deadletter.Report{RunID: uuid.NewString(), DryRun: true, Counts: map[deadletter.Action]int{}, Items: []deadletter.Item{}}
	now := s.Now()
	queued, bad, _ := s.PeekSources(ctx)
	rep.Unreadable = append(rep.Unreadable, bad...)
	entries, err := s.Store().List(ctx, dlstore.NotClosed())
	if err != nil {
		rep.Unreadable = append(rep.Unreadable, "the dead-letter store ("+err.Error()+")")
		entries = nil
	}
	for _, k := range dlstore.Sources {
		for _, m := range queued[k] {
			e := deadletter.EntryOf(k, m, now)
			d := s.DecideAt(e, now)
			it := deadletter.ItemOf(e, d.Action, "would be stored now, then: "+d.Why)
			rep.Items = append(rep.Items, it)
			rep.Counts[d.Action]++
		}
	}
	for _, e := range entries {
		d := s.DecideAt(e, now)
		if d.Action == deadletter.ActionNone && e.State == dlstore.Left {
			d = deadletter.Decision{Action: deadletter.ActionLeave, Why: "left for a human"}
		}
		rep.Items = append(rep.Items, deadletter.ItemOf(e, d.Action, d.Why))
		rep.Counts[d.Action]++
	}
	rep.Stats = deadletter.Stats(entries, queued, now)
	return rep, nil
}
