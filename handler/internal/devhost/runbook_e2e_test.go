package devhost

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/cli/deadletters"
	"github.com/orderstatus/orderstatus/handler/internal/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/faultproxy"
)

// runbookCommand is one `bin/handler deadletters ...` line of a runbook or
// the README, split into arguments.
type runbookCommand struct {
	file string
	line string
	args []string
}

// docCommands returns every `bin/handler deadletters` command in the code
// blocks of the runbooks, the README and the docs pages.
func docCommands(t *testing.T, root string) []runbookCommand {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "alerts", "runbooks", "*.md"))
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(append(files, filepath.Join(root, "README.md")), pages...)
	var out []runbookCommand
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
				continue
			}
			if !inCode || !strings.HasPrefix(line, "bin/handler deadletters ") {
				continue
			}
			if i := strings.Index(line, " #"); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			args, err := shellWords(strings.TrimPrefix(line, "bin/handler deadletters "))
			if err != nil {
				t.Fatalf("%s: %q: %v", f, line, err)
			}
			out = append(out, runbookCommand{file: filepath.Base(f), line: line, args: args})
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

// Every `bin/handler deadletters` command the runbooks and the README name
// runs as written against a development host (placeholders filled with a
// message or reason that is there), exiting 0; discard answers the
// terminal's question with y.
func TestRunbookCommandsRunAgainstTheDevHost(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	cmds := docCommands(t, root)
	if len(cmds) < 10 {
		t.Fatalf("found %d deadletters commands in the runbooks and README, want the runbooks' dozen at least", len(cmds))
	}
	d := newDLHost(t)
	// Dead-lettered messages (an outage longer than the deliveries) and
	// parked InvalidTransitions, enough for every placeholder.
	d.proxy.SetRule(func(r *http.Request) faultproxy.Mode {
		if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "e2e") {
			return faultproxy.ServerBusy
		}
		return faultproxy.Pass
	})
	var lines []ScenarioLine
	for i := range 8 {
		lines = append(lines, update(fmt.Sprintf("d-%d", i), "Created", 1))
	}
	d.send(t, lines...)
	d.proxy.SetRule(nil)
	lines = lines[:0]
	for i := range 8 {
		o := fmt.Sprintf("p-%d", i)
		lines = append(lines, update(o, "Created", 1), update(o, "Cancelled", 2), update(o, "Paid", 3))
	}
	d.send(t, lines...)
	remove, err := devrun.Write(d.app, d.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer remove()

	used := map[string]bool{}
	pick := func(src broker.Source) string {
		for _, m := range d.peek(t, src) {
			if !used[m.MessageID] {
				used[m.MessageID] = true
				return m.MessageID
			}
		}
		t.Fatalf("no unused message left on %s", src)
		return ""
	}
	for _, c := range cmds {
		args := append([]string(nil), c.args...)
		source := ""
		for i, a := range args {
			if a == "--source" && i+1 < len(args) {
				source = args[i+1]
			}
		}
		for i, a := range args {
			switch a {
			case "<message id>":
				src := broker.Source{Queue: d.Queue(), DeadLetter: true}
				if source == "poison" {
					src = broker.Source{Queue: d.PoisonQueue()}
				}
				args[i] = pick(src)
			case "<reason>":
				args[i] = "MaxDeliveryCountExceeded"
				if source == "poison" {
					args[i] = "InvalidTransition"
				}
			}
		}
		var out, errOut strings.Builder
		env := deadletters.Env{Dir: d.app, Getenv: d.getenv, IsTerminal: func() bool { return true }, Stdin: strings.NewReader("y\n")}
		if code := deadletters.Run(d.ctx, args, &out, &errOut, env); code != 0 {
			t.Errorf("%s: %q (as %q) exited %d:\n%s%s", c.file, c.line, args, code, out.String(), errOut.String())
		}
	}
}
