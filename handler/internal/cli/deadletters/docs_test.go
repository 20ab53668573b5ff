package deadletters

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlops"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

const repoRoot = "../../../.."

// docCommands returns the `bin/orderstatus deadletters` lines in the code
// blocks of a document, comments cut off.
func docCommands(t *testing.T, path string) []string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []string
	inCode := false
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode && strings.HasPrefix(line, "bin/orderstatus deadletters ") {
			if i := strings.Index(line, " #"); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			out = append(out, strings.TrimPrefix(line, "bin/orderstatus deadletters "))
		}
	}
	return out
}

// words splits a command line as sh does for the plain and double-quoted
// words the documents use.
func words(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	inQ, begun := false, false
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
		t.Fatalf("%q: unclosed quote", s)
	}
	if begun {
		out = append(out, cur.String())
	}
	return out
}

// Every `bin/orderstatus deadletters` command of docs/deadletters.md and the
// README's dead-letter section runs as written (placeholders filled with
// what is there) and exits 0, in the order the document gives.
func TestDocumentedCommandsRun(t *testing.T) {
	for _, doc := range []string{"docs/deadletters.md", "README.md"} {
		t.Run(doc, func(t *testing.T) {
			cmds := docCommands(t, filepath.Join(repoRoot, doc))
			if len(cmds) < 5 {
				t.Fatalf("%s: %d deadletters commands, want the section's at least", doc, len(cmds))
			}
			f := newFixture(t)
			// Yesterday's incident: two orders' updates dead-lettered,
			// parked InvalidTransitions, an archived bad payload.
			f.clk.Advance(-24 * time.Hour)
			due := f.put(dlstore.DLQ, 1, "o-1:2", "o-1", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
			f.put(dlstore.DLQ, 2, "o-2:2", "o-2", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
			for i := range 3 {
				o := fmt.Sprintf("p-%d", i)
				f.put(dlstore.Poison, int64(10+i), o+":3:parked", o, order.ReasonInvalidTransition, `order "`+o+`": Paid after Cancelled`)
			}
			kept := f.put(dlstore.Poison, 20, "o-7:1:parked", "o-7", order.ReasonInvalidPayload, "bad json")
			f.must("archive", "--id", kept.ID)
			fix := f.put(dlstore.Poison, 21, "o-8:1:parked", "o-8", order.ReasonInvalidPayload, "bad json")
			f.clk.Advance(24 * time.Hour)
			// Today: new arrivals, on the sources and stored.
			f.deadLetter("o-3:2", "o-3")
			f.put(dlstore.Poison, 30, "p-9:3:parked", "p-9", order.ReasonInvalidTransition, `order "p-9": Paid after Cancelled`)
			if _, err := f.orders.Insert(f.ctx, "o-1", order.State{Status: order.Status("Created"), LastSequence: 1,
				OccurredAt: f.clk.Now(), UpdatedAt: f.clk.Now()}); err != nil {
				t.Fatal(err)
			}
			body := filepath.Join(t.TempDir(), "corrected.json")
			if err := os.WriteFile(body, updateBody("o-8", "Paid", 1), 0o600); err != nil {
				t.Fatal(err)
			}
			fill := map[string]string{"<order id>": "o-1", "<group>": due.Group, "<entry id>": fix.ID, "<body file>": body,
				"<reason>": broker.ReasonMaxDeliveryCountExceeded}
			f.terminal, f.stdin = true, strings.NewReader(strings.Repeat("y\n", len(cmds)))
			for _, line := range cmds {
				args := words(t, line)
				for i, a := range args {
					if v, ok := fill[a]; ok {
						args[i] = v
					} else if strings.HasPrefix(a, "<") {
						t.Fatalf("%s: %q: no value for the placeholder %s", doc, line, a)
					}
				}
				if r := f.run(args...); r.code != exitOK {
					t.Errorf("%s: %q (as %q) exited %d:\n%s%s", doc, line, args, r.code, r.stdout, r.stderr)
				}
			}
		})
	}
}

// Every `orderstatus deadletters` command (the CLI's own list) is run by a
// command line of the README's dead-letter section and of
// docs/deadletters.md, so a command cannot drop out of either page (the
// README's block once lost all but stats, list and sweep in a merge).
func TestEveryCommandIsDocumented(t *testing.T) {
	for _, doc := range []string{"README.md", "docs/deadletters.md"} {
		shown := map[string]bool{}
		for _, line := range docCommands(t, filepath.Join(repoRoot, doc)) {
			if w := words(t, line); len(w) > 0 {
				shown[w[0]] = true
			}
		}
		for _, c := range commands() {
			if !shown[c.name] {
				t.Errorf("%s has no `bin/orderstatus deadletters %s ...` line in a code block", doc, c.name)
			}
		}
	}
}

// jsonKeys are the JSON keys of the struct type of v, embedded structs'
// included.
func jsonKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, jsonKeys(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// The JSON Lines table of docs/deadletters.md names exactly the keys the
// commands print.
func TestDocumentedJSONKeys(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/deadletters.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## JSON Lines")
	if !ok {
		t.Fatal("docs/deadletters.md has no JSON Lines section")
	}
	doc := map[string][]string{}
	tick := regexp.MustCompile("`([a-z_]+)`")
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "line" {
			continue
		}
		var keys []string
		for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
			keys = append(keys, m[1])
		}
		doc[strings.TrimSpace(cells[1])] = keys
	}
	for row, typ := range map[string]reflect.Type{
		"`stats`":                reflect.TypeFor[deadletter.Stat](),
		"`groups`":               reflect.TypeFor[dlops.Group](),
		"`list`, find's `entry`": reflect.TypeFor[entryOut](),
		"find's `order`":         reflect.TypeFor[orderRow](),
		"find's `audit`":         reflect.TypeFor[auditOut](),
		"an action's entry, a sweep's message or entry": reflect.TypeFor[deadletter.Item](),
		"an action's closing line":                      reflect.TypeFor[bulkSummary](),
		"a sweep's closing line":                        reflect.TypeFor[sweepSummary](),
	} {
		got, want := doc[row], jsonKeys(typ)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("docs row %s: keys %v, the code prints %v", row, got, want)
		}
	}
	// find's line: kind (whose values are keys too), at, and one of
	// order, entry, audit.
	got := slices.Compact(slices.Sorted(slices.Values(doc["`find`"])))
	if want := slices.Sorted(slices.Values(jsonKeys(reflect.TypeFor[event]()))); !slices.Equal(got, want) {
		t.Errorf("docs row find: %v, the code prints %v", got, want)
	}
	dry := jsonKeys(reflect.TypeFor[dryItem]())
	if !slices.Contains(dry, "would") || !slices.Contains(dry, "refused") || !slices.Contains(dry, "message") ||
		len(dry) != len(jsonKeys(reflect.TypeFor[entryOut]()))+3 {
		t.Errorf("a dry run's entry prints %v: want would, refused, message (a replay's) and the keys of list", dry)
	}
}
