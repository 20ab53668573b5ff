package deadletters

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/connect"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlmem"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
)

// fixture is the CLI over an in-memory broker (a queue and a poison queue
// without sessions, so a test dead-letters by abandoning), the in-memory
// dead-letter store and order rows, on a clock the test moves.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	clk    *clock.ScaledClock
	mb     *membroker.Broker
	st     *dlmem.Store
	orders *memstore.Store
	q      deadletter.Queues
	// broker and store are what the CLI gets: mb and st unless a test
	// wraps them.
	broker deadletter.Broker
	store  dlstore.Store
	env    map[string]string
	// terminal, stdin: what the CLI's stdin is.
	terminal bool
	stdin    io.Reader
	connects int
	// noBroker makes the CLI's backend one without Service Bus, as when
	// nothing names one (connect.Resolve).
	noBroker bool
}

// errNoServiceBus is what connect says when nothing names a Service Bus.
var errNoServiceBus = fmt.Errorf("%w: pass --namespace, set ServiceBusConnection__fullyQualifiedNamespace, or start the development host with 'make run'", connect.ErrNoTarget)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, clk: clock.Scaled(1), st: dlmem.New(), orders: memstore.New(),
		q: deadletter.Queues{Queue: "order-status", PoisonQueue: "order-status-poison"},
		env: map[string]string{
			"DEAD_LETTER_SWEEP_RATE":      "1000",
			"DEAD_LETTER_REPLAY_COOLDOWN": "10m",
			"DEAD_LETTER_MAX_REPLAYS":     "3",
		}}
	f.mb = membroker.New(&membroker.Options{Clock: f.clk})
	if err := f.mb.CreateQueue(f.q.Queue, membroker.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	po := membroker.DefaultQueueOptions()
	po.MaxDeliveryCount = 10
	if err := f.mb.CreateQueue(f.q.PoisonQueue, po); err != nil {
		t.Fatal(err)
	}
	f.broker, f.store = f.mb, f.st
	return f
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the CLI with args and returns its exit code and output.
func (f *fixture) run(args ...string) result {
	f.t.Helper()
	var out, errOut strings.Builder
	stdin := f.stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	code := Run(f.ctx, args, &out, &errOut, f.cliEnv(stdin))
	return result{code, out.String(), errOut.String()}
}

// cliEnv is the environment the CLI runs in: the fixture's backend.
func (f *fixture) cliEnv(stdin io.Reader) Env {
	return Env{
		Getenv:           func(k string) string { return f.env[k] },
		Dir:              f.t.TempDir(),
		Stdin:            stdin,
		IsTerminal:       func() bool { return f.terminal },
		StderrIsTerminal: func() bool { return false },
		Connect: func(context.Context) (*Backend, error) {
			f.connects++
			b := &Backend{Broker: f.broker, Store: f.store, Orders: f.orders, Queues: f.q, Now: f.clk.Now, ReceiveWait: time.Millisecond}
			if f.noBroker {
				b.Broker, b.NoBroker = nil, errNoServiceBus
			}
			return b, nil
		},
	}
}

// must runs the CLI and fails the test unless it exits 0.
func (f *fixture) must(args ...string) result {
	f.t.Helper()
	r := f.run(args...)
	if r.code != exitOK {
		f.t.Fatalf("%q exited %d:\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// put stores an entry as a sweep would have, at the clock's now.
func (f *fixture) put(k dlstore.Source, seq int64, msgID, orderID, reason, description string) dlstore.Entry {
	f.t.Helper()
	return f.putAt(f.clk.Now(), k, seq, msgID, orderID, reason, description)
}

// putAt stores an entry as a sweep on a clock that says at would have (a
// development host's that skipped idle time, another instance's).
func (f *fixture) putAt(at time.Time, k dlstore.Source, seq int64, msgID, orderID, reason, description string) dlstore.Entry {
	f.t.Helper()
	m := broker.Received{Message: broker.Message{MessageID: msgID, SessionID: orderID, Subject: order.SubjectStatusChanged,
		ContentType: "application/json", Body: updateBody(orderID, "Paid", 2),
		ApplicationProperties: map[string]any{"tenant": "t-1"}},
		SequenceNumber: seq, DeliveryCount: 5, EnqueuedTime: at, DeadLetterReason: reason, DeadLetterErrorDescription: description}
	if k != dlstore.DLQ {
		m.SessionID = ""
		m.ApplicationProperties[parking.PropOriginalSessionID] = orderID
		m.ApplicationProperties[parking.PropOriginalMessageID] = strings.TrimSuffix(msgID, ":parked")
	}
	e := deadletter.EntryOf(k, m, at)
	if _, err := f.st.Put(f.ctx, e, "sweeper"); err != nil {
		f.t.Fatal(err)
	}
	return e
}

func updateBody(orderID, status string, seq int) []byte {
	return fmt.Appendf(nil, `{"orderId":%q,"status":%q,"sequence":%d,"occurredAt":"2026-11-29T10:00:00Z"}`, orderID, status, seq)
}

// deadLetter puts a message on order-status/$DeadLetterQueue the way
// Service Bus does: five failed deliveries.
func (f *fixture) deadLetter(msgID, orderID string) {
	f.t.Helper()
	if err := f.mb.Send(f.ctx, f.q.Queue, broker.Message{MessageID: msgID, SessionID: orderID, Subject: order.SubjectStatusChanged,
		ContentType: "application/json", Body: updateBody(orderID, "Paid", 2)}); err != nil {
		f.t.Fatal(err)
	}
	for range 5 {
		got, err := f.mb.Receive(f.ctx, broker.Source{Queue: f.q.Queue}, 1, 0)
		if err != nil || len(got) != 1 {
			f.t.Fatalf("Receive: %d, %v", len(got), err)
		}
		if err := f.mb.Abandon(f.ctx, broker.Source{Queue: f.q.Queue}, got[0]); err != nil {
			f.t.Fatal(err)
		}
	}
}

// park sends a parked copy to the poison queue as the handler does.
func (f *fixture) park(original, orderID, reason, description string) {
	f.t.Helper()
	if err := f.mb.Send(f.ctx, f.q.PoisonQueue, broker.Message{MessageID: original + ":parked", Subject: order.SubjectStatusChanged,
		Body: []byte("not json " + original), ApplicationProperties: map[string]any{
			broker.PropertyDeadLetterReason: reason, broker.PropertyDeadLetterErrorDescription: description,
			parking.PropOriginalMessageID: original, parking.PropOriginalSessionID: orderID}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) peek(src broker.Source) []broker.Received {
	f.t.Helper()
	got, err := broker.PeekAll(f.ctx, f.mb, src)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

func (f *fixture) entry(id string) dlstore.Entry {
	f.t.Helper()
	e, err := f.st.Get(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

func (f *fixture) states() map[string]dlstore.State {
	f.t.Helper()
	es, err := f.st.List(f.ctx, dlstore.Filter{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]dlstore.State{}
	for _, e := range es {
		out[e.ID] = e.State
	}
	return out
}

// lines decodes JSON Lines into maps, failing on a line that is not JSON.
func lines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// oneLineErr fails unless s is exactly one line.
func oneLineErr(t *testing.T, s string) {
	t.Helper()
	if s == "" || strings.Count(strings.TrimSuffix(s, "\n"), "\n") != 0 {
		t.Errorf("stderr %q: want one line", s)
	}
}

// recorder wraps a store and a broker and counts the calls that change
// something (and can inject a hook before a Transition).
type recorder struct {
	dlstore.Store
	deadletter.Broker
	mu               sync.Mutex
	writes           []string
	beforeTransition func(n int)
	transitions      int
	failPeek         map[broker.Source]bool
}

func (r *recorder) note(op string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, op)
}

func (r *recorder) Put(ctx context.Context, e dlstore.Entry, actor string) (bool, error) {
	r.note("put " + e.ID)
	return r.Store.Put(ctx, e, actor)
}

func (r *recorder) Transition(ctx context.Context, e dlstore.Entry, t dlstore.Transition) (dlstore.Entry, error) {
	r.note("transition " + e.ID + " to " + string(t.To))
	r.mu.Lock()
	r.transitions++
	n, hook := r.transitions, r.beforeTransition
	r.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return r.Store.Transition(ctx, e, t)
}

func (r *recorder) Purge(ctx context.Context, before time.Time, max int) (int, error) {
	r.note("purge")
	return r.Store.Purge(ctx, before, max)
}

func (r *recorder) Send(ctx context.Context, queue string, msg broker.Message) error {
	r.note("send " + msg.MessageID)
	return r.Broker.Send(ctx, queue, msg)
}

func (r *recorder) Receive(ctx context.Context, src broker.Source, max int, wait time.Duration) ([]broker.Received, error) {
	r.note("receive " + src.String())
	return r.Broker.Receive(ctx, src, max, wait)
}

func (r *recorder) Complete(ctx context.Context, src broker.Source, m broker.Received) error {
	r.note("complete " + m.MessageID)
	return r.Broker.Complete(ctx, src, m)
}

func (r *recorder) Abandon(ctx context.Context, src broker.Source, m broker.Received) error {
	r.note("abandon " + m.MessageID)
	return r.Broker.Abandon(ctx, src, m)
}

var errPeek = errors.New("injected: peek refused")

func (r *recorder) Peek(ctx context.Context, src broker.Source, max int, from int64) ([]broker.Received, error) {
	if r.failPeek[src] {
		return nil, fmt.Errorf("%s: %w", src, errPeek)
	}
	return r.Broker.Peek(ctx, src, max, from)
}

// record makes the CLI work through a recorder.
func (f *fixture) record() *recorder {
	r := &recorder{Store: f.st, Broker: f.mb, failPeek: map[broker.Source]bool{}}
	f.broker, f.store = r, r
	return r
}

// written lists the calls that change something, receives included (they
// lock a message).
func (r *recorder) written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}
