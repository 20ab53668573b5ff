package deadletters

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// A usage error exits 2 with one line on stderr, before connecting.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"purge"}, "unknown command"},
		{"bad flag", []string{"list", "--nope"}, "flag provided but not defined"},
		{"old flag", []string{"discard", "--message-id", "x"}, "flag provided but not defined: -message-id"},
		{"stray argument", []string{"stats", "now"}, "unexpected argument"},
		{"bad source", []string{"list", "--source", "dead"}, "--source"},
		{"bad state", []string{"list", "--state", "open,gone"}, "--state"},
		{"bad since", []string{"list", "--since", "yesterday"}, "--since"},
		{"negative until", []string{"groups", "--until", "-2h"}, "--until"},
		{"max zero", []string{"list", "--max", "0"}, "--max"},
		{"find without order", []string{"find"}, "--order is required"},
		{"replay without id or filter", []string{"replay"}, "give --id ID or a filter"},
		{"discard without id or filter", []string{"discard", "--yes"}, "give --id ID or a filter"},
		{"archive with id and filter", []string{"archive", "--id", "x", "--reason", "R"}, "not both"},
		{"body with a filter", []string{"replay", "--reason", "R", "--body", "f.json"}, "--body needs --id"},
		{"body unreadable", []string{"replay", "--id", "x", "--body", "/nonexistent/f.json"}, "--body"},
		{"restore without id", []string{"restore"}, "--id is required"},
		{"restore with a filter", []string{"restore", "--reason", "R"}, "flag provided but not defined"},
		{"sweep with a filter", []string{"sweep", "--source", "dlq"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			r := f.run(tt.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, exitUsage, r.stderr)
			}
			oneLineErr(t, r.stderr)
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q: want %q", r.stderr, tt.want)
			}
			if f.connects != 0 {
				t.Errorf("connected %d times before refusing", f.connects)
			}
		})
	}
}

func TestHelpNamesEveryCommandAndFlag(t *testing.T) {
	filter := []string{"--source", "--reason", "--group", "--order", "--since", "--until", "--text", "--state"}
	for _, c := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"--help"}, []string{"stats", "groups", "find", "list", "replay", "discard", "archive", "restore", "sweep", "--yes", "/dev/null"}},
		{[]string{"stats", "--help"}, []string{"--json", "--namespace", "--tables"}},
		{[]string{"groups", "--help"}, append([]string{"--json"}, filter...)},
		{[]string{"find", "--help"}, []string{"--order", "--json"}},
		{[]string{"list", "--help"}, append([]string{"--max", "--json"}, filter...)},
		{[]string{"replay", "--help"}, append([]string{"--id", "--body", "--dry-run", "--yes", "--json"}, filter...)},
		{[]string{"discard", "--help"}, append([]string{"--id", "--dry-run", "--yes", "--json"}, filter...)},
		{[]string{"archive", "--help"}, append([]string{"--id", "--dry-run", "--yes", "--json"}, filter...)},
		{[]string{"restore", "--help"}, []string{"--id", "--json"}},
		{[]string{"sweep", "--help"}, []string{"--dry-run", "--json"}},
	} {
		f := newFixture(t)
		r := f.run(c.args...)
		if r.code != exitOK {
			t.Errorf("%v: exit %d", c.args, r.code)
		}
		for _, fl := range c.flags {
			if !strings.Contains(r.stdout, fl) {
				t.Errorf("%v: help lacks %s:\n%s", c.args, fl, r.stdout)
			}
		}
	}
}

// An id that names nothing is bad input: replay, discard, archive and
// restore exit 2 with one line, before any question (stdin is not read)
// and without writing anything.
func TestAMissingIDExits2AndAsksNothing(t *testing.T) {
	for _, cmd := range []string{"replay", "discard", "archive", "restore"} {
		t.Run(cmd, func(t *testing.T) {
			f := newFixture(t)
			f.put(dlstore.Poison, 1, "m-1:parked", "o-1", order.ReasonInvalidTransition, "x")
			f.terminal = true
			stdin := strings.NewReader("y\n")
			f.stdin = stdin
			rec := f.record()
			r := f.run(cmd, "--id", "no-such-message")
			if r.code != exitUsage {
				t.Errorf("exit %d, want 2", r.code)
			}
			oneLineErr(t, r.stderr)
			if !strings.Contains(r.stderr, "no-such-message") {
				t.Errorf("stderr %q does not name the id", r.stderr)
			}
			if strings.Contains(r.stdout, "[y/N]") || strings.Contains(r.stderr, "[y/N]") {
				t.Errorf("asked before knowing the entry exists: %q", r.stdout)
			}
			if stdin.Len() != len("y\n") {
				t.Errorf("read stdin before knowing the entry exists")
			}
			if w := rec.written(); len(w) != 0 {
				t.Errorf("wrote %v for an id that names nothing", w)
			}
		})
	}
}

// Point 5: stdin /dev/null is not a terminal, so discard without --yes
// refuses with exit 2, and nothing changes; the same for a bulk action of
// more than one entry.
func TestDevNullIsNotATerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Fatalf("isTerminal(%s) = true", os.DevNull)
	}
	f := newFixture(t)
	a := f.put(dlstore.Poison, 1, "m-1:parked", "o-1", order.ReasonInvalidTransition, "x")
	f.put(dlstore.Poison, 2, "m-2:parked", "o-2", order.ReasonInvalidTransition, "x")
	for _, args := range [][]string{
		{"discard", "--id", a.ID},
		{"discard", "--source", "poison"},
		{"archive", "--reason", order.ReasonInvalidTransition},
	} {
		var out, errOut strings.Builder
		code := Run(f.ctx, args, &out, &errOut, Env{Getenv: func(k string) string { return f.env[k] }, Stdin: null,
			IsTerminal: func() bool { return isTerminal(null) }, StderrIsTerminal: func() bool { return false },
			Connect: func(ctx context.Context) (*Backend, error) {
				return &Backend{Broker: f.mb, Store: f.st, Orders: f.orders, Queues: f.q, Now: f.clk.Now, ReceiveWait: time.Millisecond}, nil
			}})
		if code != exitUsage {
			t.Errorf("%q: exit %d, want 2 (%s%s)", args, code, out.String(), errOut.String())
		}
		oneLineErr(t, errOut.String())
		if !strings.Contains(errOut.String(), "without --yes") {
			t.Errorf("%q: stderr %q", args, errOut.String())
		}
	}
	for id, st := range f.states() {
		if st != dlstore.Open {
			t.Errorf("%s is %s after refusals, want open", id, st)
		}
	}
}

// A sweep's progress, purge and failure lines say their counts in words
// that agree with the number.
func TestSweepLinesCountInWords(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{sweepProgress(0, 2*time.Second), "sweeping: 0 entries acted on in 2s"},
		{sweepProgress(1, 2*time.Second), "sweeping: 1 entry acted on in 2s"},
		{sweepProgress(40, 4*time.Second), "sweeping: 40 entries acted on in 4s"},
		{sweepPurged(1), "purged 1 closed entry past the retention"},
		{sweepPurged(3), "purged 3 closed entries past the retention"},
		{sweepFailed("sweep", 1), "sweep: 1 message or entry failed (see above); the others were handled"},
		{sweepFailed("sweep", 2), "sweep: 2 messages or entries failed (see above); the others were handled"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
