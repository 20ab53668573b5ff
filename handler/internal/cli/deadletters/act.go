package deadletters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlops"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// sampleSize is how many entries of a bulk set are printed before asking.
const sampleSize = 5

// actFlags are the flags of replay, discard and archive.
type actFlags struct {
	id     *string
	dry    *bool
	yes    *bool
	asJSON *bool
	filter *filterFlags
	// replay's edits of one message
	set, remove   *listFlag
	subject, body *string
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// editFlags name the edit fields (dlops.EditError) as flags.
var editFlags = map[string]string{dlops.FieldSet: "--set-property", dlops.FieldRemove: "--remove-property",
	dlops.FieldSubject: "--subject", dlops.FieldBody: "--body"}

func (c *cli) replay(args []string) int  { return c.act(deadletter.ActionReplay, args) }
func (c *cli) discard(args []string) int { return c.act(deadletter.ActionDiscard, args) }
func (c *cli) archive(args []string) int { return c.act(deadletter.ActionArchive, args) }

// verbs are the words of each action in prompts and closing counts.
var verbs = map[deadletter.Action]string{
	deadletter.ActionReplay:  "replay",
	deadletter.ActionDiscard: "discard",
	deadletter.ActionArchive: "archive",
	deadletter.ActionRestore: "restore",
}

// bulkStates are what a filter selects without --state.
var bulkStates = []dlstore.State{dlstore.Open, dlstore.Left}

// act is replay, discard and archive on one entry (--id) or a filter's set;
// every refusal comes before the first change.
func (c *cli) act(a deadletter.Action, args []string) int {
	fs := c.flags()
	af := actFlags{filter: addFilterFlags(fs)}
	af.id = fs.String("id", "", "the entry's `id` as list prints it, or the MessageId of the dead letter (its own, or a parked copy's original)")
	if a == deadletter.ActionReplay {
		af.set, af.remove = &listFlag{}, &listFlag{}
		fs.Var(af.set, "set-property", "set the application property `KEY`=VALUE (again for more; a value is read as the type of the one it replaces; --id only)")
		fs.Var(af.remove, "remove-property", "remove the application property `KEY` (again for more; --id only)")
		af.subject = fs.String("subject", "", "send with this `subject` instead (--id only)")
		af.body = fs.String("body", "", "`file` with a corrected body to send instead, - for stdin (--id only)")
	}
	af.dry = fs.Bool("dry-run", false, "print what would be done and change nothing")
	af.yes = fs.Bool("yes", false, "do not ask for confirmation (needed off a terminal for more than one entry, and for discard)")
	af.asJSON = fs.Bool("json", false, "JSON Lines: one line per entry, then the closing count")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	id := strings.TrimSpace(*af.id)
	switch {
	case id == "" && !af.filter.given():
		return c.usage("give --id ID or a filter (--source, --reason, --group, --order, --since, --until, --text, --state)")
	case id != "" && af.filter.given():
		return c.usage("give --id or a filter, not both")
	}
	ed, code := c.edit(af, id)
	if code >= 0 {
		return code
	}
	pf, code := c.checkFilter(af.filter, bulkStates)
	if code >= 0 {
		return code
	}
	s, err := c.open(useOf(a, *af.dry))
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	if id != "" {
		return c.actOne(s, a, id, ed, af)
	}
	f, code := c.resolve(s, pf)
	if code >= 0 {
		return code
	}
	return c.actBulk(s, a, f, af)
}

// info is where counts, samples and questions go (stderr under --json).
func (c *cli) info(asJSON bool) io.Writer {
	if asJSON {
		return c.stderr
	}
	return c.stdout
}

// confirm asks on a terminal (y or yes, else exit 1), or exits 2 off one.
func (c *cli) confirm(w io.Writer, question string, yes bool) int {
	if yes {
		return -1
	}
	if !c.env.IsTerminal() {
		return c.usage("refusing to %s without --yes when stdin is not a terminal", question)
	}
	fmt.Fprintf(w, "%s? [y/N] ", question)
	if a := strings.ToLower(strings.TrimSpace(readLine(c.env.Stdin))); a != "y" && a != "yes" {
		fmt.Fprintln(w, "nothing changed")
		return exitFailure
	}
	return -1
}

// readLine reads one line from r (up to 1 KiB) without reading past it.
func readLine(r io.Reader) string {
	var line []byte
	b := make([]byte, 1)
	for range 1 << 10 {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
		}
		if err != nil {
			break
		}
	}
	return string(line)
}

// edit reads replay's edits of one message; every edit is checked against
// the message contract later, before anything is sent.
func (c *cli) edit(af actFlags, id string) (*dlops.Edit, int) {
	if af.body == nil {
		return nil, -1
	}
	for _, g := range []struct {
		flag  string
		given bool
	}{{"--set-property", len(*af.set) > 0}, {"--remove-property", len(*af.remove) > 0}, {"--subject", *af.subject != ""}, {"--body", *af.body != ""}} {
		if g.given && id == "" {
			return nil, c.usage("%s needs --id (edits are for one message)", g.flag)
		}
	}
	ed := &dlops.Edit{Remove: *af.remove, Subject: strings.TrimSpace(*af.subject)}
	for _, kv := range *af.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, c.usage("--set-property %q: want KEY=VALUE", kv)
		}
		if _, dup := ed.Set[k]; dup {
			return nil, c.usage("--set-property %q: %s is set twice", kv, k)
		}
		if ed.Set == nil {
			ed.Set = map[string]string{}
		}
		ed.Set[k] = v
	}
	if *af.body != "" {
		var b []byte
		var err error
		if *af.body == "-" {
			b, err = io.ReadAll(io.LimitReader(c.env.Stdin, dlstore.MaxBody+1))
		} else {
			b, err = os.ReadFile(*af.body)
		}
		if err != nil {
			return nil, c.usage("--body: %v", err)
		}
		ed.Body = b
	}
	if err := ed.Check(); err != nil {
		return nil, c.editErr(err, ed)
	}
	return ed, -1
}

// editErr reports a refused edit (exit 2) naming its flags; -1 if err is none.
func (c *cli) editErr(err error, ed *dlops.Edit) int {
	if f := editFields(err, ed, editFlags); f != "" {
		return c.usage("%s: %v", f, err)
	}
	return -1
}

// editFields names, as names says, the fields at fault in a refused edit
// (all the edits given when the contract refuses the message); "" when err
// is no refused edit.
func editFields(err error, ed *dlops.Edit, names map[string]string) string {
	var ee *dlops.EditError
	switch {
	case errors.As(err, &ee):
		return names[ee.Field]
	case ed != nil && errors.Is(err, deadletter.ErrInvalidBody):
		var given []string
		for f, ok := range map[string]bool{dlops.FieldSet: len(ed.Set) > 0, dlops.FieldRemove: len(ed.Remove) > 0,
			dlops.FieldSubject: ed.Subject != "", dlops.FieldBody: ed.Body != nil} {
			if ok {
				given = append(given, names[f])
			}
		}
		slices.Sort(given)
		return strings.Join(given, ", ")
	}
	return ""
}

// useOf is what action a (or its dry run) uses.
func useOf(a deadletter.Action, dry bool) use {
	switch {
	case dry:
		return reads
	case a == deadletter.ActionReplay:
		return sends
	}
	return changesStore
}

// target is the entry id names if a takes it in its state, and for a
// replay the message it would send now with ed (checked first).
func (s *session) target(ctx context.Context, a deadletter.Action, id string, ed *dlops.Edit) (dlstore.Entry, *broker.Message, error) {
	if a == deadletter.ActionReplay {
		e, m, err := s.sw.Preview(ctx, id, ed)
		return e, &m, err
	}
	e, err := s.sw.Find(ctx, id)
	if err == nil {
		err = deadletter.Allowed(e, a)
	}
	return e, nil, err
}

func (c *cli) actOne(s *session, a deadletter.Action, id string, ed *dlops.Edit, af actFlags) int {
	e, msg, err := s.target(c.ctx, a, id, ed)
	if errors.Is(err, deadletter.ErrNoMessage) {
		return c.noSuchID(err)
	}
	if code := c.editErr(err, ed); code >= 0 {
		return code
	}
	if err != nil {
		return c.fail(err)
	}
	w := c.info(*af.asJSON)
	if *af.dry {
		if *af.asJSON {
			it := dryOf(e, a, s.sw.Now())
			if msg != nil {
				it.Message = messageOf(*msg)
			}
			jsonLines(c.stdout, []dryItem{it})
		}
		fmt.Fprintf(w, "would %s %s (%s, %s, %s); dry run, nothing changed\n", verbs[a], e.ID, e.MessageID, e.State, orDash(e.Reason))
		if msg != nil && !*af.asJSON {
			printMessage(c.stdout, *msg)
		}
		return exitOK
	}
	if a == deadletter.ActionDiscard {
		if code := c.confirm(w, fmt.Sprintf("discard %s (%s, %s)", e.ID, e.MessageID, e.State), *af.yes); code >= 0 {
			return code
		}
	}
	it, err := s.sw.Act(c.ctx, a, e.ID, ed, c.actor())
	if code := c.editErr(err, ed); code >= 0 {
		return code
	}
	if err != nil {
		return c.fail(err)
	}
	if *af.asJSON {
		jsonLines(c.stdout, []deadletter.Item{it})
		return exitOK
	}
	printDone(c.stdout, it, s.Queues)
	return exitOK
}

func printDone(w io.Writer, it deadletter.Item, q deadletter.Queues) {
	switch it.Action {
	case deadletter.ActionReplay, deadletter.ActionResubmit:
		fmt.Fprintf(w, "%s %s (%s) to %s as %s\n", it.Action, it.EntryID, it.MessageID, q.Queue, it.NewMessageID)
	case deadletter.ActionDiscard:
		fmt.Fprintf(w, "discarded %s (%s): kept until the retention (%s), then purged\n", it.EntryID, it.MessageID, EnvDeadLetterRetention)
	case deadletter.ActionArchive:
		fmt.Fprintf(w, "archived %s (%s): 'restore --id %s' reopens it\n", it.EntryID, it.MessageID, it.EntryID)
	case deadletter.ActionRestore:
		fmt.Fprintf(w, "restored %s (%s): open again\n", it.EntryID, it.MessageID)
	default:
		fmt.Fprintf(w, "%s %s (%s)\n", it.Action, it.EntryID, it.MessageID)
	}
}

// dryItem is a dry run's entry: what would be done, or why not; a replay
// of one entry adds the message it would send.
type dryItem struct {
	Would   string      `json:"would,omitempty"`
	Refused string      `json:"refused,omitempty"`
	Message *messageOut `json:"message,omitempty"`
	entryOut
}

func dryOf(e dlstore.Entry, a deadletter.Action, now time.Time) dryItem {
	return dryItem{Would: verbs[a], entryOut: entryOf(e, now)}
}

// bulkSummary is the closing line of a bulk action's JSON.
type bulkSummary struct {
	Action deadletter.Action `json:"action"`
	DryRun bool              `json:"dry_run,omitempty"`
	// Total is the set acted on; Refused, matched but in a refused state.
	Total   int `json:"total"`
	Done    int `json:"done"`
	Failed  int `json:"failed"`
	Refused int `json:"refused"`
}

// actBulk acts on the set list with f shows now (Select).
func (c *cli) actBulk(s *session, a deadletter.Action, f dlstore.Filter, af actFlags) int {
	now := s.sw.Now()
	set, err := s.sw.Select(c.ctx, f)
	if err != nil {
		return c.fail(err)
	}
	w := c.info(*af.asJSON)
	if len(set) == 0 {
		return c.notFound("no dead letters match (states %s)", statesOf(f.States))
	}
	matched := len(set)
	set, refused := actionable(set, a)
	if len(set) == 0 {
		return c.notFound("%s (%s)", wording.CountAs(matched, "dead letter matches, and "+verbs[a]+" does not take it in its state",
			"dead letters match, and "+verbs[a]+" takes none of them in their state"), statesOf(statesIn(refused)))
	}
	fmt.Fprintf(w, "%s now; the set is fixed: entries stored from now on are not touched\n",
		wording.CountAs(matched, "dead letter matches", "dead letters match"))
	if len(refused) > 0 {
		fmt.Fprintf(w, "%s (%s)\n", wording.CountAs(len(refused), "of them is left alone: "+verbs[a]+" does not take it in its state",
			"of them are left alone: "+verbs[a]+" does not take them in their state"), statesOf(statesIn(refused)))
	}
	if len(set) > sampleSize {
		fmt.Fprintf(w, "the first %d:\n", sampleSize)
	}
	printEntries(w, set[:min(len(set), sampleSize)], now)
	if *af.dry {
		if *af.asJSON {
			var items []dryItem
			for _, e := range set {
				items = append(items, dryOf(e, a, now))
			}
			for _, e := range refused {
				it := dryOf(e, a, now)
				it.Would, it.Refused = "", deadletter.Allowed(e, a).Error()
				items = append(items, it)
			}
			jsonLines(c.stdout, items)
			_ = json.NewEncoder(c.stdout).Encode(bulkSummary{Action: a, DryRun: true, Total: len(set), Refused: len(refused)})
		}
		fmt.Fprintf(w, "dry run: would %s %s; nothing changed\n", verbs[a], wording.Count(len(set), "dead letter"))
		return exitOK
	}
	if len(set) > 1 || a == deadletter.ActionDiscard {
		if code := c.confirm(w, verbs[a]+" "+wording.Count(len(set), "dead letter"), *af.yes); code >= 0 {
			return code
		}
	}
	bar := c.progressBar(verbs[a], len(set))
	rep, err := s.sw.Bulk(c.ctx, a, set, c.actor(), func(done int, _ deadletter.Item) { bar(done) })
	bar(-1)
	if *af.asJSON {
		jsonLines(c.stdout, rep.Items)
		_ = json.NewEncoder(c.stdout).Encode(bulkSummary{Action: a, Total: rep.Total, Done: rep.Done, Failed: rep.Failed, Refused: len(refused)})
	} else {
		for _, it := range rep.Items {
			if it.Error != "" {
				fmt.Fprintf(c.stdout, "failed %s (%s): %s\n", it.EntryID, it.MessageID, oneLine(it.Error))
			}
		}
	}
	fmt.Fprintf(w, "%s: %d of %d done, %d failed\n", verbs[a], rep.Done, rep.Total, rep.Failed)
	if err != nil {
		return c.fail(fmt.Errorf("stopped after %d of %d: %w", len(rep.Items), rep.Total, err))
	}
	if rep.Failed > 0 {
		return exitFailure
	}
	return exitOK
}

// actionable splits set into the entries a takes in their state and the rest.
func actionable(set []dlstore.Entry, a deadletter.Action) (ok, refused []dlstore.Entry) {
	for _, e := range set {
		if deadletter.Allowed(e, a) == nil {
			ok = append(ok, e)
		} else {
			refused = append(refused, e)
		}
	}
	return ok, refused
}

// statesIn lists the states of es, each once, in dlstore.States order.
func statesIn(es []dlstore.Entry) []dlstore.State {
	var out []dlstore.State
	for _, st := range dlstore.States {
		for _, e := range es {
			if e.State == st {
				out = append(out, st)
				break
			}
		}
	}
	return out
}

func statesOf(ss []dlstore.State) string {
	if len(ss) == 0 {
		return "any"
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

// progressBar draws done of total on a terminal stderr; -1 ends the bar.
func (c *cli) progressBar(verb string, total int) func(done int) {
	if total < 2 || !c.env.StderrIsTerminal() {
		return func(int) {}
	}
	const width = 30
	drawn := false
	return func(done int) {
		if done < 0 {
			if drawn {
				fmt.Fprintln(c.stderr)
			}
			return
		}
		n := done * width / total
		fmt.Fprintf(c.stderr, "\r%s [%s%s] %d/%d", verb, strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
		drawn = true
	}
}

func (c *cli) restore(args []string) int {
	fs := c.flags()
	id := fs.String("id", "", "the entry's `id` as list prints it, or the dead letter's MessageId (required)")
	asJSON := fs.Bool("json", false, "JSON Lines: the entry as restored")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	if strings.TrimSpace(*id) == "" {
		return c.usage("--id is required")
	}
	s, err := c.open(changesStore)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	it, err := s.sw.Act(c.ctx, deadletter.ActionRestore, strings.TrimSpace(*id), nil, c.actor())
	if errors.Is(err, deadletter.ErrNoMessage) {
		return c.noSuchID(err)
	}
	if err != nil {
		return c.fail(err)
	}
	if *asJSON {
		jsonLines(c.stdout, []deadletter.Item{it})
		return exitOK
	}
	printDone(c.stdout, it, s.Queues)
	return exitOK
}
