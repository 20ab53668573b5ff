package deadletters

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlops"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

const mcpSummary = "Serves the commands' tools to an assistant: an MCP server speaking JSON-RPC on stdin and stdout\n" +
	"(nothing else is written there; logs go to stderr), connected as the other commands are, with\n" +
	"your identity. Read tools: stats, groups, list, find_order, show. --allow-write adds replay,\n" +
	"discard, archive and restore; a filter's set (and any discard) is acted on only when called\n" +
	"again with the confirmation token the first call returned. Audit entries name the MCP client\n" +
	"and you (mcp:<client>/<user>). See docs/mcp.md."

// tokenTTL is how long a confirmation token stays good.
const tokenTTL = 15 * time.Minute

// The write tools; the read tools are always on.
var writeTools = []string{"replay", "discard", "archive", "restore"}

// mcpServer is one `deadletters mcp`: a connected session and the sets its
// confirmation tokens pin.
type mcpServer struct {
	c   *cli
	s   *session
	key []byte
	mu  sync.Mutex
	pin map[string]pinned
}

// pinned is the set a first call showed: exactly what its token acts on.
type pinned struct {
	action  deadletter.Action
	args    string // the selecting arguments, as canonical JSON
	set     []dlstore.Entry
	refused int
	issued  time.Time
}

func (c *cli) mcp(args []string) int {
	fs := c.flags()
	allowWrite := fs.Bool("allow-write", false, "add the write tools replay, discard, archive and restore (default: read tools only)")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	s, err := c.connectSession()
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	s.logger = slog.New(slog.NewTextHandler(c.stderr, nil))
	srv := c.mcpServer(s, *allowWrite, slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	fmt.Fprintf(c.stderr, "%s: serving MCP on stdin and stdout, %s\n", c.name, map[bool]string{false: "read-only (--allow-write adds " +
		strings.Join(writeTools, ", ") + ")", true: "with the write tools " + strings.Join(writeTools, ", ")}[*allowWrite])
	err = srv.Run(c.ctx, &mcp.IOTransport{Reader: io.NopCloser(c.env.Stdin), Writer: nopCloser{c.stdout}})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
		return c.fail(err)
	}
	return exitOK
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// mcpServer returns the MCP server over s: the read tools, and the write
// tools if allowWrite.
func (c *cli) mcpServer(s *session, allowWrite bool, log *slog.Logger) *mcp.Server {
	m := &mcpServer{c: c, s: s, key: []byte(rand.Text()), pin: map[string]pinned{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "orderstatus-deadletters", Version: "1"}, &mcp.ServerOptions{Logger: log,
		Instructions: "The order-status dead-letter store. Read tools first; write tools exist only with --allow-write. " +
			"A write on a filter, and any discard, returns a count, a sample and a confirm token: show them to the user, " +
			"and call again with confirm to act on exactly that set."})
	readTool(srv, m, "stats", "Depth, oldest age, in queue and left for a human, per source and reason (the entries not closed, and what Service Bus still holds).", m.stats)
	readTool(srv, m, "groups", "Failure groups (source, reason, description fingerprint) of the entries not closed or those the filter selects: count, orders, first and last seen, what the policy does.", m.groups)
	readTool(srv, m, "list", "The entries the filter selects (default: those not closed), oldest first, without bodies.", m.list)
	readTool(srv, m, "find_order", "Everything about one order in time order: its row in the order table, its dead letters in every state, every audit entry.", m.findOrder)
	readTool(srv, m, "show", "One entry with its message: headers, application properties and body.", m.show)
	if !allowWrite {
		return srv
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "replay", Description: "Send entries back to order-status as <original>:replay:<n>. With id, edits (set_properties, remove_properties, subject, body) change the message first, each checked against the message contract; dry_run shows the message as it would be sent. A filter needs confirm."},
		func(ctx context.Context, req *mcp.CallToolRequest, a replayArgs) (*mcp.CallToolResult, actOut, error) {
			ed := &dlops.Edit{Set: a.SetProperties, Remove: a.RemoveProperties, Subject: strings.TrimSpace(a.Subject)}
			if a.Body != "" {
				ed.Body = []byte(a.Body)
			}
			return m.act(ctx, req, deadletter.ActionReplay, a.actArgs, ed)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "discard", Description: "Close entries as discarded: kept with their audit until the retention, then purged. Always needs confirm."},
		func(ctx context.Context, req *mcp.CallToolRequest, a actArgs) (*mcp.CallToolResult, actOut, error) {
			return m.act(ctx, req, deadletter.ActionDiscard, a, nil)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "archive", Description: "Set entries aside as archived (off every queue; restore reopens one). A filter needs confirm."},
		func(ctx context.Context, req *mcp.CallToolRequest, a actArgs) (*mcp.CallToolResult, actOut, error) {
			return m.act(ctx, req, deadletter.ActionArchive, a, nil)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "restore", Description: "Reopen an archived or left entry: open again, to be corrected and replayed."},
		func(ctx context.Context, req *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, actOut, error) {
			return m.act(ctx, req, deadletter.ActionRestore, actArgs{ID: a.ID}, nil)
		})
	return srv
}

// filterArgs are FILTER as arguments.
type filterArgs struct {
	Source  string `json:"source,omitempty" jsonschema:"only entries from this source: dlq, poison or poison-dlq"`
	Reason  string `json:"reason,omitempty" jsonschema:"only entries with this dead-letter reason, e.g. MaxDeliveryCountExceeded"`
	Group   string `json:"group,omitempty" jsonschema:"only entries of this failure group, as groups returns it"`
	OrderID string `json:"order_id,omitempty" jsonschema:"only entries of this order id"`
	Since   string `json:"since,omitempty" jsonschema:"only entries stored at or after this time: RFC 3339, or a duration meaning that long ago (2h, 7d)"`
	Until   string `json:"until,omitempty" jsonschema:"only entries stored before this time: RFC 3339, or a duration meaning that long ago"`
	Text    string `json:"text,omitempty" jsonschema:"only entries whose MessageId, order id, description or body contains this (any case)"`
	State   string `json:"state,omitempty" jsonschema:"only entries in these states, comma-separated: open, left, replay-due, replayed, archived, discarded"`
}

func (a filterArgs) flags() *filterFlags {
	return &filterFlags{source: a.Source, reason: a.Reason, group: a.Group, order: a.OrderID, since: a.Since, until: a.Until,
		text: a.Text, state: a.State, mcp: true}
}

type listArgs struct {
	filterArgs
	Max int `json:"max,omitempty" jsonschema:"at most this many entries, the oldest (default 50)"`
}

type findArgs struct {
	OrderID string `json:"order_id" jsonschema:"the order id (its SessionId)"`
}

type idArgs struct {
	ID string `json:"id" jsonschema:"the entry's id as list returns it, or the MessageId of the dead letter"`
}

type actArgs struct {
	ID string `json:"id,omitempty" jsonschema:"one entry: its id as list returns it, or the MessageId of the dead letter (or give a filter)"`
	filterArgs
	DryRun  bool   `json:"dry_run,omitempty" jsonschema:"say what would be done and change nothing"`
	Confirm string `json:"confirm,omitempty" jsonschema:"the token a first call returned: act on exactly the set it showed"`
}

type replayArgs struct {
	actArgs
	SetProperties    map[string]string `json:"set_properties,omitempty" jsonschema:"application properties to set (id only); a value is read as the type of the one it replaces"`
	RemoveProperties []string          `json:"remove_properties,omitempty" jsonschema:"application properties to remove (id only)"`
	Subject          string            `json:"subject,omitempty" jsonschema:"send with this subject instead (id only)"`
	Body             string            `json:"body,omitempty" jsonschema:"send this body instead (id only)"`
}

type statsOut struct {
	Stats      []deadletter.Stat `json:"stats"`
	Unreadable []string          `json:"unreadable,omitempty"`
}

type groupsOut struct {
	Groups []dlops.Group `json:"groups"`
}

type listOut struct {
	Entries []entryOut `json:"entries"`
	// More is how many more match than Entries shows.
	More int `json:"more"`
}

type findOut struct {
	Events     []event  `json:"events"`
	Unreadable []string `json:"unreadable,omitempty"`
}

// actOut is a write tool's result: the CLI's closing line, then the set's
// sample and confirmation token (a first call), or what was done.
type actOut struct {
	bulkSummary
	Confirm string `json:"confirm,omitempty"`
	// Skipped are the pinned entries changed since the first call.
	Skipped []string          `json:"skipped,omitempty"`
	Sample  []dryItem         `json:"sample,omitempty"`
	Items   []deadletter.Item `json:"items,omitempty"`
}

// toolResult is out with its summary in text, then out as JSON text too, for
// clients that read only the text.
func toolResult(out any, summary string, failed bool) *mcp.CallToolResult {
	b, _ := json.Marshal(out)
	return &mcp.CallToolResult{IsError: failed, Content: []mcp.Content{&mcp.TextContent{Text: summary}, &mcp.TextContent{Text: string(b)}}}
}

// open builds the sweeper for one call on the server's connection.
func (m *mcpServer) open(u use) (*session, error) {
	s := *m.s
	var err error
	s.sw, err = s.ops(u)
	return &s, err
}

// actor names the MCP client (from its initialize) and the operator.
func (m *mcpServer) actor(req *mcp.CallToolRequest) string {
	client := "unknown-client"
	if ci := req.ClientInfo(); ci != nil && strings.TrimSpace(ci.Name) != "" {
		client = shorten(ci.Name, 40)
	}
	return "mcp:" + client + "/" + m.c.user()
}

// readTool adds a read-only tool: h answers on a session that reads, with
// its result and a summary in words.
func readTool[In, Out any](srv *mcp.Server, m *mcpServer, name, desc string, h func(context.Context, *session, In) (Out, string, error)) {
	mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
			s, err := m.open(reads)
			var out Out
			var summary string
			if err == nil {
				out, summary, err = h(ctx, s, in)
			}
			if err != nil {
				return nil, out, err
			}
			return toolResult(out, summary, false), out, nil
		})
}

func (m *mcpServer) stats(ctx context.Context, s *session, _ struct{}) (statsOut, string, error) {
	st, unreadable, err := s.sw.Stats(ctx)
	if err != nil && len(unreadable) == 0 {
		return statsOut{}, "", err
	}
	out := statsOut{Stats: st, Unreadable: s.serviceBusParts(unreadable)}
	var lines []string
	for _, x := range st {
		if x.Depth > 0 {
			lines = append(lines, fmt.Sprintf("%s %s: depth %d, oldest %s, in queue %d, left %d", x.Source, orDash(x.Reason),
				x.Depth, age(x.OldestAgeSeconds), x.InQueue, x.Left))
		}
	}
	if len(lines) == 0 {
		lines = []string{"no dead letters"}
	}
	if len(out.Unreadable) > 0 {
		lines = append(lines, "could not read "+strings.Join(out.Unreadable, "; "))
	}
	return out, strings.Join(lines, "\n"), nil
}

// filter checks a's filter (states: the default without state) and
// resolves it on s's clock.
func (s *session) filter(a filterArgs, states []dlstore.State) (filter, dlstore.Filter, error) {
	pf, err := a.flags().check(states)
	if err != nil {
		return pf, dlstore.Filter{}, err
	}
	f, err := pf.at(s.sw.Now())
	return pf, f, err
}

func (m *mcpServer) groups(ctx context.Context, s *session, a filterArgs) (groupsOut, string, error) {
	_, f, err := s.filter(a, nil)
	if err != nil {
		return groupsOut{}, "", err
	}
	gs, err := s.sw.Groups(ctx, f)
	lines := []string{wording.Count(len(gs), "failure group")}
	for _, g := range gs {
		lines = append(lines, fmt.Sprintf("%s: %s %s, %d (%d orders), policy %s: %s", g.ID, g.Source, orDash(g.Reason), g.Count, g.Orders,
			g.Action, shorten(g.Template, 80)))
	}
	return groupsOut{Groups: gs}, strings.Join(lines, "\n"), err
}

func (m *mcpServer) list(ctx context.Context, s *session, a listArgs) (listOut, string, error) {
	if a.Max < 0 {
		return listOut{}, "", fmt.Errorf("max %d: want at least 1", a.Max)
	}
	_, f, err := s.filter(a.filterArgs, dlstore.NotClosed().States)
	if err != nil {
		return listOut{}, "", err
	}
	es, err := s.sw.Select(ctx, f)
	limit := cmp.Or(a.Max, 50)
	now := s.sw.Now()
	out := listOut{Entries: []entryOut{}, More: max(len(es)-limit, 0)}
	for _, e := range es[:min(len(es), limit)] {
		out.Entries = append(out.Entries, entryOf(e, now))
	}
	summary := fmt.Sprintf("%s (states %s), oldest first", wording.CountAs(len(es), "dead letter matches", "dead letters match"), statesOf(f.States))
	if out.More > 0 {
		summary += fmt.Sprintf("; %d more not shown (raise max or narrow the filter)", out.More)
	}
	return out, summary, err
}

func (m *mcpServer) findOrder(ctx context.Context, s *session, a findArgs) (findOut, string, error) {
	id := a.OrderID
	if strings.TrimSpace(id) == "" {
		return findOut{}, "", errors.New("order_id is required")
	}
	if err := tableKey(id); err != nil {
		return findOut{}, "", fmt.Errorf("order_id %q: %v, so no order has it (list with order_id shows dead letters that carry it)", id, err)
	}
	events, unreadable := s.orderEvents(ctx, id)
	counts := map[string]int{}
	for _, e := range events {
		counts[e.Kind]++
	}
	summary := fmt.Sprintf("order %s: %s in the order table, %s, %s", id, wording.Count(counts["order"], "row"),
		wording.Count(counts["entry"], "dead letter"), wording.Count(counts["audit"], "audit entry"))
	if len(unreadable) > 0 {
		summary += "; could not read " + strings.Join(unreadable, "; ")
	}
	return findOut{Events: events, Unreadable: unreadable}, summary, nil
}

func (m *mcpServer) show(ctx context.Context, s *session, a idArgs) (shownEntry, string, error) {
	if strings.TrimSpace(a.ID) == "" {
		return shownEntry{}, "", errors.New("id is required")
	}
	e, err := s.sw.Find(ctx, strings.TrimSpace(a.ID))
	if err != nil {
		return shownEntry{}, "", fmt.Errorf("id: %w", err)
	}
	return shownOf(e, s.sw.Now()), fmt.Sprintf("%s (%s, order %s): %s, %s: %s", e.ID, e.MessageID, orDash(e.OrderID), e.State,
		orDash(e.Reason), shorten(e.Description, 80)), nil
}

// editArgs name the edit fields (dlops.EditError) as arguments.
var editArgs = map[string]string{dlops.FieldSet: "set_properties", dlops.FieldRemove: "remove_properties",
	dlops.FieldSubject: "subject", dlops.FieldBody: "body"}

// editErr names the arguments of a refused edit; other errors pass.
func editErr(err error, ed *dlops.Edit) error {
	if f := editFields(err, ed, editArgs); f != "" {
		return fmt.Errorf("%s: %w", f, err)
	}
	return err
}

// act is replay, discard, archive and restore: on one entry (id) at once,
// except discard; on a filter's set, or a discard, only when confirmed.
// Every refusal comes before the first change.
func (m *mcpServer) act(ctx context.Context, req *mcp.CallToolRequest, a deadletter.Action, args actArgs, ed *dlops.Edit) (*mcp.CallToolResult, actOut, error) {
	none := actOut{}
	args.ID = strings.TrimSpace(args.ID)
	ff := args.filterArgs.flags()
	switch {
	case args.ID == "" && !ff.given() && args.Confirm == "":
		return nil, none, errors.New("give id, or a filter (source, reason, group, order_id, since, until, text, state)")
	case args.ID != "" && ff.given():
		return nil, none, errors.New("give id or a filter, not both")
	case args.Confirm != "" && args.DryRun:
		return nil, none, errors.New("confirm acts: give it without dry_run")
	case !ed.IsZero() && args.ID == "":
		return nil, none, errors.New("set_properties, remove_properties, subject and body need id (edits are for one message)")
	}
	if err := ed.Check(); err != nil {
		return nil, none, editErr(err, ed)
	}
	if !ed.IsZero() && args.Confirm != "" {
		return nil, none, errors.New("confirm: edits act at once, with no token")
	}
	if args.Confirm != "" {
		return m.confirmed(ctx, req, a, args)
	}
	s, err := m.open(useOf(a, args.DryRun))
	if err != nil {
		return nil, none, err
	}
	if args.ID != "" {
		return m.actOne(ctx, req, s, a, args, ed)
	}
	pf, f, err := s.filter(args.filterArgs, bulkStates)
	if err != nil {
		return nil, none, err
	}
	set, err := s.sw.Select(ctx, f)
	if err != nil {
		return nil, none, err
	}
	set, refused := actionable(set, a)
	now := s.sw.Now()
	out := actOut{bulkSummary: bulkSummary{Action: a, DryRun: args.DryRun, Total: len(set), Refused: len(refused)}}
	for _, e := range set[:min(len(set), sampleSize)] {
		out.Sample = append(out.Sample, dryOf(e, a, now))
	}
	summary := fmt.Sprintf("%s now (states %s)", wording.CountAs(len(set)+len(refused), "dead letter matches", "dead letters match"), statesOf(pf.f.States))
	if len(refused) > 0 {
		summary += fmt.Sprintf("; %d left alone: %s does not take them in their state (%s)", len(refused), verbs[a], statesOf(statesIn(refused)))
	}
	switch {
	case len(set) == 0:
		return toolResult(out, summary+"; nothing to "+verbs[a], false), out, nil
	case args.DryRun:
		return toolResult(out, summary+fmt.Sprintf("; dry run: would %s %s, nothing changed", verbs[a], wording.Count(len(set), "dead letter")), false), out, nil
	}
	out.Confirm = m.pinSet(a, args, set, len(refused))
	summary += fmt.Sprintf("; nothing changed yet. Call %s again with confirm %q to %s exactly these %s (entries stored later are not touched)",
		verbs[a], out.Confirm, verbs[a], wording.Count(len(set), "dead letter"))
	return toolResult(out, summary, false), out, nil
}

func (m *mcpServer) actOne(ctx context.Context, req *mcp.CallToolRequest, s *session, a deadletter.Action, args actArgs, ed *dlops.Edit) (*mcp.CallToolResult, actOut, error) {
	none := actOut{}
	e, msg, err := s.target(ctx, a, args.ID, ed)
	if errors.Is(err, deadletter.ErrNoMessage) {
		return nil, none, fmt.Errorf("id: %w", err)
	}
	if err != nil {
		return nil, none, editErr(err, ed)
	}
	out := actOut{bulkSummary: bulkSummary{Action: a, DryRun: args.DryRun, Total: 1}}
	it := dryOf(e, a, s.sw.Now())
	if msg != nil {
		it.Message = messageOf(*msg)
	}
	what := fmt.Sprintf("%s (%s, %s, %s)", e.ID, e.MessageID, e.State, orDash(e.Reason))
	switch {
	case args.DryRun:
		out.Sample = []dryItem{it}
		return toolResult(out, "would "+verbs[a]+" "+what+"; dry run, nothing changed", false), out, nil
	case a == deadletter.ActionDiscard:
		out.Sample = []dryItem{it}
		out.Confirm = m.pinSet(a, args, []dlstore.Entry{e}, 0)
		return toolResult(out, fmt.Sprintf("nothing changed yet. Call discard again with confirm %q to discard %s", out.Confirm, what), false), out, nil
	}
	done, err := s.sw.Act(ctx, a, e.ID, ed, m.actor(req))
	if err != nil {
		return nil, none, editErr(err, ed)
	}
	out.Done, out.Items = 1, []deadletter.Item{done}
	var b strings.Builder
	printDone(&b, done, s.Queues)
	return toolResult(out, strings.TrimSpace(b.String()), false), out, nil
}

// pinSet keeps set for a confirmation and returns its token: an HMAC of the
// action, the selecting arguments and the entries' ids.
func (m *mcpServer) pinSet(a deadletter.Action, args actArgs, set []dlstore.Entry, refused int) string {
	sel := selecting(args)
	ids := make([]string, len(set))
	for i, e := range set {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	h := hmac.New(sha256.New, m.key)
	fmt.Fprintf(h, "%s\x00%s\x00%s", a, sel, strings.Join(ids, "\x00"))
	token := hex.EncodeToString(h.Sum(nil)[:12])
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, p := range m.pin {
		if time.Since(p.issued) > tokenTTL {
			delete(m.pin, k)
		}
	}
	m.pin[token] = pinned{action: a, args: sel, set: set, refused: refused, issued: time.Now()}
	return token
}

// selecting is the arguments that select a set, as canonical JSON.
func selecting(args actArgs) string {
	b, _ := json.Marshal(struct {
		ID string
		F  filterArgs
	}{args.ID, args.filterArgs})
	return string(b)
}

// confirmed acts on the set args.Confirm pins, skipping the entries changed
// since; the token is spent.
func (m *mcpServer) confirmed(ctx context.Context, req *mcp.CallToolRequest, a deadletter.Action, args actArgs) (*mcp.CallToolResult, actOut, error) {
	none := actOut{}
	m.mu.Lock()
	p, ok := m.pin[args.Confirm]
	m.mu.Unlock()
	switch {
	case !ok || time.Since(p.issued) > tokenTTL:
		return nil, none, fmt.Errorf("confirm %q: no such token (used, older than %s, or from another server): call %s without confirm for a new one", args.Confirm, tokenTTL, verbs[a])
	case p.action != a:
		return nil, none, fmt.Errorf("confirm: the token is for %s, not %s", verbs[p.action], verbs[a])
	case (args.ID != "" || args.filterArgs.flags().given()) && selecting(args) != p.args:
		return nil, none, errors.New("confirm: the token is for another id or filter; give the same, or none")
	}
	s, err := m.open(useOf(a, false))
	if err != nil {
		return nil, none, err
	}
	m.mu.Lock()
	_, ok = m.pin[args.Confirm]
	delete(m.pin, args.Confirm)
	m.mu.Unlock()
	if !ok {
		return nil, none, fmt.Errorf("confirm %q: the token was used meanwhile", args.Confirm)
	}
	same, changed, err := s.sw.Pinned(ctx, p.set)
	if err != nil {
		return nil, none, err
	}
	rep, err := s.sw.Bulk(ctx, a, same, m.actor(req), nil)
	out := actOut{bulkSummary: bulkSummary{Action: a, Total: len(p.set), Done: rep.Done, Failed: rep.Failed, Refused: p.refused},
		Skipped: changed, Items: rep.Items}
	summary := fmt.Sprintf("%s: %d of %d done, %d failed", verbs[a], rep.Done, len(p.set), rep.Failed)
	if len(changed) > 0 {
		summary += fmt.Sprintf("; %d skipped, changed since the first call: %s", len(changed), strings.Join(changed, ", "))
	}
	if err != nil {
		summary += fmt.Sprintf("; stopped after %d: %v", len(rep.Items), err)
	}
	return toolResult(out, summary, err != nil || rep.Failed > 0), out, nil
}
