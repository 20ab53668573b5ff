package deadletters

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlmem"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The CLI's own connection, as against `make run`: it finds the
// development host's file, talks to its broker over the loopback protocol
// on 127.0.0.1, and reads the order's row from the
// host's Table Storage account (Azurite); the dead-letter store is opened
// on that account under DEAD_LETTER_TABLE (here in memory, through
// Env.OpenStore). No command creates a table, a dry run included.
func TestConnectsAsAgainstMakeRun(t *testing.T) {
	f := newFixture(t) // its membroker is the development host's broker
	srv := httptest.NewServer(loopback.NewServer(f.mb))
	t.Cleanup(srv.Close)
	cs := testenv.Azurite(t)
	suffix := strings.ToLower(rand.Text()[:10])
	orderTable := "orders" + suffix
	rows, err := tablestore.NewFromConnectionString(cs, orderTable, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rows.EnsureTable(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rows.Insert(f.ctx, "o-1", order.State{Status: order.Status("Paid"), LastSequence: 2,
		OccurredAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), UpdatedAt: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	app := t.TempDir()
	remove, err := devrun.Write(app, devrun.Endpoints{PID: os.Getpid(), BrokerURL: srv.URL, StoreConnectionString: cs,
		Queue: f.q.Queue, PoisonQueue: f.q.PoisonQueue, AppRoot: app, StartedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	svc, err := aztables.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	tables := func() []string {
		var names []string
		p := svc.NewListTablesPager(nil)
		for p.More() {
			page, err := p.NextPage(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range page.Tables {
				names = append(names, *tb.Name)
			}
		}
		slices.Sort(names)
		return names
	}
	before := tables()

	st := dlmem.New()
	var opened []string
	env := map[string]string{"OrderStore__tableName": orderTable, "DEAD_LETTER_SWEEP_RATE": "1000"}
	run := func(args ...string) result {
		t.Helper()
		var out, errOut strings.Builder
		code := Run(f.ctx, args, &out, &errOut, Env{
			Getenv: func(k string) string { return env[k] }, Dir: app, IsTerminal: func() bool { return false },
			StderrIsTerminal: func() bool { return false },
			OpenStore: func(_ *aztables.ServiceClient, table string) (dlstore.Store, error) {
				opened = append(opened, table)
				return st, nil
			}})
		if code != exitOK {
			t.Fatalf("%q exited %d:\n%s%s", args, code, out.String(), errOut.String())
		}
		return result{code, out.String(), errOut.String()}
	}

	f.deadLetter("o-1:2", "o-1")
	if out := run("sweep", "--dry-run").stdout; !strings.Contains(out, "o-1:2") || !strings.Contains(out, "would be wait") {
		t.Errorf("sweep --dry-run through the loopback broker:\n%s", out)
	}
	if n := len(f.peek(f.q.Source(dlstore.DLQ))); n != 1 {
		t.Fatalf("the dry run took the message: %d left", n)
	}
	run("sweep")
	if n := len(f.peek(f.q.Source(dlstore.DLQ))); n != 0 {
		t.Fatalf("sweep left %d messages on the dlq", n)
	}
	run("replay", "--id", "o-1:2")
	ls := lines(t, run("find", "--order", "o-1", "--json").stdout)
	var kinds []string
	for _, l := range ls {
		kinds = append(kinds, l["kind"].(string))
	}
	if len(ls) == 0 || ls[0]["kind"] != "order" {
		t.Fatalf("find: %v", ls)
	}
	if o := ls[0]["order"].(map[string]any); o["status"] != "Paid" || o["last_sequence"] != float64(2) {
		t.Errorf("the order's row from Azurite: %v", o)
	}
	if !slices.Equal(kinds, []string{"order", "entry", "audit", "audit"}) {
		t.Errorf("find kinds %v", kinds)
	}
	sent := f.peek(broker.Source{Queue: f.q.Queue})
	if len(sent) != 1 || sent[0].MessageID != "o-1:2:replay:1" {
		t.Errorf("replay through the loopback broker: %+v", sent)
	}
	if got := tables(); !slices.Equal(got, before) {
		t.Errorf("tables %v after the commands, %v before: a command created one", got, before)
	}
	for _, tb := range opened {
		if tb != DefaultDeadLetterTable {
			t.Errorf("opened the dead-letter store on table %q, want %q", tb, DefaultDeadLetterTable)
		}
	}
	if len(opened) != 4 {
		t.Errorf("opened the store %d times for 4 commands", len(opened))
	}
}

// Without a development host or a namespace the CLI says how to connect,
// in one line, exit 1.
func TestNoTarget(t *testing.T) {
	var out, errOut strings.Builder
	code := Run(context.Background(), []string{"stats"}, &out, &errOut, Env{Getenv: func(string) string { return "" }, Dir: t.TempDir()})
	if code != exitFailure || !strings.Contains(errOut.String(), "make run") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
	oneLineErr(t, errOut.String())
}
