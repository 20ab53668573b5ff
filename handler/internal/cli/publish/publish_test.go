package publish

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	publishpkg "github.com/orderstatus/orderstatus/handler/publish"
)

const queue = "order-status"

// devHost stands in for a running `make run`: a membroker on clk behind
// the loopback server, announced in dir/.run/devhost.json.
func devHost(t *testing.T, clk clock.Clock) (*membroker.Broker, env) {
	t.Helper()
	mb := membroker.New(&membroker.Options{Clock: clk})
	o := membroker.DefaultQueueOptions()
	o.RequiresSession = true
	if err := mb.CreateQueue(queue, o); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(loopback.NewServer(mb))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	remove, err := devrun.Write(dir, devrun.Endpoints{PID: os.Getpid(), BrokerURL: srv.URL, Queue: queue, PoisonQueue: "order-status-poison", AppRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	fixed := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return mb, env{dir: dir, getenv: func(string) string { return "" }, now: func() time.Time { return fixed }}
}

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, e env, args ...string) result {
	t.Helper()
	var out, errOut strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errOut, e)
	return result{code, out.String(), errOut.String()}
}

// TestBadInputExits2 gives every flag bad input: exit 2, one line on
// stderr, nothing on stdout, and the broker's queue unchanged.
func TestBadInputExits2(t *testing.T) {
	mb, e := devHost(t, clock.Real())
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(badFile, []byte(`{"orderId":"o-1","status":"Created","sequence":1}`+"\n"+`{"orderId":"o-1","status":"Refunded","sequence":2}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dupFile := filepath.Join(dir, "dup.jsonl")
	if err := os.WriteFile(dupFile, []byte(`{"orderId":"o-1","status":"Created","sequence":1}`+"\n"+`{"orderId":"o-1","status":"Paid","sequence":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(emptyFile, []byte("\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lineErr := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := []string{"--order", "o-1", "--status", "Paid", "--sequence", "2"}
	status := func(extra ...string) []string { return append([]string{"status"}, extra...) }
	tests := []struct {
		name string
		args []string
		want string // in the line
	}{
		{"no command", nil, "a command is required"},
		{"unknown command", []string{"send"}, `unknown command "send"`},
		{"unknown flag", status(append(ok, "--colour", "red")...), "flag provided but not defined"},
		{"extra argument", status(append(ok, "now")...), `unexpected argument "now"`},
		{"status missing --order", status("--status", "Paid", "--sequence", "2"), "--order is required"},
		{"status missing --status", status("--order", "o-1", "--sequence", "2"), "--status is required"},
		{"status missing --sequence", status("--order", "o-1", "--status", "Paid"), "--sequence is required"},
		{"unknown status", status("--order", "o-1", "--status", "Refunded", "--sequence", "2"), `--status "Refunded"`},
		{"sequence 0", status("--order", "o-1", "--status", "Paid", "--sequence", "0"), "--sequence: sequence 0 is below 1"},
		{"sequence -3", status("--order", "o-1", "--status", "Paid", "--sequence", "-3"), "below 1"},
		{"sequence not a number", status("--order", "o-1", "--status", "Paid", "--sequence", "two"), "invalid value"},
		{"empty order", status("--order", "", "--status", "Paid", "--sequence", "2"), "--order: orderId is empty"},
		{"order with slash", status("--order", "a/b", "--status", "Paid", "--sequence", "2"), "--order: orderId"},
		{"order with hash", status("--order", "a#b", "--status", "Paid", "--sequence", "2"), "contains one of"},
		{"order with control char", status("--order", "a\x01b", "--status", "Paid", "--sequence", "2"), "control character"},
		{"order over 128", status("--order", strings.Repeat("a", 129), "--status", "Paid", "--sequence", "2"), "longer than 128"},
		{"occurred-at not a time", status(append(ok, "--occurred-at", "yesterday")...), `--occurred-at "yesterday"`},
		{"occurred-at without zone", status(append(ok, "--occurred-at", "2026-11-29T10:00:00")...), "RFC 3339"},
		{"occurred-at a duration ago, not a duration", status(append(ok, "--occurred-at", "31x ago")...), `a duration ago such as "31m ago"`},
		{"occurred-at a negative duration ago", status(append(ok, "--occurred-at", "-5m ago")...), `--occurred-at "-5m ago"`},
		{"occurred-at before 1601", status(append(ok, "--occurred-at", "1600-12-31T00:00:00Z")...), "--occurred-at: occurredAt"},
		{"bad namespace", status(append(ok, "--namespace", "not a namespace!")...), "--namespace"},
		{"from and order", status("--from", badFile, "--order", "o-1"), "exclude each other"},
		{"from missing file", status("--from", filepath.Join(dir, "nope.jsonl")), "nope.jsonl"},
		{"from bad status line", status("--from", badFile), "bad.jsonl:2: status \"Refunded\""},
		{"from duplicate", status("--from", dupFile), "dup.jsonl:2: order o-1 sequence 1 is on line 1 already"},
		{"from empty file", status("--from", emptyFile), "no status changes"},
		{"from not JSON", status("--from", lineErr("notjson.jsonl", `{"orderId":`)), "notjson.jsonl:1: not a status change"},
		{"from unknown field", status("--from", lineErr("field.jsonl", `{"orderId":"o-1","status":"Paid","sequence":2,"seq":3}`)), "field.jsonl:1:"},
		{"from missing sequence", status("--from", lineErr("noseq.jsonl", `{"orderId":"o-1","status":"Paid"}`)), "sequence is missing"},
		{"from string sequence", status("--from", lineErr("strseq.jsonl", `{"orderId":"o-1","status":"Paid","sequence":"2"}`)), "not an integer"},
		{"from sequence 0", status("--from", lineErr("seq0.jsonl", `{"orderId":"o-1","status":"Paid","sequence":0}`)), "seq0.jsonl:1: sequence 0 is below 1"},
		{"from bad occurredAt", status("--from", lineErr("occ.jsonl", `{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"soon"}`)), "occurredAt \"soon\""},
		{"from bad order", status("--from", lineErr("order.jsonl", `{"orderId":"a?b","status":"Paid","sequence":2}`)), "order.jsonl:1: orderId"},
		{"timeout missing --order", []string{"timeout"}, "--order is required"},
		{"timeout bad order", []string{"timeout", "--order", "a\\b"}, "--order: orderId"},
		{"timeout after 0", []string{"timeout", "--order", "o-1", "--after", "0s"}, "--after 0s"},
		{"timeout after negative", []string{"timeout", "--order", "o-1", "--after", "-1m"}, "--after -1m0s"},
		{"timeout after not a duration", []string{"timeout", "--order", "o-1", "--after", "30 minutes"}, "invalid value"},
		{"timeout after in days", []string{"timeout", "--order", "o-1", "--after", "2d"}, "invalid value"},
		{"timeout after too long", []string{"timeout", "--order", "o-1", "--after", "400h"}, "at most 336h"},
		{"timeout bad namespace", []string{"timeout", "--order", "o-1", "--namespace", "-x-"}, "--namespace"},
		{"timeout created 0", []string{"timeout", "--order", "o-1", "--created", "0"}, "--created 0: want at least 1"},
		{"timeout created not a number", []string{"timeout", "--order", "o-1", "--created", "one"}, "invalid value"},
		{"cancel missing --sequence", []string{"cancel-timeout"}, "--sequence is required"},
		{"cancel sequence 0", []string{"cancel-timeout", "--sequence", "0"}, "--sequence 0: want at least 1"},
		{"cancel sequence negative", []string{"cancel-timeout", "--sequence", "-5"}, "at least 1"},
		{"cancel sequence not a number", []string{"cancel-timeout", "--sequence", "seventeen"}, "invalid value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := mb.Stats(queue)
			r := runCLI(t, e, tc.args...)
			if r.code != ExitUsage {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, ExitUsage, r.stdout, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
				t.Errorf("stderr is not one line: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			if after := mb.Stats(queue); after != before {
				t.Errorf("queue changed: before %+v, after %+v", before, after)
			}
		})
	}
	if st := mb.Stats(queue); st != (membroker.QueueStats{}) {
		t.Errorf("queue after all the bad input: %+v, want empty", st)
	}
}

func TestHelp(t *testing.T) {
	_, e := devHost(t, clock.Real())
	for _, args := range [][]string{{"--help"}, {"help"}, {"status", "--help"}, {"timeout", "-h"}, {"cancel-timeout", "--help"}, {"wait", "--help"}} {
		r := runCLI(t, e, args...)
		if r.code != ExitOK || !strings.HasPrefix(r.stdout, "usage: orderstatus publish") || r.stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and the usage on stdout", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestCommandsAgainstDevHost runs each command against the development
// broker, in process: what they print and what the broker holds.
func TestCommandsAgainstDevHost(t *testing.T) {
	clk := clock.Scaled(1)
	clk.Advance(3 * time.Hour) // the broker's clock is not the real one
	mb, e := devHost(t, clk)

	r := runCLI(t, e, "status", "--order", "o-1", "--status", "created", "--sequence", "1")
	if r.code != ExitOK || !strings.Contains(r.stdout, "sent OrderStatusChanged o-1:1 (order o-1 Created, sequence 1) to order-status on the development host") {
		t.Fatalf("status: %+v", r)
	}
	r = runCLI(t, e, "timeout", "--order", "o-1")
	if r.code != ExitOK || !regexp.MustCompile(`^\d+\n$`).MatchString(r.stdout) || !strings.Contains(r.stderr, "to cancel it: orderstatus publish cancel-timeout --sequence "+strings.TrimSpace(r.stdout)+";") {
		t.Fatalf("timeout: %+v; want the sequence number alone on stdout", r)
	}
	seq := strings.TrimSpace(r.stdout)
	due, ok := mb.NextDue(queue)
	if want := clk.Now().Add(30 * time.Minute); !ok || want.Sub(due) < 0 || want.Sub(due) > 5*time.Second {
		t.Errorf("timeout due at %v, want 30m after the broker's now (%v)", due, want)
	}
	if st := mb.Stats(queue); st.Active != 1 || st.Scheduled != 1 {
		t.Errorf("queue %+v, want 1 active, 1 scheduled", st)
	}
	r = runCLI(t, e, "cancel-timeout", "--sequence", seq)
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "cancelled scheduled message "+seq+" on order-status") {
		t.Errorf("cancel-timeout: %+v", r)
	}
	r = runCLI(t, e, "cancel-timeout", "--sequence", seq)
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "nothing to cancel: no scheduled message "+seq) || !strings.Contains(r.stdout, "delivered or cancelled already") {
		t.Errorf("cancel-timeout twice: %+v; want exit 0 and the nothing-to-cancel line", r)
	}
	if st := mb.Stats(queue); st.Active != 1 || st.Scheduled != 0 {
		t.Errorf("queue %+v, want 1 active, 0 scheduled", st)
	}
}

// An order id of the contract's full 128 characters is published: its
// MessageIds are hashed within Service Bus's 128 (contract.StatusMessageID,
// TimeoutMessageID).
func TestLongestOrderIDIsPublished(t *testing.T) {
	mb, e := devHost(t, clock.Real())
	order := strings.Repeat("a", contract.MaxIDLength)
	r := runCLI(t, e, "status", "--order", order, "--status", "Created", "--sequence", "1")
	if id := contract.StatusMessageID(order, 1); r.code != ExitOK || !strings.Contains(r.stdout, "sent OrderStatusChanged "+id+" ") {
		t.Fatalf("status of a 128-character order: %+v; want exit 0 and MessageId %s", r, id)
	}
	if r := runCLI(t, e, "timeout", "--order", order); r.code != ExitOK {
		t.Fatalf("timeout of a 128-character order: %+v", r)
	}
	if st := mb.Stats(queue); st.Active != 1 || st.Scheduled != 1 {
		t.Errorf("queue %+v, want 1 active, 1 scheduled", st)
	}
}

func TestStatusFromFile(t *testing.T) {
	mb, e := devHost(t, clock.Real())
	var lines []string
	for o := 1; o <= 3; o++ {
		for seq := 1; seq <= 3; seq++ {
			lines = append(lines, `{"orderId":"o-`+string(rune('0'+o))+`","status":"`+[]string{"Created", "Paid", "Shipped"}[seq-1]+`","sequence":`+string(rune('0'+seq))+`,"occurredAt":"2026-11-29T10:00:00Z"}`)
		}
	}
	path := filepath.Join(t.TempDir(), "changes.jsonl")
	if err := os.WriteFile(path, []byte("\xef\xbb\xbf"+strings.Join(lines, "\n")+"\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, e, "status", "--from", path)
	if r.code != ExitOK {
		t.Fatalf("exit %d: %+v", r.code, r)
	}
	for _, want := range []string{"sending 9 status changes from " + path, "  sent 9/9\n", "sent 9 status changes\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if st := mb.Stats(queue); st.Active != 9 {
		t.Errorf("queue %+v, want 9 active", st)
	}

	e.stdin = strings.NewReader(`{"orderId":"o-4","status":"Created","sequence":1}` + "\n")
	r = runCLI(t, e, "status", "--from", "-")
	if r.code != ExitOK || !strings.Contains(r.stdout, "from standard input") || !strings.HasSuffix(r.stdout, "sent 1 status change\n") {
		t.Errorf("--from -: %+v", r)
	}
	e.stdin = strings.NewReader(`{"orderId":"o-5","status":"Created","sequence":1}` + "\n" + `{"orderId":"o-5"}` + "\n")
	if r = runCLI(t, e, "status", "--from", "-"); r.code != ExitUsage || !strings.Contains(r.stderr, "standard input:2: status is missing") {
		t.Errorf("--from - with a bad line 2: %+v", r)
	}
	if st := mb.Stats(queue); st.Active != 10 {
		t.Errorf("queue %+v, want 10 active", st)
	}
}

// FuzzParseLine: a --from line is outside input. Whatever it accepts is a
// change the encoder builds and the handler's decoder reads back as the
// same change; it never panics.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}`,
		`{"orderId":"o-1","status":"created","sequence":1}`,
		`{"orderId":"o-1","status":"Paid","sequence":2.0}`,
		`{"orderId":"","status":"Paid","sequence":1}`,
		`{"orderId":"o-1","status":"Paid","sequence":9223372036854775807,"occurredAt":"9999-12-31T23:59:59Z"}`,
		`{"orderId":"o\u0000","status":"Paid","sequence":1}`,
		`[1]`, `{}`, `{"orderId":"o-1"} {"x":1}`,
	} {
		f.Add(s)
	}
	now := func() time.Time { return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC) }
	f.Fuzz(func(t *testing.T, line string) {
		ch, err := parseLine([]byte(line), now)
		if err != nil {
			return
		}
		m, err := publishpkg.StatusMessage(ch)
		if err != nil {
			t.Fatalf("parseLine(%q) accepted %+v, which the encoder refuses: %v", line, ch, err)
		}
		u, err := order.ParseUpdate(m.Body, m.SessionID)
		if err != nil {
			t.Fatalf("parseLine(%q): the handler refuses the encoded body %s: %v", line, m.Body, err)
		}
		if u.OrderID != ch.OrderID || u.Status != ch.Status || u.Sequence != ch.Sequence || !u.OccurredAt.Equal(ch.OccurredAt) {
			t.Fatalf("parseLine(%q) = %+v; the handler reads %+v", line, ch, u)
		}
	})
}

func TestOccurredAt(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2026-11-29T10:00:00Z", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
		{"2026-11-29T11:00:00+01:00", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
		{"31m ago", now.Add(-31 * time.Minute)},
		{"1h30m ago", now.Add(-90 * time.Minute)},
		{"0s ago", now},
	}
	for _, tt := range tests {
		got, err := occurredAt(tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("occurredAt(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "31m", "ago", "-1m ago", "2026-11-29T10:00:00 ago"} {
		if _, err := occurredAt(bad, now); err == nil {
			t.Errorf("occurredAt(%q): no error", bad)
		}
	}
}
