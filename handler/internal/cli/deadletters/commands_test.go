package deadletters

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlmem"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Point 5: when the store cannot be read, sweep --dry-run and stats name
// it, still report what waits in Service Bus, and exit 1; a source that
// cannot be peeked is named the same way.
func TestUnreadablePartsAreNamedAndTheRestReported(t *testing.T) {
	f := newFixture(t)
	f.deadLetter("m-1", "o-1")
	f.deadLetter("m-2", "o-2")
	f.park("m-3", "o-3", order.ReasonInvalidPayload, "bad json")
	r := f.record()
	f.st.Fail(dlmem.OpList, 100)
	for _, args := range [][]string{{"sweep", "--dry-run"}, {"stats"}} {
		res := f.run(args...)
		if res.code != exitFailure {
			t.Errorf("%q: exit %d, want 1", args, res.code)
		}
		oneLineErr(t, res.stderr)
		if !strings.Contains(res.stderr, "could not read the dead-letter store") {
			t.Errorf("%q: stderr %q does not name the store", args, res.stderr)
		}
		for _, id := range []string{"m-1", "m-2"} {
			if args[0] == "sweep" && !strings.Contains(res.stdout, id) {
				t.Errorf("%q: the message %s in Service Bus is not reported:\n%s", args, id, res.stdout)
			}
		}
		if args[0] == "stats" && !strings.Contains(res.stdout, "MaxDeliveryCountExceeded") {
			t.Errorf("stats lost the dlq:\n%s", res.stdout)
		}
	}
	if w := r.written(); len(w) != 0 {
		t.Errorf("a dry run and stats wrote: %v", w)
	}

	f.st.Fail(dlmem.OpList, 0)
	r.failPeek[f.q.Source(dlstore.Poison)] = true
	res := f.run("sweep", "--dry-run", "--json")
	if res.code != exitFailure || !strings.Contains(res.stderr, "order-status-poison") {
		t.Errorf("sweep --dry-run with the poison queue unreadable: exit %d, stderr %q", res.code, res.stderr)
	}
	ls := lines(t, res.stdout)
	if len(ls) != 3 { // m-1, m-2, then the summary
		t.Fatalf("want the two dlq messages and a summary, got %d lines:\n%s", len(ls), res.stdout)
	}
	if u, _ := ls[2]["unreadable"].([]any); len(u) != 1 {
		t.Errorf("summary %v: want one unreadable part", ls[2])
	}
	res = f.run("stats", "--json")
	if res.code != exitFailure || !strings.Contains(res.stderr, "could not read order-status-poison") {
		t.Errorf("stats with the poison queue unreadable: exit %d, stderr %q", res.code, res.stderr)
	}
	oneLineErr(t, res.stderr)
	var dlq float64
	for _, l := range lines(t, res.stdout) {
		if l["source"] == "dlq" {
			dlq += l["depth"].(float64)
		}
	}
	if dlq != 2 {
		t.Errorf("stats lost the dlq while the poison queue was unreadable:\n%s", res.stdout)
	}
}

// A dry run writes nothing: no receive, no store write, no send, and the
// messages stay where they are; bulk --dry-run likewise.
func TestDryRunsWriteNothing(t *testing.T) {
	f := newFixture(t)
	f.deadLetter("m-1", "o-1")
	f.park("m-2", "o-2", order.ReasonInvalidPayload, "bad json")
	old := f.put(dlstore.DLQ, 90, "m-9", "o-9", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.clk.Advance(time.Hour)
	r := f.record()
	res := f.must("sweep", "--dry-run")
	for _, want := range []string{"would be replayed", "would be archived", "m-1", "m-2", old.ID} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, res.stdout)
		}
	}
	f.must("replay", "--source", "dlq", "--dry-run")
	f.must("discard", "--id", old.ID, "--dry-run")
	if w := r.written(); len(w) != 0 {
		t.Errorf("dry runs wrote: %v", w)
	}
	if n := len(f.peek(f.q.Source(dlstore.DLQ))) + len(f.peek(f.q.Source(dlstore.Poison))); n != 2 {
		t.Errorf("%d messages left on the sources, want 2", n)
	}
	if st := f.entry(old.ID).State; st != dlstore.Open {
		t.Errorf("entry is %s after dry runs", st)
	}
}

// sweep --dry-run says, per message and entry, what sweep then does.
func TestSweepAgreesWithItsDryRun(t *testing.T) {
	f := newFixture(t)
	f.put(dlstore.DLQ, 1, "due", "o-1", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.put(dlstore.Poison, 2, "human:parked", "o-2", order.ReasonInvalidTransition, "Shipped after Delivered")
	f.clk.Advance(time.Hour)
	f.put(dlstore.DLQ, 3, "cooling", "o-3", broker.ReasonTTLExpired, "expired")
	f.deadLetter("fresh", "o-4")
	f.park("bad", "o-5", order.ReasonInvalidPayload, "bad json")
	dry := map[string]string{}
	for _, l := range lines(t, f.must("sweep", "--dry-run", "--json").stdout) {
		if id, ok := l["message_id"].(string); ok {
			dry[id] = l["action"].(string)
		}
	}
	want := map[string]string{"due": "replayed", "human:parked": "left", "cooling": "wait", "fresh": "wait", "bad:parked": "archived"}
	for id, a := range want {
		if dry[id] != a {
			t.Errorf("dry run: %s would be %q, want %q (all: %v)", id, dry[id], a, dry)
		}
	}
	res := f.must("sweep", "--json")
	did := map[string]string{}
	for _, l := range lines(t, res.stdout) {
		if id, ok := l["message_id"].(string); ok {
			did[id] = l["action"].(string)
		}
	}
	for id, a := range dry {
		if a == string(deadletter.ActionWait) {
			if _, ok := did[id]; ok {
				t.Errorf("sweep acted on %s (%s), the dry run said wait", id, did[id])
			}
			continue
		}
		if did[id] != a {
			t.Errorf("sweep did %q to %s, the dry run said %q", did[id], id, a)
		}
	}
	if n := len(f.peek(f.q.Source(dlstore.DLQ))) + len(f.peek(f.q.Source(dlstore.Poison))); n != 0 {
		t.Errorf("%d messages left on the sources after the sweep", n)
	}
}

// A bulk discard works on the set fixed when it starts: entries stored
// while it runs are untouched.
func TestBulkDiscardKeepsItsSet(t *testing.T) {
	f := newFixture(t)
	var set []string
	for i := range 4 {
		set = append(set, f.put(dlstore.Poison, int64(i+1), "old-"+string(rune('a'+i))+":parked", "o-1", order.ReasonInvalidTransition, "x").ID)
	}
	r := f.record()
	var late []string
	r.beforeTransition = func(n int) {
		if n <= 2 { // new poison arrives during the first two discards
			f.clk.Advance(time.Second)
			late = append(late, f.put(dlstore.Poison, int64(100+n), "new-"+string(rune('a'+n))+":parked", "o-1", order.ReasonInvalidTransition, "x").ID)
		}
	}
	res := f.must("discard", "--source", "poison", "--reason", order.ReasonInvalidTransition, "--yes")
	if !strings.Contains(res.stdout, "4 dead letters match") || !strings.Contains(res.stdout, "discard: 4 of 4 done, 0 failed") {
		t.Errorf("count and closing count:\n%s", res.stdout)
	}
	states := f.states()
	for _, id := range set {
		if states[id] != dlstore.Discarded {
			t.Errorf("%s is %s, want discarded", id, states[id])
		}
	}
	if len(late) != 2 {
		t.Fatalf("%d late entries", len(late))
	}
	for _, id := range late {
		if states[id] != dlstore.Open {
			t.Errorf("%s arrived after the start and is %s, want open", id, states[id])
		}
	}
}

// More than one entry needs --yes or an answer on a terminal: "n" changes
// nothing (exit 1), "y" goes on.
func TestBulkAsksOnATerminal(t *testing.T) {
	f := newFixture(t)
	f.put(dlstore.Poison, 1, "a:parked", "o-1", order.ReasonInvalidTransition, "x")
	f.put(dlstore.Poison, 2, "b:parked", "o-2", order.ReasonInvalidTransition, "x")
	f.terminal = true
	f.stdin = strings.NewReader("n\n")
	res := f.run("archive", "--source", "poison")
	if res.code != exitFailure || !strings.Contains(res.stdout, "archive 2 dead letters? [y/N]") {
		t.Errorf("answer n: exit %d:\n%s", res.code, res.stdout)
	}
	for id, st := range f.states() {
		if st != dlstore.Open {
			t.Errorf("%s is %s after answering n", id, st)
		}
	}
	f.stdin = strings.NewReader("y\n")
	f.must("archive", "--source", "poison")
	for id, st := range f.states() {
		if st != dlstore.Archived {
			t.Errorf("%s is %s after answering y", id, st)
		}
	}
}

// A filter that selects nothing exits 1, changing nothing.
func TestNothingMatches(t *testing.T) {
	f := newFixture(t)
	f.put(dlstore.Poison, 1, "a:parked", "o-1", order.ReasonInvalidTransition, "x")
	for _, args := range [][]string{
		{"replay", "--reason", "NoSuchReason", "--yes"},
		{"list", "--order", "o-2"},
		{"groups", "--source", "dlq"},
		{"find", "--order", "o-2"},
	} { // an --id that names nothing is bad input: TestAMissingIDExits2AndAsksNothing
		res := f.run(args...)
		if res.code != exitFailure {
			t.Errorf("%q: exit %d, want 1", args, res.code)
		}
		oneLineErr(t, res.stderr)
	}
}

// replay --id sends the stored message back (no --yes: one entry), and
// find --order then shows the order's row, the entry replayed and its
// audit entries in time order.
func TestFindOrderAfterAReplay(t *testing.T) {
	f := newFixture(t)
	if _, err := f.orders.Insert(f.ctx, "o-1", order.State{Status: order.Status("Created"), LastSequence: 1,
		OccurredAt: f.clk.Now().Add(-time.Hour), UpdatedAt: f.clk.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	e := f.put(dlstore.DLQ, 7, "o-1:2", "o-1", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.put(dlstore.DLQ, 8, "o-2:2", "o-2", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.clk.Advance(time.Minute) // within the cool-down: a human decides
	res := f.must("replay", "--id", "o-1:2")
	if !strings.Contains(res.stdout, "as o-1:2:replay:1") {
		t.Errorf("replay: %s", res.stdout)
	}
	sent := f.peek(broker.Source{Queue: f.q.Queue})
	if len(sent) != 1 || sent[0].MessageID != "o-1:2:replay:1" || sent[0].SessionID != "o-1" || string(sent[0].Body) != string(e.Body) {
		t.Fatalf("sent %+v", sent)
	}
	ls := lines(t, f.must("find", "--order", "o-1", "--json").stdout)
	var kinds []string
	for _, l := range ls {
		kinds = append(kinds, l["kind"].(string))
	}
	if !slices.Equal(kinds, []string{"order", "entry", "audit", "audit"}) {
		t.Fatalf("kinds %v:\n%v", kinds, ls)
	}
	if o := ls[0]["order"].(map[string]any); o["status"] != "Created" || o["last_sequence"] != float64(1) {
		t.Errorf("order row %v", o)
	}
	if en := ls[1]["entry"].(map[string]any); en["state"] != "replayed" || en["new_message_id"] != "o-1:2:replay:1" {
		t.Errorf("entry %v", en)
	}
	a := ls[3]["audit"].(map[string]any)
	if a["action"] != "replayed" || !strings.HasPrefix(a["actor"].(string), "cli:") || a["new_message_id"] != "o-1:2:replay:1" || a["to"] != "replayed" {
		t.Errorf("audit entry %v", a)
	}
	if ls[2]["audit"].(map[string]any)["action"] != "stored" {
		t.Errorf("first audit entry %v", ls[2])
	}
	text := f.must("find", "--order", "o-1").stdout
	for _, want := range []string{"status Created, last sequence 1", "replayed by cli:", "stored by sweeper", e.ID, "now replayed, 1 replay, last as o-1:2:replay:1"} {
		if !strings.Contains(text, want) {
			t.Errorf("find lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "o-2") {
		t.Errorf("find --order o-1 shows o-2:\n%s", text)
	}
}

// replay --body checks the corrected body against the contract before
// anything is sent, and sends it when it is good.
func TestReplayWithACorrectedBody(t *testing.T) {
	f := newFixture(t)
	e := f.put(dlstore.Poison, 1, "o-1:2:parked", "o-1", order.ReasonInvalidPayload, "bad json")
	dir := t.TempDir()
	bad, good := filepath.Join(dir, "bad.json"), filepath.Join(dir, "good.json")
	if err := os.WriteFile(bad, []byte(`{"orderId":"o-1","status":"Teleported"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, updateBody("o-1", "Paid", 2), 0o600); err != nil {
		t.Fatal(err)
	}
	res := f.run("replay", "--id", e.ID, "--body", bad)
	if res.code != exitUsage {
		t.Errorf("bad body: exit %d, want 2 (%s)", res.code, res.stderr)
	}
	oneLineErr(t, res.stderr)
	if n := len(f.peek(broker.Source{Queue: f.q.Queue})); n != 0 || f.entry(e.ID).State != dlstore.Open {
		t.Fatalf("a refused body changed something: %d sent, entry %s", n, f.entry(e.ID).State)
	}
	res = f.must("replay", "--id", e.ID, "--body", good)
	sent := f.peek(broker.Source{Queue: f.q.Queue})
	if len(sent) != 1 || string(sent[0].Body) != string(updateBody("o-1", "Paid", 2)) || sent[0].SessionID != "o-1" {
		t.Fatalf("sent %+v", sent)
	}
	if got := f.entry(e.ID); got.State != dlstore.Replayed {
		t.Errorf("entry %s, want replayed", got.State)
	}
	if !strings.Contains(res.stdout, "resubmitted") {
		t.Errorf("a parked message replayed is resubmitted: %s", res.stdout)
	}
}

// archive, then restore: open again; restore of an open entry exits 1.
func TestArchiveAndRestore(t *testing.T) {
	f := newFixture(t)
	e := f.put(dlstore.Poison, 1, "o-1:2:parked", "o-1", order.ReasonInvalidTransition, "x")
	f.must("archive", "--id", e.ID)
	if st := f.entry(e.ID).State; st != dlstore.Archived {
		t.Fatalf("after archive: %s", st)
	}
	if out := f.must("list", "--state", "archived").stdout; !strings.Contains(out, e.ID) {
		t.Errorf("list --state archived lacks it:\n%s", out)
	}
	ls := lines(t, f.must("restore", "--id", "o-1:2", "--json").stdout)
	if len(ls) != 1 || ls[0]["action"] != "restored" || ls[0]["state"] != "open" {
		t.Errorf("restore --json: %v", ls)
	}
	if st := f.entry(e.ID).State; st != dlstore.Open {
		t.Errorf("after restore: %s", st)
	}
	res := f.run("restore", "--id", e.ID)
	if res.code != exitFailure {
		t.Errorf("restore of an open entry: exit %d, want 1", res.code)
	}
	oneLineErr(t, res.stderr)
}

func TestListFilters(t *testing.T) {
	f := newFixture(t)
	a := f.put(dlstore.DLQ, 1, "o-1:2", "o-1", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.clk.Advance(3 * time.Hour)
	b := f.put(dlstore.Poison, 2, "o-2:5:parked", "o-2", order.ReasonInvalidTransition, `order "o-2": Shipped after Delivered`)
	c := f.put(dlstore.Poison, 3, "o-3:5:parked", "o-3", order.ReasonInvalidTransition, `order "o-3": Shipped after Delivered`)
	f.clk.Advance(time.Hour)
	d := f.put(dlstore.PoisonDLQ, 4, "o-4:1:parked", "o-4", broker.ReasonTTLExpired, "expired")
	f.must("archive", "--id", d.ID)
	if b.Group != c.Group || a.Group == b.Group {
		t.Fatalf("groups %s %s %s", a.Group, b.Group, c.Group)
	}
	mid := b.StoredAt.Add(-time.Minute).UTC().Format(time.RFC3339)
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{a.ID, b.ID, c.ID}},
		{[]string{"--source", "poison"}, []string{b.ID, c.ID}},
		{[]string{"--reason", broker.ReasonMaxDeliveryCountExceeded}, []string{a.ID}},
		{[]string{"--group", b.Group}, []string{b.ID, c.ID}},
		{[]string{"--order", "o-3"}, []string{c.ID}},
		{[]string{"--since", "2h"}, []string{b.ID, c.ID}},
		{[]string{"--until", "2h"}, []string{a.ID}},
		{[]string{"--since", mid}, []string{b.ID, c.ID}},
		{[]string{"--text", "O-3"}, []string{c.ID}},
		{[]string{"--state", "archived"}, []string{d.ID}},
		{[]string{"--state", "open,archived", "--since", "90m"}, []string{b.ID, c.ID, d.ID}},
		{[]string{"--max", "1"}, []string{a.ID}},
	}
	for _, tt := range tests {
		ls := lines(t, f.must(append([]string{"list", "--json"}, tt.args...)...).stdout)
		var got []string
		for _, l := range ls {
			got = append(got, l["id"].(string))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("list %q = %v, want %v", tt.args, got, tt.want)
		}
	}
	res := f.run("list", "--since", "1h", "--until", "2h")
	if res.code != exitUsage || !strings.Contains(res.stderr, "is not before") {
		t.Errorf("since after until: exit %d %q", res.code, res.stderr)
	}
}

func TestGroupsAndStats(t *testing.T) {
	f := newFixture(t)
	f.put(dlstore.Poison, 2, "o-2:5:parked", "o-2", order.ReasonInvalidTransition, `order "o-2": Shipped after Delivered at 2026-11-29T10:00:00Z`)
	f.clk.Advance(time.Minute)
	f.put(dlstore.Poison, 3, "o-3:5:parked", "o-3", order.ReasonInvalidTransition, `order "o-3": Shipped after Delivered at 2026-11-30T11:00:00Z`)
	f.put(dlstore.DLQ, 4, "o-4:1", "o-4", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.deadLetter("o-5:1", "o-5")
	ls := lines(t, f.must("groups", "--json").stdout)
	if len(ls) != 2 {
		t.Fatalf("groups: %v", ls)
	}
	g := ls[0]
	if g["reason"] != order.ReasonInvalidTransition || g["count"] != float64(2) || g["orders"] != float64(2) || g["action"] != "left" ||
		g["first_seen"] == g["last_seen"] {
		t.Errorf("largest group %v", g)
	}
	if ls[1]["action"] != "wait" {
		t.Errorf("a dlq entry in its cool-down: policy %v", ls[1]["action"])
	}
	f.must("sweep") // leaves the two InvalidTransition entries; stores o-5:1
	for _, g := range lines(t, f.must("groups", "--json").stdout) {
		if g["reason"] == order.ReasonInvalidTransition && (g["action"] != "left" || g["states"].(map[string]any)["left"] != float64(2)) {
			t.Errorf("a group the sweep left for a human: %v", g)
		}
	}
	st := map[string]map[string]any{}
	for _, l := range lines(t, f.must("stats", "--json").stdout) {
		st[l["source"].(string)+"/"+l["reason"].(string)] = l
	}
	if x := st["poison/"+order.ReasonInvalidTransition]; x["depth"] != float64(2) || x["left"] != float64(2) || x["in_queue"] != float64(0) {
		t.Errorf("poison stats %v", x)
	}
	if x := st["dlq/"+broker.ReasonMaxDeliveryCountExceeded]; x["depth"] != float64(2) || x["in_queue"] != float64(0) {
		t.Errorf("dlq stats %v", x)
	}
	f.deadLetter("o-6:1", "o-6")
	for _, l := range lines(t, f.must("stats", "--json").stdout) {
		if l["source"] == "dlq" && l["in_queue"] != float64(1) {
			t.Errorf("a message not yet drained: %v", l)
		}
	}
}

// An action leaves alone the entries it does not take in their state, and
// says so first; when it takes none, nothing is done (exit 1).
func TestBulkLeavesAloneWhatItCannotTake(t *testing.T) {
	f := newFixture(t)
	a := f.put(dlstore.Poison, 1, "a:parked", "o-1", order.ReasonInvalidTransition, "x")
	b := f.put(dlstore.Poison, 2, "b:parked", "o-2", order.ReasonInvalidTransition, "x")
	f.must("discard", "--id", b.ID, "--yes")
	res := f.run("archive", "--source", "poison", "--state", "discarded", "--yes")
	if res.code != exitFailure || !strings.Contains(res.stderr, "1 dead letter matches, and archive does not take it in its state (discarded)") {
		t.Errorf("archive of discarded entries: exit %d, %q", res.code, res.stderr)
	}
	ls := lines(t, f.must("archive", "--source", "poison", "--state", "open,discarded", "--dry-run", "--json").stdout)
	if len(ls) != 3 || ls[0]["would"] != "archive" || ls[0]["id"] != a.ID || ls[1]["id"] != b.ID ||
		!strings.Contains(ls[1]["refused"].(string), "is discarded") || ls[2]["total"] != float64(1) || ls[2]["refused"] != float64(1) {
		t.Errorf("dry run: %v", ls)
	}
	res = f.must("archive", "--source", "poison", "--state", "open,discarded", "--yes")
	if !strings.Contains(res.stdout, "1 of them is left alone") || !strings.Contains(res.stdout, "archive: 1 of 1 done, 0 failed") {
		t.Errorf("archive:\n%s", res.stdout)
	}
	if st := f.states(); st[a.ID] != dlstore.Archived || st[b.ID] != dlstore.Discarded {
		t.Errorf("states %v", st)
	}
	res = f.run("replay", "--id", b.ID, "--dry-run")
	if res.code != exitFailure || !strings.Contains(res.stderr, "is discarded") {
		t.Errorf("dry run of a replay of a discarded entry: exit %d %q", res.code, res.stderr)
	}
}

// On a terminal a bulk action draws its progress on stderr and ends the
// line; off one it draws nothing. The closing count is printed either way.
func TestBulkProgressBar(t *testing.T) {
	for _, term := range []bool{true, false} {
		f := newFixture(t)
		for i := range 3 {
			f.put(dlstore.Poison, int64(i+1), fmt.Sprintf("o-%d:1:parked", i), fmt.Sprintf("o-%d", i), order.ReasonInvalidTransition, "x")
		}
		var out, errOut strings.Builder
		code := Run(f.ctx, []string{"archive", "--source", "poison", "--yes"}, &out, &errOut, Env{
			Getenv: func(k string) string { return f.env[k] }, IsTerminal: func() bool { return false },
			StderrIsTerminal: func() bool { return term },
			Connect: func(context.Context) (*Backend, error) {
				return &Backend{Broker: f.mb, Store: f.st, Orders: f.orders, Queues: f.q, Now: f.clk.Now}, nil
			}})
		if code != exitOK || !strings.Contains(out.String(), "archive: 3 of 3 done, 0 failed") {
			t.Errorf("terminal %v: exit %d:\n%s", term, code, out.String())
		}
		bar := strings.Contains(errOut.String(), "\rarchive [") && strings.Contains(errOut.String(), "] 3/3\n")
		if bar != term {
			t.Errorf("terminal %v: stderr %q", term, errOut.String())
		}
	}
}

// A bulk action's set is what list with the same filter shows when it
// starts, whatever the entries' stored_at says against the CLI's clock: an
// entry stamped by a clock ahead of it (another instance's) is in the dry
// run, in the question's count and in the real run, exactly as list shows
// it.
func TestBulkSetIsWhatListShows(t *testing.T) {
	for _, tc := range []struct {
		action string
		filter []string
		after  dlstore.State
	}{
		{"discard", []string{"--state", "left"}, dlstore.Discarded},
		{"archive", []string{"--source", "poison", "--state", "left"}, dlstore.Archived},
		{"replay", []string{"--reason", order.ReasonInvalidTransition, "--state", "left"}, dlstore.Replayed},
	} {
		t.Run(tc.action, func(t *testing.T) {
			f := newFixture(t)
			now := f.clk.Now()
			var want []string
			for i, at := range []time.Time{now.Add(-time.Hour), now, now.Add(2 * time.Hour)} { // the last ahead of the CLI's clock
				e := f.putAt(at, dlstore.Poison, int64(i+1), fmt.Sprintf("o-%d:3:parked", i), fmt.Sprintf("o-%d", i), order.ReasonInvalidTransition, "x")
				want = append(want, e.ID)
			}
			f.must("sweep") // the policy leaves InvalidTransition for a human
			ids := func(ls []map[string]any) []string {
				var out []string
				for _, l := range ls {
					if id, ok := l["id"].(string); ok {
						out = append(out, id)
					}
				}
				return out
			}
			listed := ids(lines(t, f.must(append([]string{"list", "--json"}, tc.filter...)...).stdout))
			if !slices.Equal(listed, want) {
				t.Fatalf("list %q = %v, want %v", tc.filter, listed, want)
			}
			dry := f.must(append([]string{tc.action, "--dry-run", "--json"}, tc.filter...)...)
			if got := ids(lines(t, dry.stdout)); !slices.Equal(got, listed) {
				t.Errorf("%s --dry-run %q acts on %v, list shows %v", tc.action, tc.filter, got, listed)
			}
			f.terminal, f.stdin = true, strings.NewReader("n\n")
			ask := f.run(append([]string{tc.action}, tc.filter...)...)
			if q := fmt.Sprintf("%s 3 dead letters? [y/N]", tc.action); ask.code != exitFailure || !strings.Contains(ask.stdout, q) {
				t.Errorf("the question: exit %d, want %q in:\n%s", ask.code, q, ask.stdout)
			}
			f.terminal, f.stdin = false, nil
			res := f.must(append([]string{tc.action, "--yes"}, tc.filter...)...)
			if done := fmt.Sprintf("%s: 3 of 3 done, 0 failed", tc.action); !strings.Contains(res.stdout, done) {
				t.Errorf("the real run: want %q in:\n%s", done, res.stdout)
			}
			for _, id := range want {
				if st := f.entry(id).State; st != tc.after {
					t.Errorf("%s is %s after %s, want %s", id, st, tc.action, tc.after)
				}
			}
		})
	}
}

// find --order prints the order row first, then the store's events in
// time order (the entry, then its audit entry), each with its time and no
// clock of its own: every time is real time. Nothing is said on stderr.
func TestFindPrintsTheOrderRowThenTheStore(t *testing.T) {
	f := newFixture(t)
	updated := f.clk.Now()
	f.clk.Advance(2 * time.Hour) // the entry is stored after the order row was written
	if _, err := f.orders.Insert(f.ctx, "o-1", order.State{Status: order.Status("Created"), LastSequence: 1,
		OccurredAt: updated.Add(-time.Minute), UpdatedAt: updated}); err != nil {
		t.Fatal(err)
	}
	e := f.put(dlstore.DLQ, 7, "o-1:2", "o-1", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	res := f.must("find", "--order", "o-1", "--json")
	if res.stderr != "" {
		t.Errorf("find --json: stderr %q, want nothing", res.stderr)
	}
	var got []string
	for _, l := range lines(t, res.stdout) {
		got = append(got, fmt.Sprint(l["kind"]))
		if _, ok := l["clock"]; ok {
			t.Errorf("find --json: a %q key in %v", "clock", l)
		}
	}
	if want := []string{"order", "entry", "audit"}; !slices.Equal(got, want) {
		t.Errorf("find --json kinds = %v, want %v", got, want)
	}
	res = f.must("find", "--order", "o-1")
	if res.stderr != "" {
		t.Errorf("find: stderr %q, want nothing", res.stderr)
	}
	ls := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(ls) != 4 || strings.Fields(ls[0])[0] != "TIME" || strings.Contains(ls[0], "CLOCK") ||
		!strings.HasPrefix(ls[1], stamp(updated.UTC())) || !strings.Contains(ls[1], "order row") ||
		!strings.HasPrefix(ls[2], stamp(e.StoredAt.UTC())) || !strings.Contains(ls[2], e.ID) {
		t.Errorf("find: want TIME WHAT DETAIL, the order row at %s, then the entry at %s:\n%s", stamp(updated.UTC()), stamp(e.StoredAt.UTC()), res.stdout)
	}
}

// discard --id asks on a terminal ("discard ID (MessageId, state)? [y/N]"
// on stdout, on stderr with --json) and goes on only for y or yes in any
// case; any other answer, an empty line or none changes nothing (exit 1,
// "nothing changed"). Off a terminal it needs --yes: without it, exit 2 in
// one line, nothing asked, nothing changed. --dry-run and --yes never
// ask; archive and replay of one entry never ask.
func TestDiscardByIDAsksFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		terminal  bool
		answer    string
		code      int
		discarded bool
		asked     string // "stdout", "stderr" or "" (not asked)
	}{
		{"y on a terminal", nil, true, "y\n", exitOK, true, "stdout"},
		{"YES on a terminal", nil, true, " YES \n", exitOK, true, "stdout"},
		{"n on a terminal", nil, true, "n\n", exitFailure, false, "stdout"},
		{"more than y", nil, true, "y es\n", exitFailure, false, "stdout"},
		{"an empty line", nil, true, "\n", exitFailure, false, "stdout"},
		{"no answer (end of input)", nil, true, "", exitFailure, false, "stdout"},
		{"--json asks on stderr", []string{"--json"}, true, "y\n", exitOK, true, "stderr"},
		{"off a terminal", nil, false, "y\n", exitUsage, false, ""},
		{"off a terminal with --yes", []string{"--yes"}, false, "", exitOK, true, ""},
		{"--yes on a terminal", []string{"--yes"}, true, "n\n", exitOK, true, ""},
		{"--dry-run", []string{"--dry-run"}, false, "", exitOK, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			e := f.put(dlstore.Poison, 1, "o-1:2:parked", "o-1", order.ReasonInvalidTransition, "x")
			f.terminal, f.stdin = tc.terminal, strings.NewReader(tc.answer)
			res := f.run(append([]string{"discard", "--id", e.ID}, tc.args...)...)
			if res.code != tc.code {
				t.Errorf("exit %d, want %d:\n%s%s", res.code, tc.code, res.stdout, res.stderr)
			}
			if got := f.entry(e.ID).State == dlstore.Discarded; got != tc.discarded {
				t.Errorf("discarded %v, want %v", got, tc.discarded)
			}
			q := fmt.Sprintf("discard %s (%s, open)? [y/N] ", e.ID, e.MessageID)
			inOut, inErr := strings.Contains(res.stdout, q), strings.Contains(res.stderr, q)
			if got := map[[2]bool]string{{true, false}: "stdout", {false, true}: "stderr", {false, false}: ""}[[2]bool{inOut, inErr}]; got != tc.asked {
				t.Errorf("asked on %q, want %q:\n%s%s", got, tc.asked, res.stdout, res.stderr)
			}
			if tc.asked != "" && !tc.discarded && !strings.Contains(res.stdout+res.stderr, "nothing changed") {
				t.Errorf("a refusal does not say nothing changed:\n%s%s", res.stdout, res.stderr)
			}
			if tc.code == exitUsage {
				oneLineErr(t, res.stderr)
				if !strings.Contains(res.stderr, "without --yes when stdin is not a terminal") || res.stdout != "" {
					t.Errorf("off a terminal: stdout %q, stderr %q", res.stdout, res.stderr)
				}
			}
		})
	}
	for _, args := range [][]string{{"archive"}, {"replay"}} {
		f := newFixture(t)
		e := f.put(dlstore.Poison, 1, "o-1:2:parked", "o-1", order.ReasonInvalidTransition, "x")
		f.terminal, f.stdin = true, strings.NewReader("n\n")
		if res := f.must(append(args, "--id", e.ID)...); strings.Contains(res.stdout, "[y/N]") {
			t.Errorf("%s --id asked:\n%s", args[0], res.stdout)
		}
	}
}
