package main

// Every command's --help, in one style: the commands main.go lists, and
// the sub-commands each of them lists under "commands:", whatever they
// are, so that a command added later is held to it too.

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	// A flag's own line: two spaces, two dashes, the name, an argument
	// in capitals.
	flagLine = regexp.MustCompile(`^  --[a-z][a-z0-9-]*( [A-Z][A-Z0-9_-]*)?$`)
	// A flag written with one dash, as the flag package's own help does.
	oneDash = regexp.MustCompile(`(^|[\s(\[|,])-[a-z][a-z-]+\b`)
	// A command listed under "commands:".
	commandLine = regexp.MustCompile(`^  ([a-z][a-z-]*)\s`)
)

// checkHelp reports what in help breaks the style of `handler <path>
// --help`.
func checkHelp(path, help string) []string {
	var bad []string
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "usage: handler "+path) {
		bad = append(bad, "the first line is not \"usage: handler "+path+" ...\"")
	}
	exit := false
	inFlags := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "exit codes: "):
			exit = true
		case l == "flags:":
			inFlags = true
			continue
		case l == "" || !strings.HasPrefix(l, " "):
			inFlags = false
		}
		if inFlags && !strings.HasPrefix(l, "        ") && !flagLine.MatchString(l) {
			bad = append(bad, "line "+strconv.Itoa(i+1)+" is neither a flag (  --name ARG) nor its description: "+l)
		}
		if m := oneDash.FindString(l); m != "" {
			bad = append(bad, "line "+strconv.Itoa(i+1)+" writes a flag with one dash ("+strings.TrimSpace(m)+"): "+l)
		}
	}
	if !exit {
		bad = append(bad, "no \"exit codes: \" paragraph")
	}
	return bad
}

// subcommands returns the names listed under a help's "commands:".
func subcommands(help string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(help, "\n") {
		switch {
		case l == "commands:":
			in = true
		case in && (l == "" || !strings.HasPrefix(l, " ")):
			in = false
		case in:
			if m := commandLine.FindStringSubmatch(l); m != nil {
				out = append(out, m[1])
			}
		}
	}
	return out
}

func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(append(args, "--help"), &stdout, &stderr); code != exitOK || stderr.Len() != 0 || stdout.Len() == 0 {
		t.Fatalf("handler %s --help: exit %d, stderr %q; want 0, the help on stdout and nothing on stderr", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}

// TestEveryHelpHasOneStyle runs `handler --help`, `handler <command>
// --help` for every command main.go lists, and `handler <command> <sub>
// --help` for every sub-command those list, and checks each: a usage line
// first, flags as `--name ARG` lines (never one dash), an exit codes
// paragraph.
func TestEveryHelpHasOneStyle(t *testing.T) {
	top := helpOf(t)
	if bad := checkHelp("", top); len(bad) > 0 {
		t.Errorf("handler --help:\n  %s\n%s", strings.Join(bad, "\n  "), top)
	}
	checked := 0
	for _, c := range commands() {
		help := helpOf(t, c.name)
		checked++
		if bad := checkHelp(c.name, help); len(bad) > 0 {
			t.Errorf("handler %s --help:\n  %s\n%s", c.name, strings.Join(bad, "\n  "), help)
		}
		for _, sub := range subcommands(help) {
			help := helpOf(t, c.name, sub)
			checked++
			if bad := checkHelp(c.name+" "+sub, help); len(bad) > 0 {
				t.Errorf("handler %s %s --help:\n  %s\n%s", c.name, sub, strings.Join(bad, "\n  "), help)
			}
		}
	}
	if want := len(commands()) + 3 + 5; checked < want { // publish's 3 and deadletters' 5 today
		t.Errorf("checked %d helps, want at least %d: the sub-commands were not found under \"commands:\"", checked, want)
	}
}

// TestCheckHelpCatchesTheOldStyle: the checker finds the flag package's
// own output (one dash, lower-case argument) and a missing exit codes
// paragraph, so the test above can fail.
func TestCheckHelpCatchesTheOldStyle(t *testing.T) {
	old := "usage: handler publish status --order ID\n\nSends one.\n\nflags:\n  -order id\n    \torder id (the session)\n"
	bad := strings.Join(checkHelp("publish status", old), "\n")
	for _, want := range []string{"line 6 is neither a flag", "line 6 writes a flag with one dash (-order)", "no \"exit codes: \" paragraph"} {
		if !strings.Contains(bad, want) {
			t.Errorf("checkHelp found:\n%s\nwant %q among them", bad, want)
		}
	}
	if bad := checkHelp("publish status", "usage: handler publish status\n\nflags:\n  --order ID\n        order id\n\nexit codes: 0 sent.\n"); len(bad) > 0 {
		t.Errorf("checkHelp on the style itself: %q, want nothing", bad)
	}
}

// TestScaleExamplesAgree: the --scale examples of `handler dev --help`
// are the ones the flag table of docs/dev-host.md gives.
func TestScaleExamplesAgree(t *testing.T) {
	help := helpOf(t, "dev")
	event := regexp.MustCompile(`\b(?:add|remove|kill)(?::[A-Za-z0-9-]+)?@[0-9a-z]+\b`)
	start := strings.Index(help, "  --scale ")
	desc := help[start:]
	desc = desc[:strings.Index(desc[1:], "\n  --")+1]
	examples := event.FindAllString(desc, -1)
	if len(examples) == 0 {
		t.Fatalf("handler dev --help gives no --scale example:\n%s", desc)
	}
	var row string
	for _, r := range table(t, section(t, doc(t, devHostDoc), "Running it locally: `handler dev`"), "flag") {
		if strings.Contains(r[0], "--scale") {
			row = r[1]
		}
	}
	for _, ex := range examples {
		if !strings.Contains(row, "`"+ex+"`") {
			t.Errorf("--help's --scale example %s is not in the --scale row of %s: %s", ex, devHostDoc, row)
		}
	}
}
