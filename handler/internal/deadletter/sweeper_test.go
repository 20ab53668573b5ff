package deadletter_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/clock"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// fixture is a membroker with a queue and a poison queue (no sessions, so
// the test can dead-letter by abandoning), records on Azurite, and a
// sweeper on a clock the test moves.
type fixture struct {
	ctx     context.Context
	mb      *membroker.Broker
	clk     *clock.ScaledClock
	records *deadletter.TableStore
	q       deadletter.Queues
	log     bytes.Buffer
}

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
	svc, err := aztables.NewServiceClientFromConnectionString(testenv.Azurite(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.ToLower(rand.Text()[:10])
	f.records = deadletter.NewTableStore(svc, "audit"+suffix, "archive"+suffix)
	return f
}

func (f *fixture) sweeper(o deadletter.Options) *deadletter.Sweeper {
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
	return deadletter.New(f.mb, f.records, o)
}

// deadLetter puts a message on the queue's dead-letter subqueue the way
// Service Bus does: five failed deliveries.
func (f *fixture) deadLetter(t *testing.T, id, session string) {
	t.Helper()
	if err := f.mb.Send(f.ctx, f.q.Queue, broker.Message{MessageID: id, SessionID: session, Subject: "OrderStatusChanged",
		Body: []byte(`{"orderId":"` + session + `"}`), ApplicationProperties: map[string]any{"tenant": "t-1"}}); err != nil {
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
			broker.PropertyDeadLetterReason: reason, broker.PropertyDeadLetterErrorDescription: "because",
			"OriginalMessageId": original, "OriginalSessionId": strings.Split(original, ":")[0]}}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) peek(t *testing.T, k deadletter.Kind) []broker.Received {
	t.Helper()
	got, err := broker.PeekAll(f.ctx, f.mb, f.q.Source(k))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (f *fixture) run(t *testing.T, s *deadletter.Sweeper) deadletter.Report {
	t.Helper()
	rep, err := s.Run(f.ctx, deadletter.RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func TestSweepAppliesThePolicy(t *testing.T) {
	f := newFixture(t)
	s := f.sweeper(deadletter.Options{})
	f.deadLetter(t, "o-1:2", "o-1")
	f.park(t, "o-2:1", "InvalidPayload")
	f.park(t, "o-3:1", "UnknownSubject")
	f.park(t, "o-4:5", "InvalidTransition")

	rep := f.run(t, s)
	if got := rep.Counts; got[deadletter.ActionWait] != 1 || got[deadletter.ActionArchive] != 2 || got[deadletter.ActionLeave] != 1 {
		t.Errorf("first run counts = %v, want wait 1, archived 2, left 1", got)
	}
	if q := f.peek(t, deadletter.DLQ); len(q) != 1 || !q[0].Deferred {
		t.Fatalf("after the first run the DLQ holds %+v, want the one message set aside for its cool-down", q)
	}
	if p := f.peek(t, deadletter.Poison); len(p) != 1 || p[0].DeadLetterReason != "InvalidTransition" || !p[0].Deferred {
		t.Errorf("poison queue after the first run = %+v, want only the InvalidTransition, deferred", p)
	}
	archived, err := f.records.ListArchived(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(archived) != 2 || archived[0].OriginalMessageID != "o-2:1" || archived[0].Reason != "InvalidPayload" ||
		string(archived[0].Body) != "body of o-2:1" || archived[1].OriginalMessageID != "o-3:1" {
		t.Errorf("archive = %+v, want o-2:1 InvalidPayload and o-3:1 UnknownSubject with their bodies", archived)
	}

	// Within the cool-down a second run changes nothing on the DLQ.
	f.clk.Advance(9 * time.Minute)
	if rep := f.run(t, s); rep.Counts[deadletter.ActionReplay] != 0 {
		t.Errorf("run within the cool-down replayed: %v", rep.Counts)
	}
	if st := f.mb.Stats(f.q.Queue); st.Active != 0 {
		t.Errorf("order-status has %d messages within the cool-down, want 0", st.Active)
	}

	f.clk.Advance(time.Minute)
	rep = f.run(t, s)
	if rep.Counts[deadletter.ActionReplay] != 1 {
		t.Fatalf("run after the cool-down counts = %v, want replayed 1", rep.Counts)
	}
	replays := f.peekQueue(t)
	if len(replays) != 1 {
		t.Fatalf("order-status holds %d messages, want the replay", len(replays))
	}
	r := replays[0]
	if r.MessageID != "o-1:2:replay:1" || r.SessionID != "o-1" || r.ApplicationProperties["ReplayCount"] != int64(1) ||
		r.ApplicationProperties["ReplayedFromDeadLetter"] != "MaxDeliveryCountExceeded" || r.ApplicationProperties["tenant"] != "t-1" ||
		r.DeadLetterReason != "" {
		t.Errorf("replay = %+v", r)
	}
	if q := f.peek(t, deadletter.DLQ); len(q) != 0 {
		t.Errorf("DLQ after the replay holds %d messages, want 0", len(q))
	}
	audit, err := f.records.ListAudit(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[deadletter.Action]int{}
	for _, a := range audit {
		actions[a.Action]++
		if a.Actor != "sweeper" || a.At.IsZero() || a.MessageID == "" {
			t.Errorf("audit row %+v lacks who, when or what", a)
		}
		if a.Action == deadletter.ActionReplay && (a.NewMessageID != "o-1:2:replay:1" || a.SessionID != "o-1") {
			t.Errorf("replay audit row = %+v", a)
		}
	}
	if actions[deadletter.ActionSeen] != 1 || actions[deadletter.ActionArchive] != 2 || actions[deadletter.ActionLeave] != 1 || actions[deadletter.ActionReplay] != 1 {
		t.Errorf("audit actions = %v, want seen 1, archived 2, left 1, replayed 1", actions)
	}
}

func (f *fixture) peekQueue(t *testing.T) []broker.Received {
	t.Helper()
	got, err := broker.PeekAll(f.ctx, f.mb, broker.Source{Queue: f.q.Queue})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Twenty sweeps leave an InvalidTransition on the poison queue with its
// delivery count unchanged (abandoning it would move it to the poison
// queue's own DLQ at 10), still listed.
func TestTwentySweepsLeaveInvalidTransitionInPlace(t *testing.T) {
	f := newFixture(t)
	s := f.sweeper(deadletter.Options{})
	f.park(t, "o-5:3", "InvalidTransition")
	before := f.peek(t, deadletter.Poison)[0].DeliveryCount
	for i := range 20 {
		rep := f.run(t, s)
		var counted bool
		for _, st := range rep.Stats {
			if st.Source == deadletter.Poison && st.Reason == "InvalidTransition" && st.Depth == 1 {
				counted = true
			}
		}
		if !counted {
			t.Fatalf("sweep %d: stats %+v do not count the InvalidTransition", i+1, rep.Stats)
		}
	}
	p := f.peek(t, deadletter.Poison)
	if len(p) != 1 || p[0].DeliveryCount != before || p[0].MessageID != "o-5:3:parked" {
		t.Fatalf("after 20 sweeps the poison queue = %+v, want o-5:3:parked with delivery count %d", p, before)
	}
	if pd := f.peek(t, deadletter.PoisonDLQ); len(pd) != 0 {
		t.Errorf("the poison queue's DLQ holds %d messages, want 0", len(pd))
	}
	audit, _ := f.records.ListAudit(f.ctx)
	left := 0
	for _, a := range audit {
		if a.Action == deadletter.ActionLeave {
			left++
		}
	}
	if left != 1 {
		t.Errorf("audit has %d left rows after 20 sweeps, want 1 (set aside once)", left)
	}
}

func TestStatsLines(t *testing.T) {
	f := newFixture(t)
	s := f.sweeper(deadletter.Options{})
	f.park(t, "o-6:1", "InvalidTransition")
	f.park(t, "o-7:1", "InvalidTransition")
	f.clk.Advance(90 * time.Second)
	rep := f.run(t, s)
	want := map[string][2]int64{"dlq|": {0, 0}, "poison|InvalidTransition": {2, 90}, "poison-dlq|": {0, 0}}
	if len(rep.StatsLines) != len(want) {
		t.Fatalf("stats lines = %q, want %d", rep.StatsLines, len(want))
	}
	logged := f.log.String()
	for _, line := range rep.StatsLines {
		var l struct {
			Time, Level, Msg, RunID, Source, Reason string
			Depth, OldestAgeSeconds                 int64
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		keys := []string{"time", "level", "msg", "run_id", "source", "reason", "depth", "oldest_age_seconds"}
		if len(raw) != len(keys) {
			t.Errorf("line %q has keys %v, want exactly %v", line, raw, keys)
		}
		_ = json.Unmarshal([]byte(strings.NewReplacer(`"run_id"`, `"RunID"`, `"oldest_age_seconds"`, `"OldestAgeSeconds"`).Replace(line)), &l)
		if l.Msg != "deadletter_stats" || l.Level != "INFO" || l.RunID != rep.RunID {
			t.Errorf("line %q: msg, level or run_id wrong", line)
		}
		w, ok := want[l.Source+"|"+l.Reason]
		if !ok || l.Depth != w[0] || l.OldestAgeSeconds != w[1] {
			t.Errorf("line %q: depth %d age %d, want %v", line, l.Depth, l.OldestAgeSeconds, w)
		}
		if !strings.Contains(logged, line) {
			t.Errorf("line %q is not on the logger's output (stdout)", line)
		}
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	f := newFixture(t)
	s := f.sweeper(deadletter.Options{Policy: deadletter.Policy{Cooldown: 0, MaxReplays: 3}})
	f.deadLetter(t, "o-8:1", "o-8")
	f.park(t, "o-9:1", "InvalidPayload")
	before := [][]broker.Received{f.peek(t, deadletter.DLQ), f.peek(t, deadletter.Poison), f.peekQueue(t)}
	rep, err := s.Run(f.ctx, deadletter.RunOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts[deadletter.ActionReplay] != 1 || rep.Counts[deadletter.ActionArchive] != 1 {
		t.Errorf("dry run counts = %v, want replayed 1, archived 1", rep.Counts)
	}
	for _, it := range rep.Items {
		if it.Done || it.Why == "" {
			t.Errorf("dry-run item %+v: done or without a reason", it)
		}
	}
	after := [][]broker.Received{f.peek(t, deadletter.DLQ), f.peek(t, deadletter.Poison), f.peekQueue(t)}
	for i := range before {
		if len(before[i]) != len(after[i]) {
			t.Fatalf("source %d: %d messages before, %d after the dry run", i, len(before[i]), len(after[i]))
		}
		for j := range before[i] {
			b, a := before[i][j], after[i][j]
			if b.SequenceNumber != a.SequenceNumber || b.DeliveryCount != a.DeliveryCount || b.Deferred != a.Deferred {
				t.Errorf("source %d message %d changed: %+v -> %+v", i, j, b, a)
			}
		}
	}
	if a, _ := f.records.ListAudit(f.ctx); len(a) != 0 {
		t.Errorf("dry run wrote %d audit rows", len(a))
	}
	if a, _ := f.records.ListArchived(f.ctx); len(a) != 0 {
		t.Errorf("dry run archived %d messages", len(a))
	}
}

func TestBoundsPerRun(t *testing.T) {
	f := newFixture(t)
	s := f.sweeper(deadletter.Options{MaxPerRun: 2})
	for _, id := range []string{"a:1", "b:1", "c:1", "d:1", "e:1"} {
		f.park(t, id, "InvalidPayload")
	}
	rep := f.run(t, s)
	if rep.Counts[deadletter.ActionArchive] != 2 || rep.Stopped == "" {
		t.Errorf("run with DEAD_LETTER_SWEEP_MAX 2: counts %v stopped %q, want 2 archived and a reason to stop", rep.Counts, rep.Stopped)
	}
	if p := f.peek(t, deadletter.Poison); len(p) != 3 {
		t.Errorf("poison queue holds %d, want 3 left for the next run", len(p))
	}
	for _, m := range f.peek(t, deadletter.Poison) {
		if m.DeliveryCount != 1 || m.Deferred {
			t.Errorf("message %s not acted on was disturbed: count %d deferred %v", m.MessageID, m.DeliveryCount, m.Deferred)
		}
	}
	f.run(t, s)
	f.run(t, s)
	if p := f.peek(t, deadletter.Poison); len(p) != 0 {
		t.Errorf("after three runs the poison queue holds %d, want 0", len(p))
	}
}

// failingSend is the broker with Send failing transiently.
type failingSend struct{ *membroker.Broker }

func (failingSend) Send(context.Context, string, broker.Message) error {
	return broker.ErrTransient
}

func TestFailedSendLeavesTheOriginal(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-10:1", "o-10")
	s := deadletter.New(failingSend{f.mb}, f.records, deadletter.Options{Queues: f.q, Now: f.clk.Now,
		Policy: deadletter.Policy{Cooldown: 0, MaxReplays: 3}, ReceiveWait: time.Millisecond})
	_, err := s.Run(f.ctx, deadletter.RunOptions{})
	if !errors.Is(err, broker.ErrTransient) || deadletter.StatusFor(err) != http.StatusServiceUnavailable {
		t.Fatalf("Run with a failing send = %v (status %d), want a transient error answered 503", err, deadletter.StatusFor(err))
	}
	d := f.peek(t, deadletter.DLQ)
	if len(d) != 1 || d[0].MessageID != "o-10:1" {
		t.Fatalf("DLQ after a failed replay = %+v, want the original still there", d)
	}
	// The next run, with the send working, replays it (from its deferral).
	if rep := f.run(t, f.sweeper(deadletter.Options{Policy: deadletter.Policy{Cooldown: 0, MaxReplays: 3}})); rep.Counts[deadletter.ActionReplay] != 1 {
		t.Errorf("next run counts = %v, want replayed 1", rep.Counts)
	}
}

// lockLosing is the broker with every lock lost before settlement, as when
// storage is slow or the lock is short: Complete and Defer fail with
// ErrLockLost and the message stays where it was (here: it is abandoned,
// as an expired lock releases it).
type lockLosing struct{ *membroker.Broker }

func (b lockLosing) Complete(ctx context.Context, src broker.Source, m broker.Received) error {
	_ = b.Broker.Abandon(ctx, src, m)
	return fmt.Errorf("membroker: complete: %w", broker.ErrLockLost)
}

func (b lockLosing) Defer(ctx context.Context, src broker.Source, m broker.Received) error {
	_ = b.Broker.Abandon(ctx, src, m)
	return fmt.Errorf("membroker: defer: %w", broker.ErrLockLost)
}

// A lost lock is not a failed run: the run goes on, counts it, and the
// message is still there for the next run; nothing is lost or doubled.
func TestLockLostIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	f.deadLetter(t, "o-11:1", "o-11")
	f.park(t, "o-12:1", "InvalidPayload")
	f.park(t, "o-13:1", "InvalidTransition")
	pol := deadletter.Policy{Cooldown: 0, MaxReplays: 3}
	s := deadletter.New(lockLosing{f.mb}, f.records, deadletter.Options{Queues: f.q, Now: f.clk.Now, Policy: pol,
		RatePerSecond: 1000, ReceiveWait: time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&f.log, nil))})
	rep, err := s.Run(f.ctx, deadletter.RunOptions{})
	if err != nil {
		t.Fatalf("Run with every lock lost = %v, want no error (a lost lock is retried by the next run)", err)
	}
	if rep.LockLost != 3 {
		t.Errorf("LockLost = %d, want 3 (replay, archive, leave)", rep.LockLost)
	}
	if d, p := f.peek(t, deadletter.DLQ), f.peek(t, deadletter.Poison); len(d) != 1 || len(p) != 2 {
		t.Fatalf("after the run: DLQ %d, poison %d; want 1 and 2 (nothing settled)", len(d), len(p))
	}
	// The next run, with locks that hold, finishes the work: the replay is
	// sent again under the same MessageId (duplicate detection drops the
	// second copy), the archive row exists once, the human's message stays.
	rep = f.run(t, f.sweeper(deadletter.Options{Policy: pol}))
	if rep.Counts[deadletter.ActionReplay] != 1 || rep.Counts[deadletter.ActionArchive] != 1 || rep.Counts[deadletter.ActionLeave] != 1 {
		t.Errorf("next run counts = %v, want replayed 1, archived 1, left 1", rep.Counts)
	}
	if q := f.peekQueue(t); len(q) != 1 || q[0].MessageID != "o-11:1:replay:1" {
		t.Errorf("queue after both runs = %+v, want one replay o-11:1:replay:1", q)
	}
}

func TestMarkSeenNeverResetsTheCooldown(t *testing.T) {
	f := newFixture(t)
	m := broker.Received{Message: broker.Message{MessageID: "o-11:1"}, SequenceNumber: 42}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	first, err := f.records.MarkSeen(f.ctx, deadletter.DLQ, m, t0, "sweeper")
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.records.MarkSeen(f.ctx, deadletter.DLQ, m, t0.Add(time.Hour), "sweeper")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Equal(t0) || !again.Equal(t0) {
		t.Errorf("MarkSeen = %v then %v, want %v both times", first, again, t0)
	}
	// A recreated queue reuses sequence number 42 for another message.
	other := broker.Received{Message: broker.Message{MessageID: "o-12:1"}, SequenceNumber: 42}
	if got, err := f.records.MarkSeen(f.ctx, deadletter.DLQ, other, t0.Add(2*time.Hour), "sweeper"); err != nil || !got.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("MarkSeen of another message with a reused number = %v, %v; want a fresh start", got, err)
	}
	seen, err := f.records.SeenAll(f.ctx, deadletter.DLQ)
	if err != nil || seen[42].MessageID != "o-12:1" {
		t.Errorf("SeenAll = %+v, %v", seen, err)
	}
}

func TestManualReplayAndDiscard(t *testing.T) {
	f := newFixture(t)
	s := f.sweeper(deadletter.Options{})
	f.park(t, "o-13:1", "InvalidPayload")
	f.park(t, "o-14:1", "InvalidTransition")
	// A corrected body that would still be parked is refused; nothing moves.
	if _, err := s.Replay(f.ctx, deadletter.Poison, "o-14:1", []byte(`{"orderId":"o-99"}`), "cli:test"); !errors.Is(err, deadletter.ErrInvalidBody) {
		t.Fatalf("Replay with a bad body = %v, want ErrInvalidBody", err)
	}
	if p := f.peek(t, deadletter.Poison); len(p) != 2 || p[0].Deferred || p[1].Deferred {
		t.Fatalf("poison queue after a refused replay = %+v, want both untouched", p)
	}
	good := `{"orderId":"o-14","status":"Paid","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}`
	id, err := s.Replay(f.ctx, deadletter.Poison, "o-14:1", []byte(good), "cli:test")
	if err != nil || id != "o-14:1:replay:1" {
		t.Fatalf("Replay = %q, %v", id, err)
	}
	q := f.peekQueue(t)
	if len(q) != 1 || q[0].SessionID != "o-14" || string(q[0].Body) != good {
		t.Errorf("order-status after the replay = %+v", q)
	}
	if err := s.Discard(f.ctx, deadletter.Poison, "o-13:1:parked", "cli:test"); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	if p := f.peek(t, deadletter.Poison); len(p) != 0 {
		t.Errorf("poison queue holds %d after replay and discard, want 0", len(p))
	}
	archived, _ := f.records.ListArchived(f.ctx)
	if len(archived) != 2 || archived[0].Action != "discarded" || archived[1].Action != "resubmitted" {
		t.Errorf("archive = %+v, want o-13:1 discarded and o-14:1 resubmitted", archived)
	}
	if err := s.Discard(f.ctx, deadletter.Poison, "nope", "cli:test"); !errors.Is(err, deadletter.ErrNoMessage) {
		t.Errorf("Discard of an unknown id = %v, want ErrNoMessage", err)
	}
}
