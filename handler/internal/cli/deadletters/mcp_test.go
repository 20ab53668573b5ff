package deadletters

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// mcpClient connects the SDK's own client, named test-client, in process
// to `deadletters mcp` (with --allow-write if write) on the fixture.
func (f *fixture) mcpClient(write bool) *mcp.ClientSession {
	f.t.Helper()
	var stderr strings.Builder
	c := &cli{ctx: f.ctx, stdout: &strings.Builder{}, stderr: &stderr, env: f.cliEnv(nil), name: "orderstatus deadletters mcp"}
	s, err := c.connectSession()
	if err != nil {
		f.t.Fatal(err)
	}
	srvT, cliT := mcp.NewInMemoryTransports()
	ss, err := c.mcpServer(s, write, slog.New(slog.DiscardHandler)).Connect(f.ctx, srvT, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(f.ctx, cliT, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	return cs
}

// call calls tool with args; it fails the test on a protocol error or when
// the result's IsError is not wantErr. It returns the text and the
// structured result decoded into out (if not nil).
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, wantErr bool, out any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	if res.IsError != wantErr {
		t.Fatalf("%s %v: IsError %v, want %v: %s", tool, args, res.IsError, wantErr, strings.Join(text, "\n"))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, b, err)
		}
	}
	if len(text) == 0 {
		t.Fatalf("%s %v: no text", tool, args)
	}
	return text[0]
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// Read-only by default: the read tools only; --allow-write adds replay,
// discard, archive and restore.
func TestMCPToolList(t *testing.T) {
	f := newFixture(t)
	read := []string{"find_order", "groups", "list", "show", "stats"}
	if got := toolNames(t, f.mcpClient(false)); !slices.Equal(got, read) {
		t.Errorf("tools = %v, want %v", got, read)
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(read), writeTools...)))
	if got := toolNames(t, f.mcpClient(true)); !slices.Equal(got, all) {
		t.Errorf("tools with --allow-write = %v, want %v", got, all)
	}
}

// Every read tool answers what the CLI's command with the same filter
// prints with --json, under the same keys, and changes nothing.
func TestMCPReadToolsAnswerAsTheCLI(t *testing.T) {
	f := newFixture(t)
	f.clk.SetFactor(1e-9) // one instant for the CLI's and the tools' ages
	if _, err := f.orders.Insert(f.ctx, "o-1", order.State{Status: order.Status("Created"), LastSequence: 1,
		OccurredAt: f.clk.Now(), UpdatedAt: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	e := f.put(dlstore.DLQ, 7, "o-1:2", "o-1", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.put(dlstore.Poison, 8, "o-2:3:parked", "o-2", order.ReasonInvalidTransition, `order "o-2": Paid after Cancelled`)
	f.clk.Advance(time.Hour)
	f.must("replay", "--id", e.ID)
	f.put(dlstore.Poison, 9, "o-3:3:parked", "o-3", order.ReasonInvalidTransition, `order "o-3": Paid after Cancelled`)
	f.deadLetter("o-4:1", "o-4")
	r := f.record()
	cs := f.mcpClient(false)

	for _, tc := range []struct {
		tool, key string
		args      map[string]any
		cli       []string
	}{
		{"stats", "stats", nil, []string{"stats", "--json"}},
		{"groups", "groups", nil, []string{"groups", "--json"}},
		{"groups", "groups", map[string]any{"source": "poison", "state": "open,replayed"}, []string{"groups", "--json", "--source", "poison", "--state", "open,replayed"}},
		{"list", "entries", nil, []string{"list", "--json"}},
		{"list", "entries", map[string]any{"state": "replayed", "order_id": "o-1"}, []string{"list", "--json", "--state", "replayed", "--order", "o-1"}},
		{"list", "entries", map[string]any{"text": "O-3", "since": "30m"}, []string{"list", "--json", "--text", "O-3", "--since", "30m"}},
		{"find_order", "events", map[string]any{"order_id": "o-1"}, []string{"find", "--order", "o-1", "--json"}},
	} {
		var out map[string]any
		text := call(t, cs, tc.tool, tc.args, false, &out)
		var got []any
		if v, ok := out[tc.key].([]any); ok {
			got = v
		}
		var want []any
		for _, l := range lines(t, f.must(tc.cli...).stdout) {
			want = append(want, any(l))
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s %v = %v\nthe CLI's %q prints %v", tc.tool, tc.args, got, tc.cli, want)
		}
		if text == "" || strings.HasPrefix(text, "{") {
			t.Errorf("%s: text %q, want a summary in words", tc.tool, text)
		}
	}
	var ev struct {
		Events []struct {
			Kind  string
			Audit *struct{ Action, Actor string }
		}
	}
	call(t, cs, "find_order", map[string]any{"order_id": "o-1"}, false, &ev)
	if n := len(ev.Events); n != 4 || ev.Events[3].Audit == nil || ev.Events[3].Audit.Action != "replayed" {
		t.Errorf("find_order o-1: %+v, want the order row, the entry, stored and replayed", ev.Events)
	}

	var shown map[string]any
	text := call(t, cs, "show", map[string]any{"id": "o-2:3:parked"}, false, &shown)
	props, _ := shown["properties"].(map[string]any)
	if shown["state"] != "open" || shown["order_id"] != "o-2" || !strings.Contains(shown["body"].(string), `"orderId":"o-2"`) ||
		props["tenant"] != "t-1" || props["OriginalSessionId"] != "o-2" || !strings.Contains(text, "o-2:3:parked") {
		t.Errorf("show: %v (%s)", shown, text)
	}
	if w := r.written(); len(w) != 0 {
		t.Errorf("the read tools wrote: %v", w)
	}
}

// A discard of a filter's set acts only when called again with the
// confirmation token the first call returned, and then only on the set
// that call showed: an entry stored since is untouched, one changed since
// is skipped, and the token is spent.
func TestMCPBulkDiscardNeedsItsConfirmation(t *testing.T) {
	f := newFixture(t)
	var set []string
	for i := range 3 {
		set = append(set, f.put(dlstore.Poison, int64(i+1), "p-"+string(rune('a'+i))+":parked", "o-1", order.ReasonInvalidTransition, "x").ID)
	}
	f.put(dlstore.DLQ, 9, "d:1", "o-9", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	cs := f.mcpClient(true)
	filter := map[string]any{"source": "poison"}

	var first actOut
	text := call(t, cs, "discard", filter, false, &first)
	if first.Total != 3 || len(first.Sample) != 3 || first.Confirm == "" || !strings.Contains(text, first.Confirm) || first.Done != 0 {
		t.Fatalf("first call: %+v (%s); want the count, a sample and a token", first, text)
	}
	for id, st := range f.states() {
		if st != dlstore.Open {
			t.Fatalf("the first call changed %s to %s", id, st)
		}
	}
	for _, args := range []map[string]any{
		{"confirm": "0123456789abcdef01234567"},
		{"confirm": first.Confirm, "source": "dlq"},
	} {
		if text := call(t, cs, "discard", args, true, nil); !strings.Contains(text, "confirm") {
			t.Errorf("discard %v: %q does not name confirm", args, text)
		}
	}
	if text := call(t, cs, "archive", map[string]any{"confirm": first.Confirm}, true, nil); !strings.Contains(text, "the token is for discard") {
		t.Errorf("archive with a discard's token: %q", text)
	}

	f.clk.Advance(time.Second)
	late := f.put(dlstore.Poison, 20, "p-late:parked", "o-1", order.ReasonInvalidTransition, "x").ID
	f.must("archive", "--id", set[1]) // changed meanwhile
	var done actOut
	text = call(t, cs, "discard", map[string]any{"confirm": first.Confirm}, false, &done)
	if done.Done != 2 || done.Failed != 0 || !slices.Equal(done.Skipped, []string{set[1]}) || !strings.Contains(text, "1 skipped") {
		t.Errorf("confirmed: %+v (%s); want 2 done and %s skipped", done, text, set[1])
	}
	st := f.states()
	for id, want := range map[string]dlstore.State{set[0]: dlstore.Discarded, set[1]: dlstore.Archived, set[2]: dlstore.Discarded, late: dlstore.Open} {
		if st[id] != want {
			t.Errorf("%s is %s, want %s", id, st[id], want)
		}
	}
	for _, a := range f.history("o-1") {
		if a.Action == "discarded" && a.Actor != "mcp:test-client/"+(&cli{env: f.cliEnv(nil)}).user() {
			t.Errorf("audit actor %q, want the MCP client and the operator", a.Actor)
		}
	}
	if text := call(t, cs, "discard", map[string]any{"confirm": first.Confirm}, true, nil); !strings.Contains(text, "no such token") {
		t.Errorf("a spent token: %q", text)
	}

	// discard of one entry also asks first.
	var one actOut
	call(t, cs, "discard", map[string]any{"id": late}, false, &one)
	if one.Confirm == "" || f.entry(late).State != dlstore.Open {
		t.Fatalf("discard id: %+v, entry %s; want a token and nothing changed", one, f.entry(late).State)
	}
	call(t, cs, "discard", map[string]any{"confirm": one.Confirm, "id": late}, false, nil)
	if st := f.entry(late).State; st != dlstore.Discarded {
		t.Errorf("discard id confirmed: %s", st)
	}
}

func (f *fixture) history(orderID string) []dlstore.AuditEntry {
	f.t.Helper()
	h, err := f.st.History(f.ctx, orderID)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// A replay with edited properties: the dry run shows the message as it
// would be sent, the replay sends it so, and find --order shows the entry
// replayed and its audit entry naming the MCP client and what changed.
func TestMCPReplayWithEditedProperties(t *testing.T) {
	f := newFixture(t)
	e := f.putProps(map[string]any{"tenant": "t-1", "attempt": int64(1), "debug": "on"})
	cs := f.mcpClient(true)
	args := map[string]any{"id": e.ID, "set_properties": map[string]any{"tenant": "t-2", "attempt": "2", "note": "fixed by hand"},
		"remove_properties": []any{"debug"}, "dry_run": true}
	var dry actOut
	call(t, cs, "replay", args, false, &dry)
	if len(dry.Sample) != 1 || dry.Sample[0].Message == nil {
		t.Fatalf("dry run: %+v, want the message", dry)
	}
	msg := dry.Sample[0].Message
	if p := msg.Properties; p["tenant"] != "t-2" || p["attempt"] != float64(2) || p["note"] != "fixed by hand" || p["debug"] != nil ||
		msg.MessageID != "o-1:2:replay:1" || msg.SessionID != "o-1" {
		t.Errorf("dry run message %+v", msg)
	}
	if n := len(f.peek(broker.Source{Queue: f.q.Queue})); n != 0 || f.entry(e.ID).State != dlstore.Open {
		t.Fatalf("the dry run sent %d, entry %s", n, f.entry(e.ID).State)
	}

	delete(args, "dry_run")
	var done actOut
	text := call(t, cs, "replay", args, false, &done)
	if done.Done != 1 || len(done.Items) != 1 || done.Items[0].NewMessageID != "o-1:2:replay:1" || !strings.Contains(text, "o-1:2:replay:1") {
		t.Errorf("replay: %+v (%s)", done, text)
	}
	sent := f.peek(broker.Source{Queue: f.q.Queue})
	if len(sent) != 1 {
		t.Fatalf("sent %d messages, want 1", len(sent))
	}
	if p := sent[0].ApplicationProperties; p["tenant"] != "t-2" || p["attempt"] != int64(2) || p["note"] != "fixed by hand" || p["debug"] != nil ||
		p[deadletter.PropReplayCount] != int64(1) {
		t.Errorf("sent properties %v", p)
	}
	ls := lines(t, f.must("find", "--order", "o-1", "--json").stdout)
	if len(ls) != 3 || ls[0]["kind"] != "entry" {
		t.Fatalf("find --order o-1: %v, want the entry and two audit entries", ls)
	}
	last := ls[2]["audit"].(map[string]any)
	detail, _ := last["detail"].(string)
	if ls[0]["entry"].(map[string]any)["state"] != "replayed" || last["action"] != "replayed" ||
		!strings.HasPrefix(last["actor"].(string), "mcp:test-client/") || last["new_message_id"] != "o-1:2:replay:1" {
		t.Errorf("find --order o-1: %v", ls)
	}
	for _, want := range []string{`set attempt="2"`, `set note="fixed by hand"`, `set tenant="t-2"`, "removed debug"} {
		if !strings.Contains(detail, want) {
			t.Errorf("audit detail %q lacks %q", detail, want)
		}
	}
}

// putProps stores a dead-lettered update of o-1 carrying props.
func (f *fixture) putProps(props map[string]any) dlstore.Entry {
	f.t.Helper()
	e := deadletter.EntryOf(dlstore.DLQ, broker.Received{Message: broker.Message{MessageID: "o-1:2", SessionID: "o-1",
		Subject: order.SubjectStatusChanged, ContentType: "application/json", Body: updateBody("o-1", "Paid", 2), ApplicationProperties: props},
		SequenceNumber: 7, DeliveryCount: 5, EnqueuedTime: f.clk.Now(), DeadLetterReason: broker.ReasonMaxDeliveryCountExceeded,
		DeadLetterErrorDescription: "five deliveries"}, f.clk.Now())
	if _, err := f.st.Put(f.ctx, e, "sweeper"); err != nil {
		f.t.Fatal(err)
	}
	return e
}

// Bad arguments: an error that names the argument at fault, and nothing
// changed (no write, nothing sent).
func TestMCPBadArguments(t *testing.T) {
	f := newFixture(t)
	e := f.putProps(map[string]any{"tenant": "t-1", "attempt": int64(1)})
	r := f.record()
	cs := f.mcpClient(true)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"list", map[string]any{"source": "nope"}, `source "nope"`},
		{"list", map[string]any{"state": "open,weird"}, `state "weird"`},
		{"list", map[string]any{"since": "yesterday"}, `since "yesterday"`},
		{"list", map[string]any{"since": "1h", "until": "2h"}, "since"},
		{"list", map[string]any{"max": -1}, "max"},
		{"list", map[string]any{"colour": "red"}, "colour"},
		{"find_order", map[string]any{"order_id": ""}, "order_id"},
		{"find_order", map[string]any{"order_id": "a/b"}, "order_id"},
		{"show", map[string]any{"id": "nope"}, "id"},
		{"replay", map[string]any{}, "give id"},
		{"replay", map[string]any{"id": e.ID, "source": "dlq"}, "not both"},
		{"replay", map[string]any{"source": "dlq", "subject": order.SubjectStatusChanged}, "need id"},
		{"replay", map[string]any{"id": e.ID, "set_properties": map[string]any{deadletter.PropReplayCount: "5"}}, "set_properties"},
		{"replay", map[string]any{"id": e.ID, "set_properties": map[string]any{"attempt": "two"}}, "set_properties"},
		{"replay", map[string]any{"id": e.ID, "remove_properties": []any{"absent"}}, "remove_properties"},
		{"replay", map[string]any{"id": e.ID, "body": "not json"}, "body"},
		{"replay", map[string]any{"id": e.ID, "subject": "NoSuchSubject"}, "subject"},
		{"replay", map[string]any{"id": "nope"}, "id"},
		{"archive", map[string]any{"source": "dlq", "confirm": "x", "dry_run": true}, "confirm"},
		{"restore", map[string]any{"id": e.ID}, "is open"},
	} {
		text := call(t, cs, tc.tool, tc.args, true, nil)
		if !strings.Contains(text, tc.want) {
			t.Errorf("%s %v: %q does not name %q", tc.tool, tc.args, text, tc.want)
		}
	}
	if w := r.written(); len(w) != 0 {
		t.Errorf("bad arguments wrote: %v", w)
	}
	if got := f.entry(e.ID); got.State != dlstore.Open || got.Actions != 1 {
		t.Errorf("entry %s with %d actions, want untouched", got.State, got.Actions)
	}
}

// The built binary speaks MCP over stdio: `deadletters mcp --help` answers
// with its flags, and `deadletters mcp --tables <Azurite>` (no Service Bus,
// no development host) initializes, lists the read tools only and answers
// find_order and list from the store, writing nothing but protocol
// messages on stdout (the client would fail on anything else) and its
// line on stderr.
func TestMCPOverStdioOfTheBuiltBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := testenv.Azurite(t)
	bin := filepath.Join(t.TempDir(), "orderstatus")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/orderstatus/orderstatus/handler/cmd/orderstatus").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help, err := exec.CommandContext(ctx, bin, "deadletters", "mcp", "--help").Output()
	if err != nil {
		t.Fatalf("deadletters mcp --help: %v", err)
	}
	for _, want := range []string{"usage: orderstatus deadletters mcp", "--allow-write", "--namespace", "--tables"} {
		if !strings.Contains(string(help), want) {
			t.Errorf("deadletters mcp --help lacks %q:\n%s", want, help)
		}
	}

	dlTable, orderTable, e := seedAzurite(ctx, t, cs)

	cmd := exec.CommandContext(ctx, bin, "deadletters", "mcp", "--tables", cs)
	cmd.Dir = t.TempDir() // no development host here
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEAD_LETTER_TABLE=" + dlTable, "OrderStore__tableName=" + orderTable}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	session, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %q)", err, stderr.String())
	}
	if got, want := toolNames(t, session), []string{"find_order", "groups", "list", "show", "stats"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	var found findOut
	call(t, session, "find_order", map[string]any{"order_id": "o-1"}, false, &found)
	var kinds []string
	for _, ev := range found.Events {
		kinds = append(kinds, ev.Kind)
	}
	if !slices.Equal(kinds, []string{"order", "entry", "audit"}) || len(found.Unreadable) != 0 {
		t.Errorf("find_order o-1: kinds %v, unreadable %v; want the order row, the entry and its audit entry", kinds, found.Unreadable)
	}
	var listed listOut
	call(t, session, "list", nil, false, &listed)
	if len(listed.Entries) != 1 || listed.Entries[0].ID != e.ID {
		t.Errorf("list: %+v, want the one entry %s", listed, e.ID)
	}
	if err := session.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if !strings.Contains(stderr.String(), "serving MCP on stdin and stdout, read-only") {
		t.Errorf("stderr %q: want the serving line", stderr.String())
	}
}
