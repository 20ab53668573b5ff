package publish

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// devHostWithTables is devHost with make run's Azurite announced too.
func devHostWithTables(t *testing.T) (*membroker.Broker, env) {
	t.Helper()
	cs := testenv.Azurite(t)
	mb := membroker.New(&membroker.Options{Clock: clock.Real()})
	o := membroker.DefaultQueueOptions()
	o.RequiresSession = true
	if err := mb.CreateQueue(queue, o); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(loopback.NewServer(mb))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	remove, err := devrun.Write(dir, devrun.Endpoints{PID: os.Getpid(), BrokerURL: srv.URL, Queue: queue, PoisonQueue: "order-status-poison",
		AppRoot: dir, StoreConnectionString: cs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return mb, env{dir: dir, getenv: func(string) string { return "" }, now: time.Now}
}

// TestOutboxBadInputExits2: relay and commit refuse bad flags with one
// line and exit 2, before connecting to anything.
func TestOutboxBadInputExits2(t *testing.T) {
	mb, e := devHost(t, clock.Real())
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"relay without --table", []string{"relay"}, "--table is required"},
		{"relay bad table", []string{"relay", "--table", "1abc"}, `--table "1abc"`},
		{"relay table with dash", []string{"relay", "--table", "check-out"}, "letters and digits"},
		{"relay unknown flag", []string{"relay", "--table", "checkout", "--forever"}, "flag provided but not defined"},
		{"relay interval 0", []string{"relay", "--table", "checkout", "--interval", "0s"}, "--interval 0s"},
		{"relay batch 0", []string{"relay", "--table", "checkout", "--batch", "0"}, "--batch 0"},
		{"relay batch 5000", []string{"relay", "--table", "checkout", "--batch", "5000"}, "--batch 5000"},
		{"relay retention 10m", []string{"relay", "--table", "checkout", "--retention", "10m"}, "--retention 10m0s: want at least 1h"},
		{"relay bad prefix", []string{"relay", "--table", "checkout", "--prefix", "a:b"}, `--prefix: outbox: prefix "a:b"`},
		{"relay extra argument", []string{"relay", "--table", "checkout", "now"}, `unexpected argument "now"`},
		{"commit without --table", []string{"commit", "--order", "o-1", "--cancel-timeout"}, "--table is required"},
		{"commit without --order", []string{"commit", "--table", "checkout", "--cancel-timeout"}, "--order is required"},
		{"commit nothing", []string{"commit", "--table", "checkout", "--order", "o-1"}, "nothing to commit"},
		{"commit status without sequence", []string{"commit", "--table", "checkout", "--order", "o-1", "--status", "Paid"}, "--status and --sequence go together"},
		{"commit bad status", []string{"commit", "--table", "checkout", "--order", "o-1", "--status", "Refunded", "--sequence", "2"}, `--status "Refunded"`},
		{"commit sequence 0", []string{"commit", "--table", "checkout", "--order", "o-1", "--status", "Paid", "--sequence", "0"}, "--sequence"},
		{"commit bad order", []string{"commit", "--table", "checkout", "--order", "a/b", "--cancel-timeout"}, "--partition: orderId"},
		{"commit after without schedule", []string{"commit", "--table", "checkout", "--order", "o-1", "--after", "5m", "--cancel-timeout"}, "--after needs --schedule-timeout"},
		{"commit after 0", []string{"commit", "--table", "checkout", "--order", "o-1", "--schedule-timeout", "--after", "0s"}, "--after 0s"},
		{"commit timeout without its Created", []string{"commit", "--table", "checkout", "--order", "o-1", "--schedule-timeout"}, "--schedule-timeout needs the Created it checks"},
		{"commit created-sequence without schedule", []string{"commit", "--table", "checkout", "--order", "o-1", "--created-sequence", "1", "--cancel-timeout"}, "--created-sequence needs --schedule-timeout"},
		{"commit created-sequence 0", []string{"commit", "--table", "checkout", "--order", "o-1", "--schedule-timeout", "--created-sequence", "0"}, "--created-sequence 0"},
		{"commit created-sequence of another Created", []string{"commit", "--table", "checkout", "--order", "o-1", "--status", "Created", "--sequence", "2", "--schedule-timeout", "--created-sequence", "1"}, "this commit's Created is sequence 2"},
		{"commit occurred-at alone", []string{"commit", "--table", "checkout", "--order", "o-1", "--occurred-at", "2026-11-29T10:00:00Z", "--cancel-timeout"}, "--occurred-at needs --status"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, e, tc.args...)
			if r.code != ExitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
	if st := mb.Stats(queue); st != (membroker.QueueStats{}) {
		t.Errorf("queue after the bad input: %+v, want empty", st)
	}
}

func TestOutboxHelp(t *testing.T) {
	_, e := devHost(t, clock.Real())
	for _, args := range [][]string{{"relay", "--help"}, {"commit", "-h"}} {
		r := runCLI(t, e, args...)
		if r.code != ExitOK || !strings.HasPrefix(r.stdout, "usage: orderstatus publish "+args[0]) || !strings.Contains(r.stdout, "-table") || r.stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and the usage with --table", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, e, "--help"); !strings.Contains(r.stdout, "  relay ") || !strings.Contains(r.stdout, "  commit ") {
		t.Errorf("orderstatus publish --help does not list relay and commit:\n%s", r.stdout)
	}
}

// TestCommitTheCheckOfAnEarlierCreated: --created-sequence names the
// Created a check is for when the commit has none; the check sent is that
// Created's (its MessageId).
func TestCommitTheCheckOfAnEarlierCreated(t *testing.T) {
	mb, e := devHostWithTables(t)
	table := "checkout" + strings.ToLower(rand.Text())[:8]
	if r := runCLI(t, e, "commit", "--table", table, "--order", "o-2", "--schedule-timeout", "--created-sequence", "3", "--after", "1ms"); r.code != ExitOK {
		t.Fatalf("commit the check of Created 3: %+v", r)
	}
	if r := runCLI(t, e, "relay", "--table", table, "--once"); r.code != ExitOK {
		t.Fatalf("relay --once: %+v", r)
	}
	s, err := mb.AcceptNextSession(t.Context(), queue)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Receive(t.Context(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := contract.TimeoutMessageID("o-2", 3); m == nil || m.MessageID != want {
		t.Errorf("received %+v, want the check of Created 3, %s", m, want)
	}
}

// TestOutboxCommitAndRelay: commit, then relay --once, against the
// development broker and Azurite: the producer's side of the walkthrough
// with the outbox.
func TestOutboxCommitAndRelay(t *testing.T) {
	mb, e := devHostWithTables(t)
	table := "checkout" + strings.ToLower(rand.Text())[:8]
	r := runCLI(t, e, "commit", "--table", table, "--order", "o-1", "--status", "Created", "--sequence", "1", "--schedule-timeout")
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "committed 2 outgoing messages for order o-1 in table "+table+" partition o-1") {
		t.Fatalf("commit: %+v", r)
	}
	if st := mb.Stats(queue); st != (membroker.QueueStats{}) {
		t.Fatalf("queue after commit %+v, want empty: commit sends nothing", st)
	}
	r = runCLI(t, e, "relay", "--table", table, "--once")
	if r.code != ExitOK || !strings.HasSuffix(r.stdout, "sent 1, scheduled 1, cancelled 0, parked 0, waiting 0, purged 0\n") {
		t.Fatalf("relay --once: %+v", r)
	}
	if st := mb.Stats(queue); st.Active != 1 || st.Scheduled != 1 {
		t.Errorf("queue %+v, want 1 active and the scheduled timeout", st)
	}
	r = runCLI(t, e, "commit", "--table", table, "--order", "o-1", "--status", "Paid", "--sequence", "2", "--cancel-timeout")
	if r.code != ExitOK {
		t.Fatalf("commit Paid: %+v", r)
	}
	r = runCLI(t, e, "relay", "--table", table, "--once")
	if r.code != ExitOK || !strings.HasSuffix(r.stdout, "sent 1, scheduled 0, cancelled 1, parked 0, waiting 0, purged 0\n") {
		t.Fatalf("relay --once: %+v", r)
	}
	if st := mb.Stats(queue); st.Active != 2 || st.Scheduled != 0 {
		t.Errorf("queue %+v, want 2 active and the timeout cancelled", st)
	}
	// Nothing left: a second run sends nothing.
	r = runCLI(t, e, "relay", "--table", table, "--once")
	if r.code != ExitOK || !regexp.MustCompile(`sent 0, scheduled 0, cancelled 0, parked 0, waiting 0, purged 0\n$`).MatchString(r.stdout) {
		t.Errorf("relay --once with nothing pending: %+v", r)
	}
	// A relay on a table that does not exist fails, exit 1.
	if r = runCLI(t, e, "relay", "--table", "nosuchtable"+strings.ToLower(rand.Text())[:6], "--once"); r.code != ExitFailure {
		t.Errorf("relay on a missing table: %+v, want exit 1", r)
	}
}

// TestOutboxDocCommands runs the commands docs/outbox.md shows, in
// order, against the development broker and Azurite (on a table of the
// test's own), and checks the relay prints what the page says.
func TestOutboxDocCommands(t *testing.T) {
	b, err := os.ReadFile(repoRoot + "/docs/outbox.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const start, end = "<!-- outbox doc: run by TestOutboxDocCommands -->", "<!-- end of outbox doc -->"
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/outbox.md has no block between %q and %q", start, end)
	}
	said := regexp.MustCompile("The last line prints `([^`]+)`").FindStringSubmatch(doc[j:])
	if said == nil {
		t.Fatal("docs/outbox.md does not say what the last line prints")
	}
	mb, e := devHostWithTables(t)
	table := "doc" + strings.ToLower(rand.Text())[:10]
	var last result
	ran := 0
	for _, l := range strings.Split(doc[i+len(start):j], "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "bin/orderstatus publish ") {
			continue
		}
		args := strings.Fields(strings.TrimPrefix(l, "bin/orderstatus publish "))
		for k := range args {
			if k > 0 && args[k-1] == "--table" {
				args[k] = table
			}
		}
		last = runCLI(t, e, args...)
		if last.code != ExitOK {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", l, last.code, last.stdout, last.stderr)
		}
		ran++
	}
	if ran < 3 {
		t.Fatalf("ran %d commands from docs/outbox.md, want its commits and the relay", ran)
	}
	if !strings.HasSuffix(last.stdout, said[1]+"\n") {
		t.Errorf("the last command printed %q, the page says %q", last.stdout, said[1])
	}
	if st := mb.Stats(queue); st.Active != 2 || st.Scheduled != 0 {
		t.Errorf("queue %+v, want the two status changes and the timeout cancelled", st)
	}
}

// TestOutboxRelayRunsUntilInterrupted: without --once the relay keeps
// relaying what is committed while it runs, and exits 0 when interrupted.
func TestOutboxRelayRunsUntilInterrupted(t *testing.T) {
	mb, e := devHostWithTables(t)
	table := "run" + strings.ToLower(rand.Text())[:10]
	if r := runCLI(t, e, "commit", "--table", table, "--order", "o-1", "--status", "Created", "--sequence", "1"); r.code != ExitOK {
		t.Fatalf("commit: %+v", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"relay", "--table", table, "--interval", "10ms"}, &out, &errOut, e)
	}()
	waitQueue := func(active int) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for mb.Stats(queue).Active < active {
			if time.Now().After(deadline) {
				t.Fatalf("queue %+v, want %d active", mb.Stats(queue), active)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitQueue(1)
	if r := runCLI(t, e, "commit", "--table", table, "--order", "o-1", "--status", "Paid", "--sequence", "2"); r.code != ExitOK {
		t.Fatalf("commit: %+v", r)
	}
	waitQueue(2)
	cancel()
	select {
	case code := <-done:
		if code != ExitOK || !strings.HasPrefix(out.String(), "relaying outbox table "+table) || !strings.HasSuffix(out.String(), "stopped\n") {
			t.Errorf("relay: exit %d, stdout %q, stderr %q; want 0, the relaying line and stopped", code, out.String(), errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the relay did not stop when interrupted")
	}
}

// TestOutboxCommitCounts: commit's line says a count of one in the
// singular and two in the plural.
func TestOutboxCommitCounts(t *testing.T) {
	_, e := devHostWithTables(t)
	table := "checkout" + strings.ToLower(rand.Text())[:8]
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--order", "o-1", "--status", "Created", "--sequence", "1"}, "committed 1 outgoing message for order o-1 "},
		{[]string{"--order", "o-2", "--status", "Created", "--sequence", "1", "--schedule-timeout"}, "committed 2 outgoing messages for order o-2 "},
	} {
		r := runCLI(t, e, append([]string{"commit", "--table", table}, tt.args...)...)
		if r.code != ExitOK || !strings.HasPrefix(r.stdout, tt.want) {
			t.Errorf("commit %v: %+v; want exit 0 and stdout starting %q", tt.args, r, tt.want)
		}
	}
}

// TestOutboxRelayMissingTable: a relay on a table that does not exist
// says so and exits 1 at once, with --once and without (it does not wait
// for the table, as it would for a transient failure).
func TestOutboxRelayMissingTable(t *testing.T) {
	_, e := devHostWithTables(t)
	table := "nosuchtable" + strings.ToLower(rand.Text())[:6]
	for _, args := range [][]string{{"relay", "--table", table, "--once"}, {"relay", "--table", table, "--interval", "10ms"}} {
		start := time.Now()
		r := runCLI(t, e, args...)
		if r.code != ExitFailure || !strings.Contains(r.stderr, "table "+table+" does not exist") || strings.Contains(r.stderr, "transient") ||
			strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and one line saying the table does not exist", args, r.code, r.stdout, r.stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: took %s, want at once", args, d)
		}
	}
}
