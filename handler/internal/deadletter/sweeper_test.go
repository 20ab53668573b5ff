package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/sim"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlmem"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// fixture is a membroker with a queue and a poison queue (no sessions, so
// the test can dead-letter by abandoning), a dead-letter store, and a
// sweeper on a clock the test moves.
type fixture struct {
	ctx   context.Context
	mb    *membroker.Broker
	clk   *clock.ScaledClock
	store dlstore.Store
	mem   *dlmem.Store // the store when it is in memory (fault injection)
	q     deadletter.Queues
	log   sim.SyncBuffer
}

// newStore makes the store a fixture drains into; tests that need the real
// Table Storage backend replace it.
var newStore = func(t *testing.T) dlstore.Store { return dlmem.New() }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	f := &fixture{ctx: ctx, clk: clock.Scaled(1), q: deadletter.Queues{Queue: "order-status", PoisonQueue: "order-status-poison"}}
	f.mb = membroker.New(&membroker.Options{Clock: f.clk})
	if err := f.mb.CreateQueue(f.q.Queue, membroker.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	po := membroker.DefaultQueueOptions()
	po.MaxDeliveryCount = 10
	if err := f.mb.CreateQueue(f.q.PoisonQueue, po); err != nil {
		t.Fatal(err)
	}
	f.store = newStore(t)
	f.mem, _ = f.store.(*dlmem.Store)
	return f
}

func (f *fixture) options(o deadletter.Options) deadletter.Options {
	o.Queues = f.q
	if o.Policy == (deadletter.Policy{}) {
		o.Policy = deadletter.Policy{Cooldown: 10 * time.Minute, MaxReplays: 3}
	}
	if o.RatePerSecond == 0 {
		o.RatePerSecond = 1000
	}
	o.Now = f.clk.Now
	o.ReceiveWait = time.Millisecond
	o.Logger = slog.New(slog.NewJSONHandler(&f.log, nil))
	return o
}

func (f *fixture) sweeper(o deadletter.Options) *deadletter.Sweeper {
	return deadletter.New(f.mb, f.store, f.options(o))
}

// deadLetter puts a message on the queue's dead-letter subqueue the way
// Service Bus does: five failed deliveries.
func (f *fixture) deadLetter(t *testing.T, id, session string) {
	t.Helper()
	f.deadLetterMsg(t, broker.Message{MessageID: id, SessionID: session, Subject: "OrderStatusChanged",
		Body: []byte(`{"orderId":"` + session + `"}`), ApplicationProperties: map[string]any{"tenant": "t-1"}})
}

func (f *fixture) deadLetterMsg(t *testing.T, m broker.Message) {
	t.Helper()
	if err := f.mb.Send(f.ctx, f.q.Queue, m); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		got, err := f.mb.Receive(f.ctx, broker.Source{Queue: f.q.Queue}, 1, 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("Receive: %d, %v", len(got), err)
		}
		if err := f.mb.Abandon(f.ctx, broker.Source{Queue: f.q.Queue}, got[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// park sends a parked copy as the handler does.
func (f *fixture) park(t *testing.T, original, reason string) {
	t.Helper()
	if err := f.mb.Send(f.ctx, f.q.PoisonQueue, broker.Message{MessageID: original + ":parked", Subject: "OrderStatusChanged",
		Body: []byte("body of " + original), ApplicationProperties: map[string]any{
			broker.PropertyDeadLetterReason: reason, broker.PropertyDeadLetterErrorDescription: "because of " + original,
			"OriginalMessageId": original, "OriginalSessionId": strings.Split(original, ":")[0]}}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) peek(t *testing.T, k dlstore.Source) []broker.Received {
	t.Helper()
	got, err := broker.PeekAll(f.ctx, f.mb, f.q.Source(k))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// queued is what waits on order-status (the replays), by MessageId.
func (f *fixture) queued(t *testing.T) map[string]broker.Received {
	t.Helper()
	out := map[string]broker.Received{}
	got, err := broker.PeekAll(f.ctx, f.mb, broker.Source{Queue: f.q.Queue})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got {
		out[m.MessageID] = m
	}
	return out
}

func (f *fixture) run(t *testing.T, s *deadletter.Sweeper) deadletter.Report {
	t.Helper()
	rep, err := s.Run(f.ctx, deadletter.RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func (f *fixture) entries(t *testing.T, fl dlstore.Filter) []dlstore.Entry {
	t.Helper()
	got, err := f.store.List(f.ctx, fl)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (f *fixture) byMessage(t *testing.T) map[string]dlstore.Entry {
	t.Helper()
	out := map[string]dlstore.Entry{}
	for _, e := range f.entries(t, dlstore.Filter{}) {
		out[e.MessageID] = e
	}
	return out
}

// actions counts the audit entries of every order by action.
func (f *fixture) actions(t *testing.T) map[string]int {
	t.Helper()
	h, err := f.store.History(f.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, a := range h {
		out[a.Action]++
	}
	return out
}

func TestSweepDrainsThenAppliesThePolicy(t *testing.T) {
	f := newFixture(t)
	s := f.sweeper(deadletter.Options{})
	f.deadLetter(t, "o-1:2", "o-1")
	f.deadLetter(t, "o-2:3", "o-2")
	f.park(t, "o-3:1", "InvalidPayload")
	f.park(t, "o-4:5", "InvalidTransition")
	f.park(t, "o-5:2", "RetryWindowExceeded")

	rep := f.run(t, s)
	for _, k := range dlstore.Sources {
		if got := f.peek(t, k); len(got) != 0 {
			t.Errorf("%s after the drain holds %d messages, want none (every one stored, then completed)", k, len(got))
		}
	}
	if rep.Counts[deadletter.ActionStored] != 5 || rep.Counts[deadletter.ActionArchive] != 1 || rep.Counts[deadletter.ActionLeave] != 1 ||
		rep.Counts[deadletter.ActionWait] != 3 {
		t.Errorf("first run counts = %v, want stored 5, archived 1, left 1, wait 3", rep.Counts)
	}
	got := f.byMessage(t)
	for id, want := range map[string]dlstore.State{"o-1:2": dlstore.Open, "o-2:3": dlstore.Open, "o-3:1:parked": dlstore.Archived,
		"o-4:5:parked": dlstore.Left, "o-5:2:parked": dlstore.Open} {
		if got[id].State != want {
			t.Errorf("entry %s is %q, want %s", id, got[id].State, want)
		}
	}
	if e := got["o-4:5:parked"]; e.OrderID != "o-4" || e.Reason != "InvalidTransition" || string(e.Body) != "body of o-4:5" {
		t.Errorf("parked entry = order %q reason %q body %q", e.OrderID, e.Reason, e.Body)
	}

	f.clk.Advance(10 * time.Minute)
	rep = f.run(t, s)
	if rep.Counts[deadletter.ActionReplay] != 3 {
		t.Errorf("second run counts = %v, want replayed 3 (two dead letters, one retry window)", rep.Counts)
	}
	q := f.queued(t)
	r1, ok := q["o-1:2:replay:1"]
	if !ok || r1.SessionID != "o-1" || r1.ApplicationProperties["tenant"] != "t-1" || r1.ApplicationProperties["ReplayCount"] != int64(1) {
		t.Errorf("replay of o-1:2 = %+v (found %v), want its session, properties and ReplayCount 1", r1, ok)
	}
	if r5, ok := q["o-5:2:replay:1"]; !ok || r5.SessionID != "o-5" || r5.Subject != "OrderStatusChanged" {
		t.Errorf("replay of the parked retry = %+v (found %v), want its original session and subject", r5, ok)
	}
	if n := f.actions(t); n["stored"] != 5 || n["replayed"] != 3 || n["archived"] != 1 || n["left"] != 1 {
		t.Errorf("audit entries by action = %v, want stored 5, replayed 3, archived 1, left 1", n)
	}
	// A third run finds nothing to do.
	if rep = f.run(t, s); rep.Counts[deadletter.ActionReplay]+rep.Counts[deadletter.ActionArchive]+rep.Counts[deadletter.ActionLeave] != 0 {
		t.Errorf("third run acted again: %v", rep.Counts)
	}
}

func TestStatsLines(t *testing.T) {
	f := newFixture(t)
	s := f.sweeper(deadletter.Options{})
	f.deadLetter(t, "o-1:2", "o-1")
	f.park(t, "o-4:5", "InvalidTransition")
	f.park(t, "o-3:1", "InvalidPayload")
	rep := f.run(t, s)
	type line struct {
		Msg      string `json:"msg"`
		RunID    string `json:"run_id"`
		Source   string `json:"source"`
		Reason   string `json:"reason"`
		Depth    int    `json:"depth"`
		Age      *int64 `json:"oldest_age_seconds"`
		InQueue  *int   `json:"in_queue"`
		Left     *int   `json:"left"`
		Stored   *int   `json:"stored"`
		Unwanted any    `json:"order_id"`
	}
	got := map[string]line{}
	for _, raw := range rep.StatsLines {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("stats line %q: %v", raw, err)
		}
		if l.Msg != deadletter.StatsMessage || l.RunID != rep.RunID || l.Age == nil || l.InQueue == nil || l.Left == nil || l.Stored == nil {
			t.Errorf("stats line %q lacks a field", raw)
		}
		got[l.Source+"/"+l.Reason] = l
	}
	if l := got["dlq/MaxDeliveryCountExceeded"]; l.Depth != 1 || *l.Stored != 1 || *l.InQueue != 0 {
		t.Errorf("dlq line = %+v, want depth 1 (open in the store), stored 1, in queue 0", l)
	}
	if l := got["poison/InvalidTransition"]; l.Depth != 1 || *l.Left != 1 {
		t.Errorf("poison InvalidTransition line = %+v, want depth 1, left 1", l)
	}
	if l, ok := got["poison/InvalidPayload"]; !ok || l.Depth != 0 || *l.Stored != 1 {
		t.Errorf("poison InvalidPayload line = %+v (found %v), want depth 0 (archived in the run) and stored 1, so the alert sees it", l, ok)
	}
	if l, ok := got["poison-dlq/"]; !ok || l.Depth != 0 {
		t.Errorf("empty source line = %+v (found %v), want one line with reason \"\" and depth 0", l, ok)
	}
	if strings.Count(f.log.String(), `"msg":"deadletter_stats"`) != len(rep.StatsLines) {
		t.Errorf("logged %d stats lines, answered %d", strings.Count(f.log.String(), `"msg":"deadletter_stats"`), len(rep.StatsLines))
	}
}

// counting wraps a store and counts its writes.
type counting struct {
	dlstore.Store
	writes atomic.Int64
}

func (c *counting) Put(ctx context.Context, e dlstore.Entry, actor string) (bool, error) {
	c.writes.Add(1)
	return c.Store.Put(ctx, e, actor)
}

func (c *counting) Transition(ctx context.Context, e dlstore.Entry, t dlstore.Transition) (dlstore.Entry, error) {
	c.writes.Add(1)
	return c.Store.Transition(ctx, e, t)
}

func (c *counting) Purge(ctx context.Context, before time.Time, max int) (int, error) {
	c.writes.Add(1)
	return c.Store.Purge(ctx, before, max)
}

func TestDryRunChangesNothingAndAgreesWithTheSweep(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-1:2", "o-1")
	f.park(t, "o-3:1", "InvalidPayload")
	f.run(t, f.sweeper(deadletter.Options{})) // o-1:2 open, o-3:1 archived
	f.clk.Advance(11 * time.Minute)
	f.deadLetter(t, "o-2:3", "o-2") // waiting in Service Bus
	f.park(t, "o-4:5", "InvalidTransition")

	c := &counting{Store: f.store}
	dry := deadletter.New(f.mb, c, f.options(deadletter.Options{}))
	rep, err := ops(dry).DryRun(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.writes.Load() != 0 || len(f.peek(t, dlstore.DLQ)) != 1 || len(f.peek(t, dlstore.Poison)) != 1 {
		t.Fatalf("dry run wrote %d times or moved messages", c.writes.Load())
	}
	want := map[string]deadletter.Action{}
	for _, it := range rep.Items {
		want[it.MessageID] = it.Action
	}
	if want["o-1:2"] != deadletter.ActionReplay || want["o-2:3"] != deadletter.ActionWait || want["o-4:5:parked"] != deadletter.ActionLeave {
		t.Errorf("dry run = %v, want o-1:2 replayed, o-2:3 wait, o-4:5:parked left", want)
	}
	real := f.run(t, f.sweeper(deadletter.Options{}))
	did := map[string]deadletter.Action{}
	for _, it := range real.Items {
		did[it.MessageID] = it.Action
	}
	for id, a := range want {
		if a == deadletter.ActionWait {
			continue // a wait writes nothing and is not an item of a real run
		}
		if did[id] != a {
			t.Errorf("%s: dry run said %s, the sweep did %s", id, a, did[id])
		}
	}
}

func TestDryRunReportsWhatItCannotRead(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-1:2", "o-1")
	dry := deadletter.New(f.mb, downStore{}, f.options(deadletter.Options{}))
	rep, err := ops(dry).DryRun(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Unreadable) != 1 || !strings.Contains(rep.Unreadable[0], "dead-letter store") {
		t.Errorf("Unreadable = %q, want the store named", rep.Unreadable)
	}
	if len(rep.Items) != 1 || rep.Items[0].MessageID != "o-1:2" {
		t.Errorf("items = %+v, want the message still waiting in the DLQ reported", rep.Items)
	}
}

// downStore fails every call: the tables cannot be reached.
type downStore struct{ dlstore.Store }

func (downStore) Put(context.Context, dlstore.Entry, string) (bool, error) {
	return false, fmt.Errorf("down: %w", dlstore.ErrUnavailable)
}

func (downStore) List(context.Context, dlstore.Filter) ([]dlstore.Entry, error) {
	return nil, fmt.Errorf("down: %w", dlstore.ErrUnavailable)
}

func (downStore) Get(context.Context, string) (dlstore.Entry, error) {
	return dlstore.Entry{}, fmt.Errorf("down: %w", dlstore.ErrUnavailable)
}

// refusing refuses to store one message for itself (too large).
type refusing struct {
	dlstore.Store
	id string
}

func (r refusing) Put(ctx context.Context, e dlstore.Entry, actor string) (bool, error) {
	if e.MessageID == r.id {
		return false, fmt.Errorf("refused: %w", dlstore.ErrTooLarge)
	}
	return r.Store.Put(ctx, e, actor)
}

func TestOneMessageThatCannotBeStoredBlocksNothing(t *testing.T) {
	f := newFixture(t)
	f.park(t, "o-1:1", "InvalidPayload")
	f.park(t, "o-2:1", "InvalidPayload")
	f.park(t, "o-3:1", "InvalidPayload")
	s := deadletter.New(f.mb, refusing{f.store, "o-1:1:parked"}, f.options(deadletter.Options{}))
	for run := range 2 {
		rep := f.run(t, s)
		if rep.Failed != 1 {
			t.Errorf("run %d: failed %d, want 1 (the refused message, reported)", run, rep.Failed)
		}
		var failed []string
		for _, it := range rep.Items {
			if it.Error != "" {
				failed = append(failed, it.MessageID)
			}
		}
		if len(failed) != 1 || failed[0] != "o-1:1:parked" {
			t.Errorf("run %d: items with an error = %v, want the refused one named", run, failed)
		}
		left := f.peek(t, dlstore.Poison)
		if len(left) != 1 || left[0].MessageID != "o-1:1:parked" {
			t.Errorf("run %d: poison queue holds %d messages, want only the refused one (still there, not lost)", run, len(left))
		}
	}
	if n := f.actions(t); n["archived"] != 2 {
		t.Errorf("archived %d, want the 2 messages behind the refused one", n["archived"])
	}
}

func TestStoreOutageLosesNothing(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-1:2", "o-1")
	f.park(t, "o-3:1", "InvalidPayload")
	_, err := deadletter.New(f.mb, downStore{f.store}, f.options(deadletter.Options{})).Run(f.ctx, deadletter.RunOptions{})
	if !errors.Is(err, dlstore.ErrUnavailable) || deadletter.StatusFor(err) != 503 {
		t.Fatalf("Run with the store down = %v (status %d), want unavailable, 503", err, deadletter.StatusFor(err))
	}
	if len(f.peek(t, dlstore.DLQ)) != 1 || len(f.peek(t, dlstore.Poison)) != 1 {
		t.Fatal("a message left its queue while the store was down")
	}
	f.run(t, f.sweeper(deadletter.Options{}))
	if n := f.actions(t); n["stored"] != 2 || n["archived"] != 1 {
		t.Errorf("after the outage: %v, want both stored, the poison archived", n)
	}
}

// lockLosing loses the lock of the first n completes: the message goes back
// to its queue as a crash between store and complete would leave it.
type lockLosing struct {
	deadletter.Broker
	n *atomic.Int64
}

func (b lockLosing) Complete(ctx context.Context, src broker.Source, m broker.Received) error {
	if b.n.Add(-1) >= 0 {
		return fmt.Errorf("lost: %w", broker.ErrLockLost) // the lock runs out; the message comes back
	}
	return b.Broker.Complete(ctx, src, m)
}

func TestCrashBetweenStoreAndComplete(t *testing.T) {
	f := newFixture(t)
	f.park(t, "o-3:1", "InvalidTransition")
	var n atomic.Int64
	n.Store(1)
	rep, err := deadletter.New(lockLosing{f.mb, &n}, f.store, f.options(deadletter.Options{})).Run(f.ctx, deadletter.RunOptions{})
	if err != nil || rep.LockLost != 1 {
		t.Fatalf("Run = %v, lock lost %d; want no error and 1 lock lost", err, rep.LockLost)
	}
	f.clk.Advance(2 * time.Minute) // past the lock
	if len(f.peek(t, dlstore.Poison)) != 1 {
		t.Fatal("the message whose complete failed is not back on its queue")
	}
	f.run(t, f.sweeper(deadletter.Options{}))
	if len(f.peek(t, dlstore.Poison)) != 0 {
		t.Error("the next run did not complete it")
	}
	if got := f.entries(t, dlstore.Filter{}); len(got) != 1 {
		t.Errorf("%d entries, want 1 (stored once)", len(got))
	}
	if a := f.actions(t); a["stored"] != 1 || a["left"] != 1 {
		t.Errorf("audit = %v, want stored once, left once", a)
	}
}

// recordFailing fails transitions to target n times, after the send.
type recordFailing struct {
	dlstore.Store
	to dlstore.State
	n  *atomic.Int64
}

func (r recordFailing) Transition(ctx context.Context, e dlstore.Entry, t dlstore.Transition) (dlstore.Entry, error) {
	if t.To == r.to && r.n.Add(-1) >= 0 {
		return dlstore.Entry{}, fmt.Errorf("injected: %w", dlstore.ErrUnavailable)
	}
	return r.Store.Transition(ctx, e, t)
}

func TestCrashBetweenReplaySendAndRecord(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-1:2", "o-1")
	f.run(t, f.sweeper(deadletter.Options{}))
	f.clk.Advance(11 * time.Minute)
	var n atomic.Int64
	n.Store(1)
	if _, err := deadletter.New(f.mb, recordFailing{f.store, dlstore.Replayed, &n}, f.options(deadletter.Options{})).Run(f.ctx, deadletter.RunOptions{}); err == nil {
		t.Fatal("Run hid a failed record")
	}
	e := f.byMessage(t)["o-1:2"]
	if e.State != dlstore.ReplayDue || len(f.queued(t)) != 1 {
		t.Fatalf("after the failed record: entry %s, %d replays queued; want replay-due (claimed) and the replay sent", e.State, len(f.queued(t)))
	}
	// Within the claim, nobody sends it again.
	if rep := f.run(t, f.sweeper(deadletter.Options{})); rep.Counts[deadletter.ActionReplay] != 0 {
		t.Errorf("a run within the claim replayed again: %v", rep.Counts)
	}
	f.clk.Advance(deadletter.DefaultClaimTimeout)
	rep := f.run(t, f.sweeper(deadletter.Options{}))
	if rep.Counts[deadletter.ActionReplay] != 1 {
		t.Errorf("the run after the claim timed out: %v, want it to finish the replay", rep.Counts)
	}
	if e := f.byMessage(t)["o-1:2"]; e.State != dlstore.Replayed || e.NewMessageID != "o-1:2:replay:1" || e.ReplayCount != 1 {
		t.Errorf("entry = %s %s count %d, want replayed as o-1:2:replay:1, count 1", e.State, e.NewMessageID, e.ReplayCount)
	}
	if q := f.queued(t); len(q) != 1 {
		t.Errorf("%d replays queued, want 1 (the second send has the same MessageId, dropped by duplicate detection)", len(q))
	}
	if a := f.actions(t); a["replayed"] != 1 {
		t.Errorf("replayed audit entries = %d, want exactly 1", a["replayed"])
	}
}

func TestAFailedRecordIsRepeatedNeverSkipped(t *testing.T) {
	for _, to := range []dlstore.State{dlstore.Left, dlstore.Archived} {
		t.Run(string(to), func(t *testing.T) {
			f := newFixture(t)
			f.park(t, "o-1:1", map[dlstore.State]string{dlstore.Left: "InvalidTransition", dlstore.Archived: "InvalidPayload"}[to])
			var n atomic.Int64
			n.Store(1)
			rep, err := deadletter.New(f.mb, recordFailing{f.store, to, &n}, f.options(deadletter.Options{})).Run(f.ctx, deadletter.RunOptions{})
			if err == nil && rep.Failed == 0 {
				t.Fatal("a failed audit write was neither an error nor a failed item")
			}
			if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.Open {
				t.Fatalf("after a failed record the entry is %s, want open (no change without its audit entry)", e.State)
			}
			if a := f.actions(t); a[string(to)] != 0 {
				t.Fatalf("an audit entry %s was written for a change that did not happen", to)
			}
			f.run(t, f.sweeper(deadletter.Options{}))
			if e := f.byMessage(t)["o-1:1:parked"]; e.State != to {
				t.Errorf("the next run left it %s, want %s", e.State, to)
			}
			if a := f.actions(t); a[string(to)] != 1 {
				t.Errorf("%s audit entries = %d, want 1", to, a[string(to)])
			}
		})
	}
}

// sendCounting counts sends to the order-status queue by MessageId.
type sendCounting struct {
	deadletter.Broker
	mu    sync.Mutex
	sends map[string]int
}

func (b *sendCounting) Send(ctx context.Context, q string, m broker.Message) error {
	b.mu.Lock()
	b.sends[m.MessageID]++
	b.mu.Unlock()
	return b.Broker.Send(ctx, q, m)
}

func TestTwoSweepsAtOnce(t *testing.T) {
	f := newFixture(t)
	const n = 30
	for i := range n {
		f.deadLetter(t, fmt.Sprintf("o-%d:2", i), fmt.Sprintf("o-%d", i))
	}
	f.run(t, f.sweeper(deadletter.Options{}))
	f.clk.Advance(11 * time.Minute)
	b := &sendCounting{Broker: f.mb, sends: map[string]int{}}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := deadletter.New(b, f.store, f.options(deadletter.Options{})).Run(f.ctx, deadletter.RunOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if a := f.actions(t); a["replayed"] != n {
		t.Errorf("replayed audit entries = %d, want %d (one per action)", a["replayed"], n)
	}
	if q := f.queued(t); len(q) != n {
		t.Errorf("%d replays queued, want %d (each once in effect)", len(q), n)
	}
	for id, c := range b.sends {
		if c != 1 {
			t.Errorf("%s sent %d times: a claim should keep the other sweep off it", id, c)
		}
	}
}

func TestSweepWorksThroughEverythingDueWithinItsBudget(t *testing.T) {
	f := newFixture(t)
	const n = 250 // more than the old cap of 100 per run
	for i := range n {
		f.park(t, fmt.Sprintf("o-%d:1", i), "InvalidPayload")
	}
	rep := f.run(t, f.sweeper(deadletter.Options{}))
	if rep.Counts[deadletter.ActionArchive] != n || rep.Stopped != "" {
		t.Errorf("one run archived %d (stopped %q), want all %d", rep.Counts[deadletter.ActionArchive], rep.Stopped, n)
	}
	t.Run("a budget ends the run cleanly and the next goes on", func(t *testing.T) {
		f := newFixture(t)
		for i := range 5 {
			f.park(t, fmt.Sprintf("o-%d:1", i), "InvalidPayload")
		}
		s := f.sweeper(deadletter.Options{RatePerSecond: 20, Budget: 120 * time.Millisecond})
		rep := f.run(t, s)
		if rep.Stopped == "" || rep.Counts[deadletter.ActionArchive] >= 5 {
			t.Fatalf("a 120 ms budget at 20/s: archived %d, stopped %q; want a stop before all 5", rep.Counts[deadletter.ActionArchive], rep.Stopped)
		}
		for range 10 {
			if f.actions(t)["archived"] == 5 {
				return
			}
			f.run(t, s)
		}
		t.Errorf("later runs archived %d of 5", f.actions(t)["archived"])
	})
}

func TestRetentionPurgesClosedEntriesOnly(t *testing.T) {
	f := newFixture(t)
	f.park(t, "o-1:1", "InvalidPayload")
	f.park(t, "o-2:1", "InvalidTransition")
	s := f.sweeper(deadletter.Options{Retention: 24 * time.Hour})
	f.run(t, s)
	f.clk.Advance(25 * time.Hour)
	rep := f.run(t, s)
	if rep.Purged != 1 {
		t.Errorf("purged %d, want 1 (the archived entry)", rep.Purged)
	}
	got := f.byMessage(t)
	if _, ok := got["o-1:1:parked"]; ok {
		t.Error("the archived entry outlived the retention")
	}
	if got["o-2:1:parked"].State != dlstore.Left {
		t.Error("an entry left for a human was purged: open entries never expire")
	}
	if !strings.Contains(f.log.String(), `"msg":"deadletter_purged"`) {
		t.Error("the purge was not logged")
	}
}

func TestLargeMessageStoredAndReplayedByteForByte(t *testing.T) {
	f := newFixture(t)
	body := bytes.Repeat([]byte{0, 1, 2, 250, '"', '\\'}, (180<<10)/6)
	props := map[string]any{"flag": true, "n": int64(-7), "f": 2.5, "at": time.Date(2026, 12, 1, 9, 0, 0, 123e6, time.UTC)}
	for i := range 8 {
		props[fmt.Sprintf("big%d", i)] = strings.Repeat(string(rune('a'+i)), 7900)
	}
	f.deadLetterMsg(t, broker.Message{MessageID: "o-1:2", SessionID: "o-1", Subject: "OrderStatusChanged", Body: body, ApplicationProperties: props})
	s := f.sweeper(deadletter.Options{})
	f.run(t, s)
	if _, err := ops(s).Act(f.ctx, deadletter.ActionReplay, "o-1:2", nil, "cli:test"); err != nil {
		t.Fatal(err)
	}
	r, ok := f.queued(t)["o-1:2:replay:1"]
	if !ok || !bytes.Equal(r.Body, body) {
		t.Fatalf("replay found %v, body equal %v", ok, ok && bytes.Equal(r.Body, body))
	}
	for k, v := range props {
		got := r.ApplicationProperties[k]
		if tv, ok := v.(time.Time); ok {
			if gt, ok := got.(time.Time); !ok || !gt.Equal(tv) {
				t.Errorf("property %s = %#v, want %v", k, got, tv)
			}
			continue
		}
		if got != v {
			t.Errorf("property %s = %.40v (%T), want %.40v (%T)", k, got, got, v, v)
		}
	}
}

// staleList lists what the store held before: a sweep that raced another
// actor finds the entries changed when it reads them.
type staleList struct {
	dlstore.Store
	before []dlstore.Entry
}

func (s staleList) List(context.Context, dlstore.Filter) ([]dlstore.Entry, error) {
	return s.before, nil
}

func TestAnEntryClosedByAnotherActorMeanwhileIsSkipped(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-1:2", "o-1")
	f.run(t, f.sweeper(deadletter.Options{}))
	f.clk.Advance(11 * time.Minute)
	before := f.entries(t, dlstore.NotClosed())
	f.run(t, f.sweeper(deadletter.Options{})) // the other actor replays it
	rep, err := deadletter.New(f.mb, staleList{f.store, before}, f.options(deadletter.Options{})).Run(f.ctx, deadletter.RunOptions{})
	if err != nil || rep.Failed != 0 || rep.Counts[deadletter.ActionReplay] != 0 {
		t.Errorf("a sweep that listed the entry before another replayed it: %v, failed %d, counts %v; want it skipped quietly", err, rep.Failed, rep.Counts)
	}
	if a := f.actions(t); a["replayed"] != 1 {
		t.Errorf("replayed audit entries = %d, want 1", a["replayed"])
	}
}

// failingSend refuses every send to order-status.
type failingSend struct{ deadletter.Broker }

func (failingSend) Send(context.Context, string, broker.Message) error {
	return fmt.Errorf("down: %w", broker.ErrTransient)
}

func TestAFailedReplaySendReleasesTheClaim(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-1:2", "o-1")
	f.run(t, f.sweeper(deadletter.Options{}))
	f.clk.Advance(11 * time.Minute)
	rep, _ := deadletter.New(failingSend{f.mb}, f.store, f.options(deadletter.Options{})).Run(f.ctx, deadletter.RunOptions{})
	if rep.Failed != 1 {
		t.Errorf("failed %d, want the replay reported", rep.Failed)
	}
	if e := f.byMessage(t)["o-1:2"]; e.State != dlstore.Open || e.ClaimedBy != "" {
		t.Fatalf("after a failed send the entry is %s claimed by %q, want open and unclaimed (nothing was sent)", e.State, e.ClaimedBy)
	}
	if rep := f.run(t, f.sweeper(deadletter.Options{})); rep.Counts[deadletter.ActionReplay] != 1 {
		t.Errorf("the next run: %v, want the replay done at once (no claim to time out)", rep.Counts)
	}
}

// outage is a store that fails every call with dlstore.ErrUnavailable
// while down is set (reads included when reads is set too), and counts
// the Puts it refused.
type outage struct {
	dlstore.Store
	down, reads atomic.Bool
	refused     atomic.Int64
}

func (o *outage) err(op string) error {
	return fmt.Errorf("outage: %s: %w", op, dlstore.ErrUnavailable)
}

func (o *outage) Put(ctx context.Context, e dlstore.Entry, actor string) (bool, error) {
	if o.down.Load() {
		o.refused.Add(1)
		return false, o.err("put")
	}
	return o.Store.Put(ctx, e, actor)
}

func (o *outage) Get(ctx context.Context, id string) (dlstore.Entry, error) {
	if o.down.Load() && o.reads.Load() {
		return dlstore.Entry{}, o.err("get")
	}
	return o.Store.Get(ctx, id)
}

func (o *outage) List(ctx context.Context, f dlstore.Filter) ([]dlstore.Entry, error) {
	if o.down.Load() && o.reads.Load() {
		return nil, o.err("list")
	}
	return o.Store.List(ctx, f)
}

func (o *outage) Transition(ctx context.Context, e dlstore.Entry, t dlstore.Transition) (dlstore.Entry, error) {
	if o.down.Load() {
		return dlstore.Entry{}, o.err("transition")
	}
	return o.Store.Transition(ctx, e, t)
}

func (o *outage) Purge(ctx context.Context, before time.Time, max int) (int, error) {
	if o.down.Load() {
		return 0, o.err("purge")
	}
	return o.Store.Purge(ctx, before, max)
}

// deliveries sums the delivery counts of every message on every source,
// by MessageId.
func (f *fixture) deliveries(t *testing.T) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for _, k := range dlstore.Sources {
		for _, m := range f.peek(t, k) {
			out[string(k)+" "+m.MessageID] = m.DeliveryCount
		}
	}
	return out
}

// A store outage must not spend the delivery counts of what waits on the
// sources: the poison queue dead-letters a message after 10 deliveries
// (infra/app/servicebus.bicep), which would overwrite a parked message's
// reason with MaxDeliveryCountExceeded on poison-dlq, where the policy
// leaves it for a human instead of replaying it.
func TestStoreOutageSpendsNoDeliveryCount(t *testing.T) {
	f := newFixture(t)
	f.park(t, "o-1:1", deadletter.ReasonRetryWindowExceeded)
	st := &outage{Store: f.store}
	st.down.Store(true)
	st.reads.Store(true)
	s := deadletter.New(f.mb, st, f.options(deadletter.Options{}))
	before := f.deliveries(t)
	for run := range 12 { // more than the poison queue's 10 deliveries, one run per 5-minute timer
		_, err := s.Run(f.ctx, deadletter.RunOptions{})
		if !errors.Is(err, dlstore.ErrUnavailable) {
			t.Fatalf("run %d with the store down = %v, want unavailable", run, err)
		}
		f.clk.Advance(5 * time.Minute)
	}
	if got := f.deliveries(t); !maps.Equal(got, before) {
		t.Fatalf("after 12 runs with the store down, delivery counts = %v, want them unchanged: %v", got, before)
	}
	if st.refused.Load() != 0 {
		t.Errorf("%d Puts tried with the store down: a run should not receive what it cannot store", st.refused.Load())
	}
	if pd := f.peek(t, dlstore.PoisonDLQ); len(pd) != 0 {
		t.Fatalf("poison-dlq holds %s (%s): the outage moved the parked message", pd[0].MessageID, pd[0].DeadLetterReason)
	}
	p := f.peek(t, dlstore.Poison)
	if len(p) != 1 || p[0].DeadLetterReason != deadletter.ReasonRetryWindowExceeded {
		t.Fatalf("poison queue = %+v, want the parked message with its own reason", p)
	}

	st.down.Store(false) // the store is back
	f.run(t, s)
	e, ok := f.byMessage(t)["o-1:1:parked"]
	if !ok || e.Source != dlstore.Poison || e.Reason != deadletter.ReasonRetryWindowExceeded || e.DeliveryCount != 1 {
		t.Fatalf("after the outage the parked message is stored as %+v, want source poison, reason %s, delivery count 1",
			e, deadletter.ReasonRetryWindowExceeded)
	}
	f.clk.Advance(11 * time.Minute) // past the cool-down
	f.run(t, s)
	q := f.queued(t)
	if n := f.actions(t); n["replayed"] != 1 || len(q) != 1 {
		t.Errorf("after the cool-down: actions %v, %d messages on order-status; want it replayed per policy", n, len(q))
	}
}

// When the store fails its first write after the probe passed (reads work,
// writes are refused), a run stops receiving from every source at once:
// only the one message in hand is given back, one delivery spent.
func TestAFailedStoreWriteStopsEveryReceive(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		f.deadLetter(t, fmt.Sprintf("o-%d:1", i), fmt.Sprintf("o-%d", i))
		f.park(t, fmt.Sprintf("o-%d:2", i), deadletter.ReasonRetryWindowExceeded)
	}
	st := &outage{Store: f.store}
	st.down.Store(true) // writes only
	s := deadletter.New(f.mb, st, f.options(deadletter.Options{}))
	before := f.deliveries(t)
	if _, err := s.Run(f.ctx, deadletter.RunOptions{}); !errors.Is(err, dlstore.ErrUnavailable) {
		t.Fatalf("run with writes refused = %v, want unavailable", err)
	}
	var spent int32
	for id, n := range f.deliveries(t) {
		spent += n - before[id]
	}
	if spent != 1 || st.refused.Load() != 1 {
		t.Errorf("one run with writes refused spent %d deliveries and tried %d Puts; want 1 and 1 (stop at the first failed write)",
			spent, st.refused.Load())
	}
}
