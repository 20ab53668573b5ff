package main

// The README and the docs pages it links are checked against the code
// here, so that what a newcomer reads cannot drift from what the binary
// does: the message contract (docs/messages.md) against the order
// package's lists, the dev host's flag table (docs/dev-host.md) against
// `orderstatus-dev dev --help`, and the commands `handler --help` lists.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderfn"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// readme returns the repository's README.md.
func readme(t *testing.T) string { return doc(t, "README.md") }

// The docs pages that hold the reference tables the tests below keep equal
// to the code (the README links them from its contents).
const (
	messagesDoc = "docs/messages.md" // the message contract
	devHostDoc  = "docs/dev-host.md" // orderstatus-dev dev's flags and the scenario format
)

// doc returns a document of the repository, by its path from the root.
func doc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of the "## title" section of md (a README or a
// docs page).
func section(t *testing.T, md, title string) string {
	t.Helper()
	start := strings.Index(md, "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf("README has no %q section", "## "+title)
	}
	rest := md[start+len(title)+5:]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// table returns the rows (cells trimmed, header and rule left out) of the
// first Markdown table in text whose header's first cell is first.
func table(t *testing.T, text, first string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if in {
				return rows
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case !in && cells[0] == first:
			in = true
		case in && strings.HasPrefix(cells[0], "---"):
		case in:
			rows = append(rows, cells)
		}
	}
	if !in {
		t.Fatalf("no table with first column %q", first)
	}
	return rows
}

var backticked = regexp.MustCompile("`([^`]+)`")

// ticks returns the backticked words of s, in order.
func ticks(s string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func sortedSet(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// TestReadmeMessageContract: the message contract (docs/messages.md) lists exactly
// the code's subjects, statuses, settled results and poison reasons.
func TestReadmeMessageContract(t *testing.T) {
	msgs := section(t, doc(t, messagesDoc), "Messages")

	var subjects []string
	for _, row := range table(t, msgs, "subject") {
		subjects = append(subjects, ticks(row[0])...)
	}
	if got, want := sortedSet(subjects), sortedSet(order.Subjects); !slices.Equal(got, want) {
		t.Errorf("README subjects %q, code %q", got, want)
	}

	// The example bodies are valid messages of their subject.
	for _, row := range table(t, msgs, "subject") {
		body := []byte(ticks(row[1])[0])
		var err error
		switch ticks(row[0])[0] {
		case order.SubjectStatusChanged:
			_, err = order.ParseUpdate(body, "o-1")
		case order.SubjectPaymentTimeout:
			_, err = order.ParseTimeoutCheck(body, "o-1")
		}
		if err != nil {
			t.Errorf("README example body %s: %v", body, err)
		}
	}

	var statuses, final []string
	for _, row := range table(t, msgs, "status") {
		statuses = append(statuses, ticks(row[0])...)
		if strings.HasPrefix(row[1], "yes") {
			final = append(final, ticks(row[0])...)
		}
	}
	var wantStatuses, wantFinal []string
	for _, s := range order.Statuses {
		wantStatuses = append(wantStatuses, string(s))
		if s.Terminal() {
			wantFinal = append(wantFinal, string(s))
		}
	}
	if !slices.Equal(statuses, wantStatuses) {
		t.Errorf("README statuses %q, code %q (in lifecycle order)", statuses, wantStatuses)
	}
	if got, want := sortedSet(final), sortedSet(wantFinal); !slices.Equal(got, want) {
		t.Errorf("README final statuses %q, code %q", got, want)
	}

	var fields []string
	for _, row := range table(t, msgs, "field") {
		fields = append(fields, ticks(row[0])...)
	}
	if want := []string{"orderId", "status", "sequence", "occurredAt"}; !slices.Equal(fields, want) {
		t.Errorf("README body fields %q, want %q (order.Update's JSON names)", fields, want)
	}

	// The outcome table: results, and "Parked, reason X".
	var results, reasons []string
	reason := regexp.MustCompile("reason `([^`]+)`")
	for _, row := range table(t, msgs, "message") {
		cell := row[1]
		for _, m := range reason.FindAllStringSubmatch(cell, -1) {
			reasons = append(reasons, m[1])
		}
		results = append(results, ticks(reason.ReplaceAllString(cell, ""))...)
	}
	wantResults := []string{orderfn.ResultParked, orderfn.ResultRescheduled}
	for _, r := range order.Settled {
		wantResults = append(wantResults, string(r))
	}
	if got, want := sortedSet(results), sortedSet(wantResults); !slices.Equal(got, want) {
		t.Errorf("README results %q, code %q", got, want)
	}
	if got, want := sortedSet(reasons), sortedSet(order.Reasons); !slices.Equal(got, want) {
		t.Errorf("README poison reasons %q, code %q", got, want)
	}
}

var longFlag = regexp.MustCompile(`--[a-z][a-z0-9-]*`)

// TestReadmeDevFlags: the README's table of `orderstatus-dev dev` flags names
// exactly the flags `orderstatus-dev dev --help` lists.
func TestReadmeDevFlags(t *testing.T) {
	var readmeFlags []string
	for _, row := range table(t, section(t, doc(t, devHostDoc), "Running it locally: `orderstatus-dev dev`"), "flag") {
		readmeFlags = append(readmeFlags, longFlag.FindAllString(row[0], -1)...)
	}
	help := helpOf(t, "orderstatus-dev", "dev")
	var helpFlags []string
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "  --") { // a flag's own line, not its description
			helpFlags = append(helpFlags, longFlag.FindString(line))
		}
	}
	if len(helpFlags) == 0 {
		t.Fatalf("orderstatus-dev dev --help lists no flags:\n%s", help)
	}
	got, want := sortedSet(readmeFlags), sortedSet(helpFlags)
	for _, f := range want {
		if !slices.Contains(got, f) {
			t.Errorf("%s is in orderstatus-dev dev --help but not in the README's flag table", f)
		}
	}
	for _, f := range got {
		if !slices.Contains(want, f) {
			t.Errorf("%s is in the README's flag table but not in orderstatus-dev dev --help", f)
		}
	}
}

// TestHelpListsEveryCommand: each binary's --help names its commands, the
// exit codes and where the settings are; `<program> <command> --help`
// answers for each with its usage, on stdout, exit 0, and so does -h.
func TestHelpListsEveryCommand(t *testing.T) {
	want := map[string][]string{
		"handler":         {"serve", "version"},
		"orderstatus":     {"deadletters", "publish", "version"},
		"orderstatus-dev": {"dev", "serve", "version"},
	}
	for prog, cmds := range want {
		t.Run(prog, func(t *testing.T) {
			help := helpOf(t, prog)
			for _, w := range []string{"exit codes:", "Configuration", "local.settings.json.template"} {
				if !strings.Contains(help, w) {
					t.Errorf("%s --help lacks %q:\n%s", prog, w, help)
				}
			}
			if got := subcommands(help); !slices.Equal(got, cmds) {
				t.Errorf("%s --help lists %q, want %q", prog, got, cmds)
			}
			for _, c := range cmds {
				for _, flag := range []string{"--help", "-h"} {
					code, out, errb := runProgram(t, prog, c, flag)
					if code != 0 || !strings.Contains(out, "usage: "+prog+" "+c) {
						t.Errorf("%s %s %s: exit %d, stdout %q, stderr %q; want 0 and its usage on stdout", prog, c, flag, code, out, errb)
					}
				}
			}
		})
	}
}

// TestReadmeScenarioExample: the scenario lines the README shows parse,
// without warnings, and are valid messages.
func TestReadmeScenarioExample(t *testing.T) {
	dev := section(t, doc(t, devHostDoc), "Running it locally: `orderstatus-dev dev`")
	start := strings.Index(dev, "```json\n")
	if start < 0 {
		t.Fatal("the orderstatus-dev dev section has no json example")
	}
	example := dev[start+len("```json\n"):]
	example = example[:strings.Index(example, "```")]
	var warnings []string
	lines, err := scenario.Parse(strings.NewReader(example), devHostDoc, &scenario.Options{Warn: func(m string) { warnings = append(warnings, m) }})
	if err != nil || len(lines) == 0 || len(warnings) > 0 {
		t.Fatalf("README scenario example: %d lines, error %v, warnings %q", len(lines), err, warnings)
	}
	for _, l := range lines {
		var err error
		switch l.Subject {
		case order.SubjectStatusChanged:
			_, err = order.ParseUpdate(l.Body, l.SessionID)
		case order.SubjectPaymentTimeout:
			_, err = order.ParseTimeoutCheck(l.Body, l.SessionID)
		}
		if err != nil {
			t.Errorf("README scenario line %s: %v", l.Pos, err)
		}
	}
}

// TestReadmeConfigurationDefaults: the Configuration table and the
// template give the code's defaults of the settings that have one.
func TestReadmeConfigurationDefaults(t *testing.T) {
	rows := map[string]string{}
	for _, row := range table(t, section(t, doc(t, "docs/configuration.md"), "Configuration"), "setting") {
		for _, name := range ticks(row[0]) {
			if d := ticks(row[1]); len(d) > 0 {
				rows[name] = d[0]
			}
		}
	}
	raw, err := os.ReadFile("../local.settings.json.template")
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct{ Values map[string]string }
	if err := json.Unmarshal(raw, &tpl); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ name, want string }{
		{config.EnvQueue, config.DefaultQueue},
		{config.EnvPoisonQueue, config.DefaultPoisonQueue},
		{config.EnvStoreTable, config.DefaultTable},
		{config.EnvRetryBudget, wording.Duration(config.DefaultRetryBudget)},
		{config.EnvRetryReschedule, strconv.FormatBool(config.DefaultRetryReschedule)},
		{config.EnvRetryBase, wording.Duration(config.DefaultRetryBase)},
		{config.EnvRetryCap, wording.Duration(config.DefaultRetryCap)},
		{config.EnvRetryWindow, wording.Duration(config.DefaultRetryWindow)},
		{config.EnvDeadLetterSweepSchedule, config.DefaultDeadLetterSweepSchedule},
		{config.EnvDeadLetterCooldown, wording.Duration(config.DefaultDeadLetterCooldown)},
		{config.EnvDeadLetterMaxReplays, strconv.Itoa(config.DefaultDeadLetterMaxReplays)},
		{config.EnvDeadLetterSweepRate, strconv.FormatFloat(config.DefaultDeadLetterSweepRate, 'g', -1, 64)},
	} {
		if got, ok := rows[s.name]; !ok || got != s.want {
			t.Errorf("docs/configuration.md: %s default %q, code %q", s.name, got, s.want)
		}
		if got := tpl.Values[s.name]; got != s.want {
			t.Errorf("local.settings.json.template: %s = %q, code default %q", s.name, got, s.want)
		}
	}
	if got := wording.Duration(config.DefaultRetryBudgetNoReschedule); !strings.Contains(doc(t, "docs/configuration.md"), "`"+got+"` with rescheduling off") {
		t.Errorf("docs/configuration.md does not give the budget with rescheduling off (%s)", got)
	}
}

// TestReadmeContentsLinksEveryPage: the README's contents table links
// every page under docs/, and every page it links exists, so the
// reference moved there cannot be orphaned or promised.
func TestReadmeContentsLinksEveryPage(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#]+)\)`)
	var linked []string
	for _, row := range table(t, section(t, readme(t), "Contents"), "page") {
		m := link.FindStringSubmatch(row[0])
		if m == nil {
			t.Errorf("contents row without a link: %q", row[0])
			continue
		}
		linked = append(linked, m[1])
		if _, err := os.Stat("../" + m[1]); err != nil {
			t.Errorf("the contents link %s: %v", m[1], err)
		}
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		rel := "docs/" + filepath.Base(p)
		if !slices.Contains(linked, rel) {
			t.Errorf("%s is not in the README's contents table", rel)
		}
	}
}

// TestTestingDocNamesEveryAzureSkip: docs/testing.md says how many tests
// skip without Azure, and names each: the test functions whose t.Skip
// names a real-Azure variable (SERVICEBUS_TEST_NAMESPACE, or the
// real-account tables variable), counted in the sources.
func TestTestingDocNamesEveryAzureSkip(t *testing.T) {
	azureVar := regexp.MustCompile(`SERVICEBUS_TEST_|ORDERSTATUS_TEST_TABLES_SERVICE_URI|EnvTablesServiceURI`)
	testFunc := regexp.MustCompile(`^func (Test\w+)\(`)
	type site struct{ pkg, test string }
	var sites []site
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fn := ""
		for _, line := range strings.Split(string(b), "\n") {
			if m := testFunc.FindStringSubmatch(line); m != nil {
				fn = m[1]
			}
			if s := strings.TrimSpace(line); (strings.HasPrefix(s, "t.Skip(") || strings.HasPrefix(s, "t.Skipf(")) && azureVar.MatchString(s) {
				sites = append(sites, site{pkg: filepath.Base(filepath.Dir(p)), test: fn})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(doc(t, "docs/testing.md")), " ")
	m := regexp.MustCompile(`\(without Azure, (\w+):`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal(`docs/testing.md does not say "(without Azure, N: ..." how many tests skip`)
	}
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
	if n := slices.Index(words, m[1]); n != len(sites) {
		t.Errorf("docs/testing.md says %s tests skip without Azure; the sources have %d: %v", m[1], len(sites), sites)
	}
	for _, s := range sites {
		if !strings.Contains(text, "`"+s.test+"`") || !strings.Contains(text, s.pkg+"`") {
			t.Errorf("docs/testing.md does not name %s of %s among the skipped tests", s.test, s.pkg)
		}
	}
}

// TestDocsNameOnlyRealTables: a table name the pages give in backticks
// (`deadletters`, `orderstatus`, or one like them) is a table
// infra/app/storage.bicep creates, so a retired table cannot stay in the
// docs.
func TestDocsNameOnlyRealTables(t *testing.T) {
	var tables []string
	for _, m := range regexp.MustCompile(`(?m)^var \w+TableName = '([^']+)'`).FindAllStringSubmatch(doc(t, "infra/app/storage.bicep"), -1) {
		tables = append(tables, m[1])
	}
	if len(tables) < 2 {
		t.Fatalf("infra/app/storage.bicep: tables %q, want the order table and the dead-letter store", tables)
	}
	pages := []string{"README.md", "alerts/README.md"}
	for _, glob := range []string{"docs/*.md", "alerts/runbooks/*.md"} {
		more, err := filepath.Glob("../" + glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range more {
			pages = append(pages, strings.TrimPrefix(filepath.ToSlash(p), "../"))
		}
	}
	tableLike := regexp.MustCompile("`((?:deadletter|orderstatus)[a-z0-9]*)`")
	for _, p := range pages {
		for _, m := range tableLike.FindAllStringSubmatch(doc(t, p), -1) {
			if !slices.Contains(tables, m[1]) {
				t.Errorf("%s names the table `%s`; infra/app/storage.bicep creates %q", p, m[1], tables)
			}
		}
	}
}

// TestReadmeDeployStartsWithStepZero: the README's Deploy section opens
// with docs/deploy.md's step 0 checks, before anything about `azd up`.
func TestReadmeDeployStartsWithStepZero(t *testing.T) {
	sec := strings.TrimSpace(section(t, readme(t), "Deploy to Azure"))
	first, _, _ := strings.Cut(sec, "\n\n")
	const link = "](docs/deploy.md#step-0-check-the-template-against-azure-before-the-first-azd-up)"
	if !strings.Contains(first, link) || !strings.Contains(first, "az bicep build") || !strings.Contains(first, "what-if") {
		t.Errorf("the README's Deploy section does not open with step 0 (%s, az bicep build, what-if):\n%s", link, first)
	}
	if !strings.Contains(doc(t, "docs/deploy.md"), "\n## Step 0: ") {
		t.Error("docs/deploy.md has no \"## Step 0: \" heading")
	}
}

// firstScreen is the README before its first section.
func firstScreen(t *testing.T) string {
	t.Helper()
	md := readme(t)
	if i := strings.Index(md, "\n## "); i >= 0 {
		md = md[:i]
	}
	return strings.Join(strings.Fields(md), " ")
}

// devHostText is the orderstatus-dev dev section of docs/dev-host.md, its
// whitespace folded to single spaces.
func devHostText(t *testing.T) string {
	t.Helper()
	return strings.Join(strings.Fields(section(t, doc(t, devHostDoc), "Running it locally: `orderstatus-dev dev`")), " ")
}

// makeTarget returns the prerequisites and the recipe lines of a target of
// the Makefile.
func makeTarget(t *testing.T, name string) (prereqs []string, recipe []string) {
	t.Helper()
	lines := strings.Split(doc(t, "Makefile"), "\n")
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, name+":")
		if !ok || strings.HasPrefix(rest, "=") {
			continue
		}
		for _, r := range lines[i+1:] {
			if !strings.HasPrefix(r, "\t") {
				break
			}
			recipe = append(recipe, strings.TrimSpace(r))
		}
		return strings.Fields(rest), recipe
	}
	t.Fatalf("the Makefile has no %s target", name)
	return nil, nil
}

// TestReadmeMakeTestOutput: what the README says `make test` prints, in
// that order, is what it prints: testreport names the skipped Go tests
// (up to 20) before its closing lines, of which `go: N passed, M failed, K
// skipped` is the last; the infra checks run after the Go tests and their
// reporter's last line is `infra: N passed, M failed, K skipped`.
func TestReadmeMakeTestOutput(t *testing.T) {
	text := firstScreen(t)
	claims := []string{"a line per skipped Go test with the reason it gave (the first 20;",
		"then the closing counts, `go: N passed, M failed, K skipped` and, last, `infra: N passed, M failed, K skipped`"}
	at := 0
	for _, c := range claims {
		i := strings.Index(text[at:], c)
		if i < 0 {
			t.Fatalf("the README's first screen does not say, in this order, %q", claims)
		}
		at += i + len(c)
	}
	if strings.Contains(text, "ends by naming") {
		t.Error("the README says make test ends by naming the skipped tests: its closing counts come after them")
	}

	prereqs, _ := makeTarget(t, "test")
	if len(prereqs) == 0 || prereqs[len(prereqs)-1] != "test-infra" || !slices.Contains(prereqs, "test-go") {
		t.Errorf("make test runs %v: want test-go before test-infra, last", prereqs)
	}
	_, infra := makeTarget(t, "test-infra")
	if !strings.Contains(strings.Join(infra, " "), "--test-reporter=./infra/check/lib/terse-reporter.mjs --test-reporter-destination=stdout") {
		t.Errorf("test-infra's recipe %q: want the terse reporter on stdout", infra)
	}
	reporter := doc(t, "infra/check/lib/terse-reporter.mjs")
	if i := strings.LastIndex(reporter, "yield "); i < 0 || !strings.HasPrefix(reporter[i:], "yield `infra: ${passed} passed, ${failed} failed, ${skipped} skipped\\n`") {
		t.Error("the infra reporter's last line is not `infra: N passed, M failed, K skipped`")
	}
	if !strings.Contains(doc(t, "handler/internal/devkit/testreport/main.go"), "const maxSkipLines = 20") {
		t.Error("testreport no longer names the first 20 skipped tests, as the README says")
	}

	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to run testreport with")
	}
	stream, err := os.Open("internal/devkit/testreport/testdata/skips.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	cmd := exec.Command(goCmd, "run", "./internal/devkit/testreport")
	cmd.Stdin = stream
	out, _ := cmd.Output() // exit 1 when the stream has a failure: the lines are what matters
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if !regexp.MustCompile(`^go: \d+ passed, \d+ failed, \d+ skipped$`).MatchString(last) {
		t.Fatalf("testreport's last line %q, want go: N passed, M failed, K skipped\n%s", last, out)
	}
	skips := 0
	for _, l := range lines[:len(lines)-1] {
		if strings.HasPrefix(l, "go: skipped ") {
			skips++
		}
	}
	if skips == 0 {
		t.Errorf("testreport named no skipped test before its closing line:\n%s", out)
	}
}

// TestReadmeInterruptUnderMake: docs/dev-host.md (which the README links
// for what `make run` does) says that on Ctrl-C `orderstatus-dev dev` exits 0
// (TestTwoRunsInOneAppRoot checks that) and that `make`, interrupted too,
// adds no line of its own and ends with exit status 130.
// A recipe that exits 0 on SIGINT, as `orderstatus-dev dev` does, shows make's
// part: the whole process group gets the SIGINT, as from a terminal.
func TestReadmeInterruptUnderMake(t *testing.T) {
	text := devHostText(t)
	if want := "`orderstatus-dev dev` itself exits 0; `make`, which the Ctrl-C interrupts too, adds no line of its own and ends with exit status 130 (GNU Make 4.3)."; !strings.Contains(text, want) {
		t.Fatalf("%s does not say %q", devHostDoc, want)
	}
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make not on PATH")
	}
	if v, err := exec.Command(mk, "--version").Output(); err != nil || !bytes.HasPrefix(v, []byte("GNU Make ")) {
		t.Skipf("not GNU Make: %q %v", v, err)
	}
	dir := t.TempDir()
	recipe := "run:\n\t@sh -c 'trap \"echo stopped; exit 0\" INT; echo ready; while :; do sleep 0.1; done'\n"
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	// GNU Make 4.3's SIGINT handler can race its own reaping of the
	// recipe and stop with "wait: No child processes" (make's bug, seen
	// under load): such a run is tried again, up to three times.
	var rest []string
	var stderr string
	var state *os.ProcessState
	for try := 1; try <= 3; try++ {
		rest, stderr, state = interruptMake(t, mk, dir)
		if !strings.Contains(stderr, "wait: No child processes") {
			break
		}
		t.Logf("try %d: make raced its own reaping (%q): again", try, stderr)
	}
	if !slices.Equal(rest, []string{"stopped"}) || stderr != "" {
		t.Errorf("after Ctrl-C: stdout %q, stderr %q; want only the recipe's own line", rest, stderr)
	}
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("make ended %v: want killed by SIGINT, which a shell reports as exit status 130", state)
	}
}

// interruptMake runs `make run` in dir as a top-level make in its own
// process group, sends the group SIGINT once the recipe is ready, and
// returns what followed on stdout, stderr and how make ended.
func interruptMake(t *testing.T, mk, dir string) ([]string, string, *os.ProcessState) {
	t.Helper()
	cmd := exec.Command(mk, "--no-print-directory", "-C", dir, "run")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Not a sub-make of the make that may run this test: no inherited
	// level, flags or jobserver.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MAKELEVEL" && k != "MFLAGS" && k != "MAKEOVERRIDES" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("the recipe did not start: %q, stderr %q", sc.Text(), stderr.String())
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for sc.Scan() {
		rest = append(rest, sc.Text())
	}
	_ = cmd.Wait()
	return rest, stderr.String(), cmd.ProcessState
}

// TestReadmeConfirmations: where the README's dead-letter commands change
// something without --yes, the line says that it asks [y/N] and that off
// a terminal it needs --yes: discard always asks, and so does an action
// on a filter (more than one entry).
func TestReadmeConfirmations(t *testing.T) {
	sec := section(t, readme(t), "Dead letters")
	n := 0
	for _, line := range strings.Split(sec, "\n") {
		cmd, comment, _ := strings.Cut(line, " #")
		f := strings.Fields(cmd)
		if len(f) < 3 || f[0] != "bin/orderstatus" || f[1] != "deadletters" {
			continue
		}
		sub := f[2]
		asks := sub == "discard" || (slices.Contains([]string{"replay", "archive"}, sub) && !slices.Contains(f, "--id"))
		if !asks || slices.Contains(f, "--yes") || slices.Contains(f, "--dry-run") {
			continue
		}
		n++
		if !strings.Contains(comment, "asks [y/N]") || !strings.Contains(comment, "off a terminal needs --yes") {
			t.Errorf("README: %q asks for confirmation: want its comment to say it asks [y/N] and off a terminal needs --yes", strings.TrimSpace(line))
		}
	}
	if n == 0 {
		t.Error("the README's Dead letters section shows no command that asks (discard --id): the check above checked nothing")
	}
}

// TestReadmeTwoRuns: docs/dev-host.md (which the README links for a second
// run beside the first) says that `make run` checks its address before it
// installs or builds anything, and that a second clone's run serves beside
// the first with --http-addr; the Makefile runs the check first, and the
// check's refusal names that command.
func TestReadmeTwoRuns(t *testing.T) {
	if !strings.Contains(readme(t), "](docs/dev-host.md)") {
		t.Error("the README does not link docs/dev-host.md")
	}
	text := devHostText(t)
	for _, want := range []string{"`make run` first checks that its address, `127.0.0.1:7071`, is free, and if it is not stops at once, before installing or building anything",
		"two runs, from two clones, can serve side by side with the second on another address, `make run ARGS=\"--http-addr 127.0.0.1:7072\"`"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s does not say %q", devHostDoc, want)
		}
	}
	prereqs, recipe := makeTarget(t, "run")
	if len(prereqs) != 0 || len(recipe) == 0 || !strings.HasPrefix(recipe[0], "@./scripts/check-run-port.sh ") {
		t.Errorf("make run: prerequisites %v, recipe %q; want none, and the address check first", prereqs, recipe)
	}
	if !strings.Contains(doc(t, "scripts/check-run-port.sh"), `make run ARGS=\"--http-addr 127.0.0.1:PORT\"`) {
		t.Error(`scripts/check-run-port.sh does not name make run ARGS="--http-addr 127.0.0.1:PORT"`)
	}
}
