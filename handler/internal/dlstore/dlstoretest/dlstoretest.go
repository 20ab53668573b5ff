// Package dlstoretest is the dlstore.Store conformance suite every backend
// passes (dlmem; dltable on Azurite or a real account): Put, exact round
// trips, every List filter, ETag-conditional transitions, numbered audit,
// Purge of closed entries, and ids that are not legal Table Storage keys.
package dlstoretest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Run runs the suite; newStore returns an empty store and may skip.
func Run(t *testing.T, newStore func(t *testing.T) dlstore.Store) {
	t.Run("PutInsertIfAbsent", func(t *testing.T) { testPutInsertIfAbsent(t, newStore(t)) })
	t.Run("PutRequiredFields", func(t *testing.T) { testPutRequired(t, newStore(t)) })
	t.Run("GetMissing", func(t *testing.T) { testGetMissing(t, newStore(t)) })
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, newStore(t)) })
	t.Run("LargestMessage", func(t *testing.T) { testLargestMessage(t, newStore(t)) })
	t.Run("TooLarge", func(t *testing.T) { testTooLarge(t, newStore(t)) })
	t.Run("List", func(t *testing.T) { testList(t, newStore(t)) })
	t.Run("TransitionConditional", func(t *testing.T) { testTransitionConditional(t, newStore(t)) })
	t.Run("TransitionRace", func(t *testing.T) { testTransitionRace(t, newStore(t)) })
	t.Run("TransitionMissing", func(t *testing.T) { testTransitionMissing(t, newStore(t)) })
	t.Run("TransitionNeedsAudit", func(t *testing.T) { testTransitionNeedsAudit(t, newStore(t)) })
	t.Run("ClaimAndReplay", func(t *testing.T) { testClaimAndReplay(t, newStore(t)) })
	t.Run("Restore", func(t *testing.T) { testRestore(t, newStore(t)) })
	t.Run("ClaimOfArchived", func(t *testing.T) { testClaimOfArchived(t, newStore(t)) })
	t.Run("History", func(t *testing.T) { testHistory(t, newStore(t)) })
	t.Run("Purge", func(t *testing.T) { testPurge(t, newStore(t)) })
	t.Run("OrderIDsThatAreNotKeys", func(t *testing.T) { testOrderIDsThatAreNotKeys(t, newStore(t)) })
}

// ctxFor returns a context bounded well below the test timeout.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// base is the suite's epoch; times are UTC at millisecond precision.
var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// at returns base plus sec seconds and 123 ms.
func at(sec int) time.Time { return base.Add(time.Duration(sec)*time.Second + 123*time.Millisecond) }

// entry returns a plausible entry for orderID, stored at at(sec).
func entry(src dlstore.Source, seq int64, orderID string, sec int) dlstore.Entry {
	msgID := fmt.Sprintf("msg-%s-%d", src, seq)
	return dlstore.Entry{
		ID: dlstore.EntryID(src, seq, msgID), Source: src, SequenceNumber: seq, MessageID: msgID,
		OrderID: orderID, SessionID: orderID, Subject: "OrderStatusChanged", ContentType: "application/json",
		CorrelationID: "corr-" + msgID,
		Body:          []byte(fmt.Sprintf(`{"orderId":%q,"status":"Paid","sequence":%d}`, orderID, seq)),
		Properties: map[string]any{
			"DeadLetterReason":           "MaxDeliveryCountExceeded",
			"DeadLetterErrorDescription": "delivery 5 of 5 failed",
		},
		Reason: "MaxDeliveryCountExceeded", Description: "delivery 5 of 5 failed", DeliveryCount: 5,
		EnqueuedTime: at(sec - 60), StoredAt: at(sec), Group: "MaxDeliveryCountExceeded/1a2b3c4d",
	}
}

func mustPut(t *testing.T, s dlstore.Store, e dlstore.Entry) {
	t.Helper()
	created, err := s.Put(ctxFor(t), e, "sweeper")
	if err != nil || !created {
		t.Fatalf("Put(%s) = %t, %v; want true, nil", e.ID, created, err)
	}
}

func mustGet(t *testing.T, s dlstore.Store, id string) dlstore.Entry {
	t.Helper()
	e, err := s.Get(ctxFor(t), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return e
}

func mustHistory(t *testing.T, s dlstore.Store, orderID string) []dlstore.AuditEntry {
	t.Helper()
	h, err := s.History(ctxFor(t), orderID)
	if err != nil {
		t.Fatalf("History(%q): %v", orderID, err)
	}
	return h
}

// mustTransition reads id and changes it as tr says.
func mustTransition(t *testing.T, s dlstore.Store, id string, tr dlstore.Transition) dlstore.Entry {
	t.Helper()
	got, err := s.Transition(ctxFor(t), mustGet(t, s, id), tr)
	if err != nil {
		t.Fatalf("Transition(%s to %s): %v", id, tr.To, err)
	}
	return got
}

// audited is a transition to st at at(sec) with an audit entry for action.
func audited(st dlstore.State, sec int, action string) dlstore.Transition {
	return dlstore.Transition{To: st, At: at(sec), Audit: &dlstore.AuditEntry{Action: action, Actor: "tester", Detail: "by the suite"}}
}

// stored is e as Put stores it: open, one action, unclaimed.
func stored(e dlstore.Entry) dlstore.Entry {
	e.State, e.UpdatedAt, e.Actions, e.ClaimedBy, e.ClaimedAt = dlstore.Open, e.StoredAt, 1, "", time.Time{}
	return e
}

// diffEntry lists how got differs from want, field by field (times by
// Equal; never the ETag; Body and Properties only when whole).
func diffEntry(got, want dlstore.Entry, whole bool) []string {
	var d []string
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		name, gv, wv := g.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface()
		switch gt, isTime := gv.(time.Time); {
		case name == "ETag" || name == "Body" || name == "Properties":
		case isTime && !gt.Equal(wv.(time.Time)):
			d = append(d, fmt.Sprintf("%s = %v, want %v", name, gv, wv))
		case !isTime && gv != wv:
			d = append(d, fmt.Sprintf("%s = %#v, want %#v", name, gv, wv))
		}
	}
	if whole {
		if string(got.Body) != string(want.Body) {
			d = append(d, fmt.Sprintf("Body = %d bytes %.40q, want %d bytes %.40q", len(got.Body), got.Body, len(want.Body), want.Body))
		}
		d = append(d, diffProperties(got.Properties, want.Properties)...)
	}
	return d
}

// diffProperties compares typed properties: same names, Go types and values.
func diffProperties(got, want map[string]any) []string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			d = append(d, fmt.Sprintf("property %q missing", k))
			continue
		}
		w := want[k]
		if fmt.Sprintf("%T", g) != fmt.Sprintf("%T", w) {
			d = append(d, fmt.Sprintf("property %q is a %T, want a %T", k, g, w))
			continue
		}
		equal := g == w
		if wt, isTime := w.(time.Time); isTime {
			equal = g.(time.Time).Equal(wt)
		}
		if !equal {
			d = append(d, fmt.Sprintf("property %q = %.60v, want %.60v", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("property %q not put", k))
		}
	}
	return d
}

func checkEntry(t *testing.T, what string, got, want dlstore.Entry, whole bool) {
	t.Helper()
	if d := diffEntry(got, want, whole); len(d) > 0 {
		t.Errorf("%s %s:\n  %s", what, want.ID, strings.Join(d, "\n  "))
	}
}

func testPutInsertIfAbsent(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	e := entry(dlstore.DLQ, 7, "o-1", 0)
	created, err := s.Put(ctx, e, "sweeper-a")
	if err != nil || !created {
		t.Fatalf("first Put = %t, %v; want true, nil", created, err)
	}
	first := mustGet(t, s, e.ID)
	if first.ETag == "" {
		t.Error("Get returned an empty ETag")
	}
	checkEntry(t, "Get after Put", first, stored(e), true)

	// The same id again with other fields (a crash): nothing changes.
	again := e
	again.Body, again.Reason, again.StoredAt = []byte("other"), "TTLExpiredException", at(30)
	again.Properties = map[string]any{"x": "y"}
	created, err = s.Put(ctx, again, "sweeper-b")
	if err != nil || created {
		t.Fatalf("second Put = %t, %v; want false, nil", created, err)
	}
	second := mustGet(t, s, e.ID)
	checkEntry(t, "Get after the second Put", second, stored(e), true)
	if second.ETag != first.ETag {
		t.Errorf("ETag after the second Put = %q, want %q (unchanged)", second.ETag, first.ETag)
	}
	h := mustHistory(t, s, "o-1")
	want := dlstore.AuditEntry{EntryID: e.ID, OrderID: "o-1", N: 1, At: e.StoredAt, Action: dlstore.ActionStored,
		To: dlstore.Open, Actor: "sweeper-a", Source: e.Source, SequenceNumber: e.SequenceNumber, MessageID: e.MessageID,
		Reason: e.Reason, Detail: e.Description}
	if len(h) != 1 {
		t.Fatalf("History = %d entries %+v, want one (stored)", len(h), h)
	}
	checkAudit(t, h[0], want)
}

func checkAudit(t *testing.T, got, want dlstore.AuditEntry) {
	t.Helper()
	if !got.At.Equal(want.At) {
		t.Errorf("audit %s #%d At = %v, want %v", want.EntryID, want.N, got.At, want.At)
	}
	got.At = want.At
	if got != want {
		t.Errorf("audit entry = %+v\nwant %+v", got, want)
	}
}

func testPutRequired(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	ok := entry(dlstore.Poison, 1, "o-1", 0)
	tests := []struct {
		name   string
		change func(*dlstore.Entry)
	}{
		{"no id", func(e *dlstore.Entry) { e.ID = "" }},
		{"no source", func(e *dlstore.Entry) { e.Source = "" }},
		{"no stored-at", func(e *dlstore.Entry) { e.StoredAt = time.Time{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ok
			tt.change(&e)
			if created, err := s.Put(ctx, e, "sweeper"); err == nil || created {
				t.Errorf("Put = %t, %v; want an error", created, err)
			}
		})
	}
	if es, err := s.List(ctx, dlstore.Filter{}); err != nil || len(es) != 0 {
		t.Errorf("List after refused Puts = %d entries, %v; want none", len(es), err)
	}
}

func testGetMissing(t *testing.T, s dlstore.Store) {
	_, err := s.Get(ctxFor(t), dlstore.EntryID(dlstore.DLQ, 1, "m"))
	if !errors.Is(err, dlstore.ErrNotFound) {
		t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
	}
}

func testRoundTrip(t *testing.T, s dlstore.Store) {
	e := entry(dlstore.PoisonDLQ, 1<<40+3, "o-ü'1", 0)
	e.Properties = map[string]any{
		"DeadLetterReason": "InvalidPayload", "DeadLetterErrorDescription": "field status: \"Paidd\" unknown",
		"OriginalMessageId": "m-1", "ReplayedFromDeadLetter": true, "Cancelled": false,
		"ReplayCount": int64(2), "Big": int64(-1 << 62), "Ratio": 0.1, "Negative": -3.5e300,
		"FirstFailureTime": time.Date(2026, 11, 28, 23, 59, 59, 999_000_000, time.UTC),
		"Empty":            "", "Unicode": "ü€😀\x00\x01\t'\"#?/\\",
	}
	e.Reason, e.Description = "InvalidPayload", "field status: \"Paidd\" unknown\nsecond line"
	e.DeliveryCount, e.ReplayCount, e.Group = 1, 2, "InvalidPayload/00ff"
	e.Body = []byte{0, 1, 2, 0xff, 0xfe, '\n', '{'}
	mustPut(t, s, e)
	checkEntry(t, "Get", mustGet(t, s, e.ID), stored(e), true)

	// An entry with nothing optional set.
	bare := dlstore.Entry{ID: dlstore.EntryID(dlstore.DLQ, 0, ""), Source: dlstore.DLQ, StoredAt: at(1)}
	mustPut(t, s, bare)
	got := mustGet(t, s, bare.ID)
	checkEntry(t, "Get of a bare entry", got, stored(bare), true)
	if len(got.Body) != 0 || len(got.Properties) != 0 {
		t.Errorf("bare entry: body %q, properties %v; want none", got.Body, got.Properties)
	}
}

// largeProperties returns size bytes of properties of every type.
func largeProperties(size int) map[string]any {
	props := map[string]any{
		"DeadLetterReason": "MaxDeliveryCountExceeded", "Flag": true, "Count": int64(1<<63 - 1),
		"Ratio": 1.0 / 3, "When": time.Date(2026, 11, 29, 9, 0, 0, 456_000_000, time.UTC),
	}
	var filler strings.Builder
	for r := rune(0); filler.Len() < 4096; r++ {
		filler.WriteRune(r % 0x800)
	}
	fill := filler.String()
	for i := 0; ; i++ {
		left := size - dlstore.PropertiesSize(props)
		name := fmt.Sprintf("p%03d", i)
		if left <= len(name)+len(fill) {
			v := strings.Repeat("x", left-len(name))
			props[name] = v
			return props
		}
		props[name] = fill
	}
}

// pattern returns n bytes holding every byte value.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}

func testLargestMessage(t *testing.T, s dlstore.Store) {
	e := entry(dlstore.DLQ, 1, "o-big", 0)
	e.Body = pattern(dlstore.MaxBody)
	e.Properties = largeProperties(dlstore.MaxProperties)
	if n := dlstore.PropertiesSize(e.Properties); n != dlstore.MaxProperties {
		t.Fatalf("test properties are %d bytes, want %d", n, dlstore.MaxProperties)
	}
	mustPut(t, s, e)
	got := mustGet(t, s, e.ID)
	checkEntry(t, "Get of the largest message", got, stored(e), true)

	// And after a transition, which rewrites the entry.
	next := mustTransition(t, s, e.ID, audited(dlstore.Archived, 10, "archived"))
	if d := diffProperties(next.Properties, e.Properties); len(d) > 0 || string(next.Body) != string(e.Body) {
		t.Errorf("Transition returned body %d bytes, properties differing in %v; want them unchanged", len(next.Body), d)
	}
	got = mustGet(t, s, e.ID)
	if d := diffProperties(got.Properties, e.Properties); len(d) > 0 || string(got.Body) != string(e.Body) {
		t.Errorf("Get after a transition: body %d bytes, properties differing in %v; want them unchanged", len(got.Body), d)
	}
}

func testTooLarge(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	body := entry(dlstore.DLQ, 1, "o-1", 0)
	body.Body = pattern(dlstore.MaxBody + 1)
	props := entry(dlstore.DLQ, 2, "o-1", 0)
	props.Properties = largeProperties(dlstore.MaxProperties + 1)
	for name, e := range map[string]dlstore.Entry{"body": body, "properties": props} {
		t.Run(name, func(t *testing.T) {
			created, err := s.Put(ctx, e, "sweeper")
			if !errors.Is(err, dlstore.ErrTooLarge) || created {
				t.Errorf("Put = %t, %v; want ErrTooLarge", created, err)
			}
			if _, err := s.Get(ctx, e.ID); !errors.Is(err, dlstore.ErrNotFound) {
				t.Errorf("Get after a refused Put: %v, want ErrNotFound", err)
			}
		})
	}
	h, err := s.History(ctx, "")
	if err != nil || len(h) != 0 {
		t.Errorf("History after refused Puts = %v, %v; want none", h, err)
	}
}

func testTransitionConditional(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	e := entry(dlstore.DLQ, 1, "o-1", 0)
	mustPut(t, s, e)
	read := mustGet(t, s, e.ID)
	won, err := s.Transition(ctx, read, audited(dlstore.Left, 5, "left"))
	if err != nil {
		t.Fatalf("first Transition: %v", err)
	}
	if won.ETag == "" || won.ETag == read.ETag {
		t.Errorf("Transition returned ETag %q, want a new one (read %q)", won.ETag, read.ETag)
	}
	_, err = s.Transition(ctx, read, audited(dlstore.Archived, 6, "archived"))
	if !errors.Is(err, dlstore.ErrConflict) {
		t.Fatalf("second Transition from the same read: %v, want ErrConflict", err)
	}
	want := stored(e)
	want.State, want.UpdatedAt, want.Actions = dlstore.Left, at(5), 2
	checkEntry(t, "Transition's result", won, want, true)
	got := mustGet(t, s, e.ID)
	checkEntry(t, "Get after the conflict", got, want, true)
	if got.ETag != won.ETag {
		t.Errorf("Get ETag = %q, want the one Transition returned (%q)", got.ETag, won.ETag)
	}
	if _, err := s.Transition(ctx, dlstore.Entry{ID: e.ID, OrderID: e.OrderID}, audited(dlstore.Archived, 7, "archived")); !errors.Is(err, dlstore.ErrConflict) {
		t.Errorf("Transition without an ETag: %v, want ErrConflict", err)
	}
	h := mustHistory(t, s, "o-1")
	if got := actions(h); got != "stored/open,left/left" {
		t.Errorf("History = %s, want stored/open,left/left (no audit entry for the conflicts)", got)
	}
	// The returned entry is good for the next transition.
	if _, err := s.Transition(ctx, won, audited(dlstore.Archived, 8, "archived")); err != nil {
		t.Errorf("Transition from the returned entry: %v", err)
	}
}

// actions renders audit entries as action/to, in order.
func actions(h []dlstore.AuditEntry) string {
	var s []string
	for _, a := range h {
		s = append(s, a.Action+"/"+string(a.To))
	}
	return strings.Join(s, ",")
}

func testTransitionRace(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	e := entry(dlstore.DLQ, 1, "o-1", 0)
	mustPut(t, s, e)
	read := mustGet(t, s, e.ID)
	const actors = 4
	var wg sync.WaitGroup
	errs := make([]error, actors)
	for i := range actors {
		wg.Go(func() {
			tr := audited(dlstore.Replayed, 10+i, "replayed")
			tr.Audit.Actor = fmt.Sprintf("actor-%d", i)
			_, errs[i] = s.Transition(ctx, read, tr)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("actors %d and %d both changed the entry", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, dlstore.ErrConflict):
			t.Errorf("actor %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no actor won: %v", errs)
	}
	h := mustHistory(t, s, "o-1")
	if len(h) != 2 || h[1].Actor != fmt.Sprintf("actor-%d", winner) || h[1].N != 2 {
		t.Errorf("History = %+v, want stored and the winner's (actor-%d) as #2", h, winner)
	}
	if got := mustGet(t, s, e.ID); got.State != dlstore.Replayed || got.Actions != 2 || !got.UpdatedAt.Equal(at(10+winner)) {
		t.Errorf("entry = state %s, %d actions, updated %v; want the winner's", got.State, got.Actions, got.UpdatedAt)
	}
}

func testTransitionMissing(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	e := entry(dlstore.DLQ, 1, "o-1", 0)
	mustPut(t, s, e)
	ghost := mustGet(t, s, e.ID)
	ghost.ID = dlstore.EntryID(dlstore.DLQ, 2, "other")
	if _, err := s.Transition(ctx, ghost, audited(dlstore.Left, 5, "left")); !errors.Is(err, dlstore.ErrNotFound) {
		t.Errorf("Transition of a missing entry: %v, want ErrNotFound", err)
	}
	if h, err := s.History(ctx, ""); err != nil || len(h) != 1 {
		t.Errorf("History = %v, %v; want only the stored entry", h, err)
	}
}

func testTransitionNeedsAudit(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	e := entry(dlstore.DLQ, 1, "o-1", 0)
	mustPut(t, s, e)
	read := mustGet(t, s, e.ID)
	if _, err := s.Transition(ctx, read, dlstore.Transition{To: dlstore.Replayed, At: at(5)}); err == nil {
		t.Error("Transition to replayed without an audit entry succeeded, want an error")
	}
	checkEntry(t, "entry after the refused transition", mustGet(t, s, e.ID), stored(e), true)
	// A claim and its release (a send that failed) are no actions.
	claimed := mustTransition(t, s, e.ID, dlstore.Transition{To: dlstore.ReplayDue, At: at(6), ClaimedBy: "sweeper-a"})
	if _, err := s.Transition(ctx, claimed, dlstore.Transition{To: dlstore.Replayed, At: at(7)}); err == nil {
		t.Error("Transition from replay-due to replayed without an audit entry succeeded, want an error (a replay is an action)")
	}
	released := mustTransition(t, s, e.ID, dlstore.Transition{To: dlstore.Open, At: at(8)})
	if released.State != dlstore.Open || released.ClaimedBy != "" || released.Actions != 1 {
		t.Errorf("released = %s claimed by %q, %d actions; want open, no claim, 1 action (stored)", released.State, released.ClaimedBy, released.Actions)
	}
}

func testClaimAndReplay(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	e := entry(dlstore.DLQ, 1, "o-1", 0)
	mustPut(t, s, e)

	claimed := mustTransition(t, s, e.ID, dlstore.Transition{To: dlstore.ReplayDue, At: at(5), ClaimedBy: "sweeper-a"})
	want := stored(e)
	want.State, want.UpdatedAt, want.ClaimedBy, want.ClaimedAt = dlstore.ReplayDue, at(5), "sweeper-a", at(5)
	checkEntry(t, "claimed", claimed, want, true)
	checkEntry(t, "Get of the claimed", mustGet(t, s, e.ID), want, true)

	// The claim timed out: another actor takes it over.
	claimed = mustTransition(t, s, e.ID, dlstore.Transition{To: dlstore.ReplayDue, At: at(100), ClaimedBy: "sweeper-b"})
	want.UpdatedAt, want.ClaimedBy, want.ClaimedAt = at(100), "sweeper-b", at(100)
	checkEntry(t, "claimed again", claimed, want, true)
	if es, err := s.List(ctx, dlstore.Filter{States: []dlstore.State{dlstore.ReplayDue}}); err != nil || len(es) != 1 {
		t.Fatalf("List(replay-due) = %d, %v; want the claimed entry", len(es), err)
	} else {
		checkEntry(t, "List(replay-due)", es[0], want, false)
	}

	tr := audited(dlstore.Replayed, 101, "replayed")
	tr.ReplayCount, tr.NewMessageID = 1, "msg-dlq-1:replay:1"
	tr.Audit.NewMessageID = tr.NewMessageID
	replayed := mustTransition(t, s, e.ID, tr)
	want.State, want.UpdatedAt, want.ClaimedBy, want.ClaimedAt = dlstore.Replayed, at(101), "", time.Time{}
	want.ReplayCount, want.NewMessageID, want.Actions = 1, "msg-dlq-1:replay:1", 2
	checkEntry(t, "replayed", replayed, want, true)
	h := mustHistory(t, s, "o-1")
	if len(h) != 2 {
		t.Fatalf("History = %+v, want stored and replayed (a claim writes none)", h)
	}
	checkAudit(t, h[1], dlstore.AuditEntry{EntryID: e.ID, OrderID: "o-1", N: 2, At: at(101), Action: "replayed",
		From: dlstore.ReplayDue, To: dlstore.Replayed, Actor: "tester", Source: e.Source, SequenceNumber: e.SequenceNumber,
		MessageID: e.MessageID, Reason: e.Reason, NewMessageID: "msg-dlq-1:replay:1", Detail: "by the suite"})
	if es, err := s.List(ctx, dlstore.NotClosed()); err != nil || len(es) != 0 {
		t.Errorf("List(not closed) after the replay = %d, %v; want none", len(es), err)
	}
}

func testRestore(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	e := entry(dlstore.Poison, 1, "o-1", 0)
	e.Reason = "InvalidPayload"
	mustPut(t, s, e)
	mustTransition(t, s, e.ID, audited(dlstore.Archived, 5, "archived"))
	if es, err := s.List(ctx, dlstore.NotClosed()); err != nil || len(es) != 0 {
		t.Fatalf("List(not closed) with the entry archived = %d, %v; want none", len(es), err)
	}
	if es, err := s.List(ctx, dlstore.Filter{States: []dlstore.State{dlstore.Archived}}); err != nil || len(es) != 1 {
		t.Fatalf("List(archived) = %d, %v; want the entry", len(es), err)
	}
	restored := mustTransition(t, s, e.ID, audited(dlstore.Open, 9, "restored"))
	want := stored(e)
	want.UpdatedAt, want.Actions = at(9), 3
	checkEntry(t, "restored", restored, want, true)
	es, err := s.List(ctx, dlstore.NotClosed())
	if err != nil || len(es) != 1 {
		t.Fatalf("List(not closed) after the restore = %d, %v; want the entry", len(es), err)
	}
	checkEntry(t, "List(not closed) after the restore", es[0], want, false)
	h := mustHistory(t, s, "o-1")
	if got := actions(h); got != "stored/open,archived/archived,restored/open" || h[2].From != dlstore.Archived {
		t.Errorf("History = %s (last from %s), want stored/open,archived/archived,restored/open (from archived)", got, h[2].From)
	}
}

func testHistory(t *testing.T, s dlstore.Store) {
	a1, a2 := entry(dlstore.DLQ, 1, "o-a", 0), entry(dlstore.Poison, 2, "o-a", 2)
	b1 := entry(dlstore.DLQ, 3, "o-b", 1)
	for _, e := range []dlstore.Entry{a1, a2, b1} {
		mustPut(t, s, e)
	}
	mustTransition(t, s, a1.ID, audited(dlstore.Left, 10, "left"))
	mustTransition(t, s, b1.ID, audited(dlstore.Archived, 11, "archived"))
	mustTransition(t, s, a2.ID, dlstore.Transition{To: dlstore.ReplayDue, At: at(12), ClaimedBy: "x"})
	mustTransition(t, s, a2.ID, audited(dlstore.Replayed, 13, "replayed"))
	mustTransition(t, s, a1.ID, audited(dlstore.Discarded, 14, "discarded"))

	type step struct {
		entry string
		n     int
		at    time.Time
		to    dlstore.State
	}
	render := func(h []dlstore.AuditEntry) []step {
		out := []step{}
		for _, a := range h {
			out = append(out, step{a.EntryID, a.N, a.At.UTC(), a.To})
		}
		return out
	}
	tests := []struct {
		order string
		want  []step
	}{
		{"o-a", []step{{a1.ID, 1, at(0), dlstore.Open}, {a2.ID, 1, at(2), dlstore.Open}, {a1.ID, 2, at(10), dlstore.Left},
			{a2.ID, 2, at(13), dlstore.Replayed}, {a1.ID, 3, at(14), dlstore.Discarded}}},
		{"o-b", []step{{b1.ID, 1, at(1), dlstore.Open}, {b1.ID, 2, at(11), dlstore.Archived}}},
		{"o-none", []step{}},
		{"", []step{{a1.ID, 1, at(0), dlstore.Open}, {b1.ID, 1, at(1), dlstore.Open}, {a2.ID, 1, at(2), dlstore.Open},
			{a1.ID, 2, at(10), dlstore.Left}, {b1.ID, 2, at(11), dlstore.Archived}, {a2.ID, 2, at(13), dlstore.Replayed},
			{a1.ID, 3, at(14), dlstore.Discarded}}},
	}
	for _, tt := range tests {
		t.Run("order="+tt.order, func(t *testing.T) {
			h := mustHistory(t, s, tt.order)
			if got := render(h); !slices.Equal(got, tt.want) {
				t.Errorf("History(%q) =\n  %v\nwant\n  %v", tt.order, got, tt.want)
			}
			for _, a := range h {
				if tt.order != "" && a.OrderID != tt.order {
					t.Errorf("History(%q) holds an entry of order %q", tt.order, a.OrderID)
				}
			}
		})
	}
	if got := mustGet(t, s, a1.ID); got.Actions != 3 {
		t.Errorf("Actions of %s = %d, want 3 (its audit entries)", a1.ID, got.Actions)
	}
}

func testPurge(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	cutoff := at(100)
	type fixture struct {
		e  dlstore.Entry
		to dlstore.State // "" stays open
		// updated is when it was moved to its state.
		updated int
	}
	fx := []fixture{
		{entry(dlstore.DLQ, 1, "o-1", 0), dlstore.Replayed, 10},
		{entry(dlstore.DLQ, 2, "o-1", 1), dlstore.Archived, 20},
		{entry(dlstore.Poison, 3, "o-2", 2), dlstore.Discarded, 30},
		{entry(dlstore.Poison, 4, "o-2", 3), dlstore.Archived, 100}, // at the cutoff: kept
		{entry(dlstore.DLQ, 5, "o-3", 4), dlstore.Discarded, 200},   // after it: kept
		{entry(dlstore.DLQ, 6, "o-3", 5), "", 0},                    // open since at(5)
		{entry(dlstore.DLQ, 7, "o-3", 6), dlstore.Left, 7},
		{entry(dlstore.DLQ, 8, "o-4", 7), dlstore.ReplayDue, 8},
	}
	for _, f := range fx {
		mustPut(t, s, f.e)
		switch f.to {
		case "":
		case dlstore.ReplayDue:
			mustTransition(t, s, f.e.ID, dlstore.Transition{To: dlstore.ReplayDue, At: at(f.updated), ClaimedBy: "x"})
		default:
			mustTransition(t, s, f.e.ID, audited(f.to, f.updated, string(f.to)))
		}
	}
	purgeable := []string{fx[0].e.ID, fx[1].e.ID, fx[2].e.ID}

	n, err := s.Purge(ctx, cutoff, 2)
	if err != nil || n != 2 {
		t.Fatalf("Purge(max 2) = %d, %v; want 2", n, err)
	}
	gone := 0
	for _, id := range purgeable {
		if _, err := s.Get(ctx, id); errors.Is(err, dlstore.ErrNotFound) {
			gone++
		} else if err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
	}
	if gone != 2 {
		t.Errorf("after Purge(max 2) %d of the purgeable entries are gone, want 2", gone)
	}
	if n, err = s.Purge(ctx, cutoff, 10); err != nil || n != 1 {
		t.Fatalf("second Purge = %d, %v; want the last purgeable one", n, err)
	}
	if n, err = s.Purge(ctx, cutoff, 10); err != nil || n != 0 {
		t.Fatalf("third Purge = %d, %v; want 0", n, err)
	}
	// Even with a far cutoff, entries not closed stay.
	if n, err = s.Purge(ctx, at(1_000_000), 0); err != nil || n != 0 {
		t.Errorf("Purge(max 0) = %d, %v; want 0", n, err)
	}
	for _, id := range purgeable {
		if _, err := s.Get(ctx, id); !errors.Is(err, dlstore.ErrNotFound) {
			t.Errorf("Get(%s) after the purge: %v, want ErrNotFound", id, err)
		}
	}
	var kept []string
	for _, f := range fx[3:] {
		kept = append(kept, f.e.ID)
		if got := mustGet(t, s, f.e.ID); got.State != cmp.Or(f.to, dlstore.Open) {
			t.Errorf("kept %s is %s, want %s", f.e.ID, got.State, cmp.Or(f.to, dlstore.Open))
		}
	}
	h := mustHistory(t, s, "")
	for _, a := range h {
		if slices.Contains(purgeable, a.EntryID) {
			t.Errorf("audit entry %s #%d of a purged entry is still there", a.EntryID, a.N)
		}
	}
	// Kept entries keep their audit: stored, plus one per audited transition.
	want := map[string]int{kept[0]: 2, kept[1]: 2, kept[2]: 1, kept[3]: 2, kept[4]: 1}
	got := map[string]int{}
	for _, a := range h {
		got[a.EntryID]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("audit entries per kept entry = %v, want %v", got, want)
	}
	// A far cutoff takes the closed entries that are left, never the rest.
	if n, err = s.Purge(ctx, at(1_000_000), 100); err != nil || n != 2 {
		t.Errorf("Purge(far cutoff) = %d, %v; want the 2 closed ones left", n, err)
	}
	es, err := s.List(ctx, dlstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(es); !slices.Equal(got, kept[2:]) {
		t.Errorf("left after every purge: %v, want the not-closed %v", got, kept[2:])
	}
}

func ids(es []dlstore.Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func testOrderIDsThatAreNotKeys(t *testing.T, s dlstore.Store) {
	ctx := ctxFor(t)
	long := strings.Repeat("Ab9", 42) + "xy" // 128 characters
	orders := []string{"a/b", "#?", `back\slash`, "tab\tand\x01control", "del\x7f", long, "o'quote", "ü€", "o~1", "h~1"}
	byOrder := map[string][]string{}
	for i, o := range orders {
		for k := range 2 {
			e := entry(dlstore.Sources[k], int64(10*i+k), o, 10*i+k)
			mustPut(t, s, e)
			byOrder[o] = append(byOrder[o], e.ID)
		}
	}
	// An empty order id (a poison message without session) works too.
	empty := entry(dlstore.Poison, 999, "", 500)
	empty.SessionID = ""
	mustPut(t, s, empty)
	checkEntry(t, "Get of the entry without an order", mustGet(t, s, empty.ID), stored(empty), true)
	if es, err := s.List(ctx, dlstore.Filter{Source: dlstore.Poison, Since: at(500)}); err != nil || !slices.Equal(ids(es), []string{empty.ID}) {
		t.Errorf("List(poison since its time) = %v, %v; want the entry without an order", ids(es), err)
	}
	for _, o := range orders {
		t.Run(fmt.Sprintf("%q", o), func(t *testing.T) {
			es, err := s.List(ctx, dlstore.Filter{OrderID: o})
			if err != nil {
				t.Fatalf("List(order %q): %v", o, err)
			}
			if got := ids(es); !slices.Equal(got, byOrder[o]) {
				t.Errorf("List(order %q) = %v, want %v", o, got, byOrder[o])
			}
			for _, e := range es {
				if e.OrderID != o {
					t.Errorf("List(order %q) returned an entry of order %q", o, e.OrderID)
				}
			}
			h := mustHistory(t, s, o)
			if len(h) != 2 || h[0].EntryID != byOrder[o][0] || h[1].EntryID != byOrder[o][1] || h[0].OrderID != o {
				t.Errorf("History(%q) = %+v, want the stored entries of %v", o, h, byOrder[o])
			}
			mustTransition(t, s, byOrder[o][0], audited(dlstore.Left, 1000, "left"))
			if h, err := s.History(ctx, o); err != nil || len(h) != 3 {
				t.Errorf("History(%q) after a transition = %d entries, %v; want 3", o, len(h), err)
			}
		})
	}
	if h, err := s.History(ctx, ""); err != nil || len(h) != 2*len(orders)+1+len(orders) {
		t.Errorf("History(\"\") = %d entries, %v; want %d", len(h), err, 2*len(orders)+1+len(orders))
	}
}

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
	h := mustHistory(t, s, "o-1")
	if got := actions(h); got != "stored/open,archived/archived" {
		t.Errorf("History = %s, want stored/open,archived/archived (a claim and its release are no actions)", got)
	}
}
