package devhost

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/cli/deadletters"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
)

// runbookCommand is one `bin/orderstatus deadletters ...` line of a runbook or
// the README, split into arguments; block numbers the code block it is in,
// across all files (a placeholder keeps its value within a block, so a
// --dry-run and the command after it act on the same set).
type runbookCommand struct {
	file  string
	line  string
	block int
	args  []string
}

// docCommands returns every `bin/orderstatus deadletters` command in the code
// blocks of the runbooks, the README and the docs pages.
func docCommands(t *testing.T, root string) []runbookCommand {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "alerts", "runbooks", "*.md"))
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(append(files, filepath.Join(root, "README.md")), pages...)
	var out []runbookCommand
	block := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		inCode := false
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
				block++
				continue
			}
			if !inCode || !strings.HasPrefix(line, "bin/orderstatus deadletters ") {
				continue
			}
			if i := strings.Index(line, " #"); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			args, err := shellWords(strings.TrimPrefix(line, "bin/orderstatus deadletters "))
			if err != nil {
				t.Fatalf("%s: %q: %v", f, line, err)
			}
			out = append(out, runbookCommand{file: filepath.Base(f), line: line, block: block, args: args})
		}
		fh.Close()
	}
	return out
}

// shellWords splits s as sh would for the plain and double-quoted words
// the documents use.
func shellWords(s string) ([]string, error) {
	var (
		out   []string
		cur   strings.Builder
		inQ   bool
		begun bool
	)
	for _, r := range s {
		switch {
		case r == '"':
			inQ, begun = !inQ, true
		case r == ' ' && !inQ:
			if begun {
				out = append(out, cur.String())
				cur.Reset()
				begun = false
			}
		default:
			cur.WriteRune(r)
			begun = true
		}
	}
	if inQ {
		return nil, fmt.Errorf("unclosed quote")
	}
	if begun {
		out = append(out, cur.String())
	}
	return out, nil
}

// The placeholders the runbooks write in deadletters command lines, each
// filled from one entry of the store that matches the rest of the line.
const (
	phOrder  = "<order id>"
	phEntry  = "<entry id>"
	phGroup  = "<group>"
	phReason = "<reason>"
	phSource = "<source>"
	phBody   = "<body file>"
)

// filterFlags are the deadletters flags that select entries.
var filterFlags = map[string]bool{"--source": true, "--reason": true, "--group": true, "--order": true,
	"--since": true, "--until": true, "--text": true, "--state": true}

// listedEntry is what the test reads of one `list --json` line.
type listedEntry struct {
	EntryID string `json:"id"`
	OrderID string `json:"order_id"`
	Group   string `json:"group"`
	Reason  string `json:"reason"`
	Source  string `json:"source"`
}

// Every `bin/orderstatus deadletters` command the runbooks and the README name
// runs as written against a development host, exiting 0, with its
// placeholders filled from an entry of the store that matches the rest of
// the line (the state an action works on when the line names none: left
// for replay, discard and archive, archived for restore). A line whose
// filter selects nothing gets a fresh batch of dead letters first: orders
// whose updates outlasted the deliveries (dlq, MaxDeliveryCountExceeded,
// open in their cool-down), parked InvalidTransitions (poison, left) and a
// parked InvalidPayload (poison, archived), drained by the sweeper. Actions
// never reuse an entry another line acted on; within one code block a
// placeholder keeps its value. A prompt is answered y.
func TestRunbookCommandsRunAgainstTheDevHost(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	cmds := docCommands(t, root)
	if len(cmds) < 40 {
		t.Fatalf("found %d deadletters commands in the runbooks and README, want the runbooks' forty at least", len(cmds))
	}
	d := newDLHost(t)
	remove, err := devrun.Write(d.app, d.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer remove()

	run := func(args []string) (int, string) {
		var out, errOut strings.Builder
		env := deadletters.Env{Dir: d.app, Getenv: d.getenv, IsTerminal: func() bool { return true }, Stdin: strings.NewReader("y\n")}
		code := deadletters.Run(d.ctx, args, &out, &errOut, env)
		return code, out.String() + errOut.String()
	}
	batches := 0
	seed := func() {
		batches++
		if batches > 12 {
			t.Fatalf("seeded %d batches of dead letters; the runbooks' filters should not need more", batches-1)
		}
		d.proxy.SetRule(func(r *http.Request) faultproxy.Mode {
			if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "e2e") {
				return faultproxy.ServerBusy
			}
			return faultproxy.Pass
		})
		var lines []ScenarioLine
		for i := range 3 {
			lines = append(lines, update(fmt.Sprintf("d%d-%d", batches, i), "Created", 1))
		}
		d.send(t, lines...)
		d.proxy.SetRule(nil)
		lines = lines[:0]
		for i := range 3 {
			o := fmt.Sprintf("p%d-%d", batches, i)
			lines = append(lines, update(o, "Created", 1), update(o, "Cancelled", 2), update(o, "Paid", 3))
		}
		bad := update(fmt.Sprintf("x%d-0", batches), "Created", 1)
		bad.Body = []byte(`{"orderId":"","status":"Created","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}`)
		d.send(t, append(lines, bad)...)
		d.sweep(t)
	}
	lastList := "" // what the last list that found nothing said
	list := func(filter []string) []listedEntry {
		code, out := run(append(append([]string{"list"}, filter...), "--max", "500", "--json"))
		if code == 1 {
			lastList = out
			return nil // nothing matched (or a failure: its words end up in the fatal below)
		}
		if code != 0 {
			t.Fatalf("list %q exited %d:\n%s", filter, code, out)
		}
		var got []listedEntry
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var e listedEntry
			if err := json.Unmarshal([]byte(l), &e); err != nil || e.EntryID == "" {
				t.Fatalf("list --json line %q: want JSON with id, order_id, group, reason, source (%v)", l, err)
			}
			got = append(got, e)
		}
		return got
	}

	seed()
	acted := map[string]bool{}    // entries an action line used
	values := map[string]string{} // placeholder values of the current block
	block := -1
	for _, c := range cmds {
		if c.block != block {
			block, values = c.block, map[string]string{}
		}
		sub := c.args[0]
		action := slices.Contains([]string{"replay", "discard", "archive", "restore"}, sub)
		var filter []string // the line's own filter, placeholders left out
		missing := false    // a placeholder the block has no value for yet
		for i, a := range c.args {
			if strings.HasPrefix(a, "<") && a != phBody && values[a] == "" {
				missing = true
			}
			if filterFlags[a] && i+1 < len(c.args) && !strings.HasPrefix(c.args[i+1], "<") {
				filter = append(filter, a, c.args[i+1])
			}
		}
		c.args = withShortUntil(c.args)
		filter = withShortUntil(filter)
		var pick *listedEntry
		if missing || (len(filter) > 0 && sub != "sweep") {
			want := slices.Clone(filter)
			if missing && !slices.Contains(want, "--state") {
				switch {
				case sub == "restore":
					want = append(want, "--state", "archived")
				case action:
					want = append(want, "--state", "left")
				}
			}
			for try := 0; pick == nil; try++ {
				for _, e := range list(want) {
					if !acted[e.EntryID] {
						pick = &e
						break
					}
				}
				if pick == nil {
					if try > 0 {
						t.Fatalf("%s: %q: nothing in the store matches %q even after a fresh batch of dead letters; list said:\n%s", c.file, c.line, want, lastList)
					}
					seed()
					// A cutoff "--until D" (that long ago) matches only what
					// was stored before it: the store is stamped in real
					// time, so wait out the short cutoff the line runs with.
					if slices.Contains(want, "--until") {
						time.Sleep(shortUntil + 100*time.Millisecond)
					}
				}
			}
		}
		args := slices.Clone(c.args)
		for i, a := range args {
			if v := values[a]; v != "" {
				args[i] = v
				continue
			}
			switch a {
			case phOrder:
				args[i] = pick.OrderID
			case phEntry:
				args[i] = pick.EntryID
			case phGroup:
				args[i] = pick.Group
			case phReason:
				args[i] = pick.Reason
			case phSource:
				args[i] = pick.Source
			case phBody:
				// A corrected body for the order of the entry the block
				// works on: it passes the contract.
				f := filepath.Join(t.TempDir(), "body.json")
				body := fmt.Sprintf(`{"orderId":%q,"status":"Created","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}`, values[phOrder])
				if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
				args[i] = f
			default:
				continue
			}
			values[a] = args[i]
		}
		if pick != nil && values[phOrder] == "" {
			values[phOrder] = pick.OrderID // for a <body file> later in the block
		}
		if action && !slices.Contains(c.args, "--dry-run") && values[phEntry] != "" && slices.Contains(c.args, phEntry) {
			acted[values[phEntry]] = true
		}
		if code, out := run(args); code != 0 {
			t.Errorf("%s: %q (as %q) exited %d:\n%s", c.file, c.line, args, code, out)
		}
	}
}

// shortUntil is the cutoff a runbook's "--until D" runs with here: the
// dead-letter store is stamped in real time, so an hour-long cutoff would
// match nothing stored during the test.
const shortUntil = time.Second

// withShortUntil is args with the value of --until, if any, shortUntil.
func withShortUntil(args []string) []string {
	i := slices.Index(args, "--until")
	if i < 0 || i+1 >= len(args) {
		return args
	}
	out := slices.Clone(args)
	out[i+1] = shortUntil.String()
	return out
}
