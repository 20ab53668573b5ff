package main

// Every command's --help, in one style: the commands main.go lists, and
// the sub-commands each of them lists under "commands:", whatever they
// are, so that a command added later is held to it too.

import (
	"bytes"
	"os/exec"
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

// checkHelp reports what in help breaks the style of `<path> --help`,
// path starting with the program's name.
func checkHelp(path, help string) []string {
	var bad []string
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "usage: "+path) {
		bad = append(bad, "the first line is not \"usage: "+path+" ...\"")
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

// programs are the three binaries by name: the deployed handler, the
// operators' tool and the dev kit.
func programs() map[string]string {
	return map[string]string{"handler": binary, "orderstatus": toolsBinary, "orderstatus-dev": devBinary}
}

// runProgram runs the binary of prog with args.
func runProgram(t *testing.T, prog string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(programs()[prog], args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// helpOf is `prog args... --help`, which must answer on stdout, exit 0.
func helpOf(t *testing.T, prog string, args ...string) string {
	t.Helper()
	code, stdout, stderr := runProgram(t, prog, append(args, "--help")...)
	if code != 0 || stderr != "" || stdout == "" {
		t.Fatalf("%s %s --help: exit %d, stderr %q; want 0, the help on stdout and nothing on stderr", prog, strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// TestEveryHelpHasOneStyle runs `<program> --help` for each binary,
// `<program> <command> --help` for every command that lists, and
// `<program> <command> <sub> --help` for every sub-command those list, and
// checks each: a usage line first, flags as `--name ARG` lines (never one
// dash), an exit codes paragraph.
func TestEveryHelpHasOneStyle(t *testing.T) {
	checked := 0
	for prog := range programs() {
		top := helpOf(t, prog)
		if bad := checkHelp(prog, top); len(bad) > 0 {
			t.Errorf("%s --help:\n  %s\n%s", prog, strings.Join(bad, "\n  "), top)
		}
		for _, c := range subcommands(top) {
			help := helpOf(t, prog, c)
			checked++
			if bad := checkHelp(prog+" "+c, help); len(bad) > 0 {
				t.Errorf("%s %s --help:\n  %s\n%s", prog, c, strings.Join(bad, "\n  "), help)
			}
			for _, sub := range subcommands(help) {
				help := helpOf(t, prog, c, sub)
				checked++
				if bad := checkHelp(prog+" "+c+" "+sub, help); len(bad) > 0 {
					t.Errorf("%s %s %s --help:\n  %s\n%s", prog, c, sub, strings.Join(bad, "\n  "), help)
				}
			}
		}
	}
	// handler's 2, orderstatus's 3 with publish's 3 and deadletters' 5,
	// orderstatus-dev's 3.
	if want := 2 + 3 + 3 + 5 + 3; checked < want {
		t.Errorf("checked %d helps, want at least %d: the commands were not found under \"commands:\"", checked, want)
	}
}

// TestCheckHelpCatchesTheOldStyle: the checker finds the flag package's
// own output (one dash, lower-case argument) and a missing exit codes
// paragraph, so the test above can fail.
func TestCheckHelpCatchesTheOldStyle(t *testing.T) {
	old := "usage: orderstatus publish status --order ID\n\nSends one.\n\nflags:\n  -order id\n    \torder id (the session)\n"
	bad := strings.Join(checkHelp("orderstatus publish status", old), "\n")
	for _, want := range []string{"line 6 is neither a flag", "line 6 writes a flag with one dash (-order)", "no \"exit codes: \" paragraph"} {
		if !strings.Contains(bad, want) {
			t.Errorf("checkHelp found:\n%s\nwant %q among them", bad, want)
		}
	}
	if bad := checkHelp("orderstatus publish status", "usage: orderstatus publish status\n\nflags:\n  --order ID\n        order id\n\nexit codes: 0 sent.\n"); len(bad) > 0 {
		t.Errorf("checkHelp on the style itself: %q, want nothing", bad)
	}
}

// TestScaleExamplesAgree: the --scale examples of `orderstatus-dev dev --help`
// are the ones the flag table of docs/dev-host.md gives.
func TestScaleExamplesAgree(t *testing.T) {
	help := helpOf(t, "orderstatus-dev", "dev")
	event := regexp.MustCompile(`\b(?:add|remove|kill)(?::[A-Za-z0-9-]+)?@[0-9a-z]+\b`)
	start := strings.Index(help, "  --scale ")
	desc := help[start:]
	desc = desc[:strings.Index(desc[1:], "\n  --")+1]
	examples := event.FindAllString(desc, -1)
	if len(examples) == 0 {
		t.Fatalf("orderstatus-dev dev --help gives no --scale example:\n%s", desc)
	}
	var row string
	for _, r := range table(t, section(t, doc(t, devHostDoc), "Running it locally: `orderstatus-dev dev`"), "flag") {
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
