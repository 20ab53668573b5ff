package deadletters

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// closedAddr is a 127.0.0.1 address where nothing listens: a connection
// there is refused at once.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// seedAzurite makes a dead-letter table and an order table of their own on
// Azurite (cs), with order o-1 Created and its Paid (o-1:2) dead-lettered
// after five deliveries, and returns the tables' names and the entry.
func seedAzurite(ctx context.Context, t *testing.T, cs string) (dlTable, orderTable string, e dlstore.Entry) {
	t.Helper()
	suffix := strings.ToLower(rand.Text()[:10])
	dlTable, orderTable = "dl"+suffix, "orders"+suffix
	svc, err := aztables.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := dltable.New(svc, dlTable, nil)
	if err := st.EnsureTable(ctx); err != nil {
		t.Fatal(err)
	}
	rows := tablestore.NewFromService(svc, orderTable, nil)
	if err := rows.EnsureTable(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := rows.Insert(ctx, "o-1", order.State{Status: order.Status("Created"), LastSequence: 1, OccurredAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	e = deadletter.EntryOf(dlstore.DLQ, broker.Received{Message: broker.Message{MessageID: "o-1:2", SessionID: "o-1",
		Subject: order.SubjectStatusChanged, Body: updateBody("o-1", "Paid", 2)}, SequenceNumber: 7, DeliveryCount: 5,
		EnqueuedTime: now, DeadLetterReason: broker.ReasonMaxDeliveryCountExceeded, DeadLetterErrorDescription: "five deliveries"}, now)
	if _, err := st.Put(ctx, e, "sweeper"); err != nil {
		t.Fatal(err)
	}
	return dlTable, orderTable, e
}

// The reading commands need only the Table Storage account: with no
// Service Bus to connect to (nothing names one; a namespace on 127.0.0.1
// where nothing listens, by flag or by setting; a development host whose
// broker does not answer), list and find --order read the dead-letter
// store and the order table on Azurite and exit 0 with nothing on stderr
// (they need nothing of Service Bus). stats prints the store's figures and names what it
// could not read in one line (exit 1).
// The context bounds every case: nothing waits for a Service Bus.
func TestReadsTheStoreWithoutServiceBus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := testenv.Azurite(t)
	dlTable, orderTable, e := seedAzurite(ctx, t, cs)

	nowhere := t.TempDir() // no development host here
	deadHost := t.TempDir()
	remove, err := devrun.Write(deadHost, devrun.Endpoints{PID: os.Getpid(), BrokerURL: "http://" + closedAddr(t), StoreConnectionString: cs,
		Queue: "order-status", PoisonQueue: "order-status-poison", AppRoot: deadHost, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)

	for _, tc := range []struct {
		name  string
		dir   string
		flags []string
		env   map[string]string
		// stats is false where a peek would wait for a namespace that
		// does not answer (its retries are Service Bus's).
		stats bool
	}{
		{name: "nothing names a Service Bus", dir: nowhere, flags: []string{"--tables", cs}, stats: true},
		{name: "a namespace on 127.0.0.1 where nothing listens", dir: nowhere, flags: []string{"--namespace", "127.0.0.1", "--tables", cs}},
		{name: "the namespace setting, nothing listening", dir: nowhere,
			env: map[string]string{"ServiceBusConnection__fullyQualifiedNamespace": "127.0.0.1", "OrderStore__connectionString": cs}},
		{name: "a development host whose broker does not answer", dir: deadHost, stats: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"DEAD_LETTER_TABLE": dlTable, "OrderStore__tableName": orderTable}
			for k, v := range tc.env {
				env[k] = v
			}
			run := func(args ...string) result {
				t.Helper()
				var out, errOut strings.Builder
				code := Run(ctx, append(args, tc.flags...), &out, &errOut, Env{Getenv: func(k string) string { return env[k] }, Dir: tc.dir,
					Stdin: strings.NewReader(""), IsTerminal: func() bool { return false }, StderrIsTerminal: func() bool { return false }})
				return result{code, out.String(), errOut.String()}
			}
			quiet := func(args []string, r result) {
				t.Helper()
				if r.stderr != "" {
					t.Errorf("%q: stderr %q, want nothing", args, r.stderr)
				}
			}

			args := []string{"list", "--json"}
			r := run(args...)
			if r.code != exitOK {
				t.Fatalf("%q: exit %d, want 0:\n%s%s", args, r.code, r.stdout, r.stderr)
			}
			if ls := lines(t, r.stdout); len(ls) != 1 || ls[0]["id"] != e.ID {
				t.Errorf("%q: %v, want the one entry %s", args, ls, e.ID)
			}
			quiet(args, r)

			args = []string{"find", "--order", "o-1", "--json"}
			r = run(args...)
			if r.code != exitOK {
				t.Fatalf("%q: exit %d, want 0:\n%s%s", args, r.code, r.stdout, r.stderr)
			}
			var kinds []string
			for _, l := range lines(t, r.stdout) {
				kinds = append(kinds, l["kind"].(string))
			}
			if !slices.Equal(kinds, []string{"order", "entry", "audit"}) {
				t.Errorf("%q: kinds %v, want the order row, the entry and its audit entry", args, kinds)
			}
			quiet(args, r)

			if !tc.stats {
				return
			}
			args = []string{"stats", "--json"}
			r = run(args...)
			if r.code != exitFailure {
				t.Errorf("%q: exit %d, want 1 (Service Bus not read):\n%s%s", args, r.code, r.stdout, r.stderr)
			}
			oneLineErr(t, r.stderr)
			if !strings.Contains(r.stderr, "could not read") || !strings.Contains(r.stderr, "the rest is reported") {
				t.Errorf("%q: stderr %q, want what could not be read", args, r.stderr)
			}
			var depth float64
			for _, l := range lines(t, r.stdout) {
				if l["source"] == string(dlstore.DLQ) {
					depth += l["depth"].(float64)
				}
			}
			if depth != 1 {
				t.Errorf("%q: dlq depth %v, want the store's 1:\n%s", args, depth, r.stdout)
			}
		})
	}
}

// Only what sends or receives needs Service Bus: replay and sweep (their
// dry runs do not). Without one, archive, discard and restore change the
// store, the dry runs read it, sweep --dry-run reports the store and names
// Service Bus (exit 1), and replay and sweep refuse in one line before
// anything changes (exit 1).
func TestOnlyReplayAndSweepNeedServiceBus(t *testing.T) {
	f := newFixture(t)
	f.noBroker = true
	a := f.put(dlstore.Poison, 1, "a:parked", "o-1", order.ReasonInvalidTransition, "x")
	b := f.put(dlstore.Poison, 2, "b:parked", "o-2", order.ReasonInvalidTransition, "x")
	d := f.put(dlstore.DLQ, 3, "o-3:2", "o-3", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	for _, args := range [][]string{
		{"replay", "--id", d.ID},
		{"replay", "--source", "dlq", "--yes"},
		{"sweep"},
	} {
		res := f.run(args...)
		if res.code != exitFailure || !strings.Contains(res.stderr, "no Service Bus to connect to") {
			t.Errorf("%q without Service Bus: exit %d, stderr %q; want 1 and why", args, res.code, res.stderr)
		}
		oneLineErr(t, res.stderr)
	}
	if st := f.states(); st[d.ID] != dlstore.Open {
		t.Errorf("a refused replay changed the entry: %s", st[d.ID])
	}
	f.must("replay", "--source", "dlq", "--dry-run")
	f.must("replay", "--id", d.ID, "--dry-run")
	f.must("archive", "--id", a.ID)
	f.must("restore", "--id", a.ID)
	f.must("discard", "--source", "poison", "--yes")
	if st := f.states(); st[a.ID] != dlstore.Discarded || st[b.ID] != dlstore.Discarded {
		t.Errorf("states %v, want a and b discarded", st)
	}
	res := f.run("sweep", "--dry-run")
	if res.code != exitFailure || !strings.Contains(res.stdout, d.ID) || !strings.Contains(res.stderr, "could not read Service Bus") ||
		!strings.Contains(res.stderr, "no Service Bus to connect to") {
		t.Errorf("sweep --dry-run without Service Bus: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	oneLineErr(t, res.stderr)
}

// silentBroker is a Service Bus that does not answer: every peek fails as
// a timeout does (transient), and is counted.
type silentBroker struct {
	deadletter.Broker
	peeks int
}

func (s *silentBroker) Peek(context.Context, broker.Source, int, int64) ([]broker.Received, error) {
	s.peeks++
	return nil, fmt.Errorf("sbbroker: peek: %w: context deadline exceeded", broker.ErrTransient)
}

// A namespace that does not answer is waited for once, not once per
// source: after the first peek times out, a reading command takes the
// other sources as not read at once and still names each, with the rest
// reported.
func TestASilentServiceBusIsWaitedForOnce(t *testing.T) {
	for _, args := range [][]string{{"stats"}, {"sweep", "--dry-run"}} {
		t.Run(args[0], func(t *testing.T) {
			f := newFixture(t)
			e := f.put(dlstore.DLQ, 3, "o-3:2", "o-3", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
			sb := &silentBroker{Broker: f.mb}
			f.broker = sb
			res := f.run(args...)
			if res.code != exitFailure || !strings.Contains(res.stdout, map[string]string{"stats": "MaxDeliveryCountExceeded", "sweep": e.ID}[args[0]]) {
				t.Errorf("%q: exit %d, want 1 and the store's part:\n%s%s", args, res.code, res.stdout, res.stderr)
			}
			oneLineErr(t, res.stderr)
			for _, src := range []string{"order-status/$DeadLetterQueue", "order-status-poison;", "order-status-poison/$DeadLetterQueue"} {
				if !strings.Contains(res.stderr, src) {
					t.Errorf("%q: stderr %q does not name %s", args, res.stderr, src)
				}
			}
			if sb.peeks != 1 {
				t.Errorf("%q: %d peeks of a Service Bus that does not answer, want 1", args, sb.peeks)
			}
		})
	}
}
