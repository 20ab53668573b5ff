// Command testreport turns the JSON stream of `go test -json` into the
// terse report `make test` prints: one line per package, the output of
// every failing test and of every package that failed on its own, a line
// per skipped test with its reason, and the closing lines,
//
//	go: P packages in 3m10s
//	go: N passed, M failed, K skipped
//
// counting leaf tests. The full output goes to the -log file. It exits 1
// when anything failed or no package reported a result.
//
//	go test -json ./... 2>&1 | go run ./handler/internal/devkit/testreport -log .run/test-go.log
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	logPath := flag.String("log", "", "write the full test output to `file`")
	flag.Parse()
	var log io.Writer = io.Discard
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
		defer f.Close()
		log = f
	}
	c, err := Report(os.Stdin, os.Stdout, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if c.Failed > 0 || c.Packages == 0 {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string // build-output and build-fail events
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// Counts is what Report saw.
type Counts struct {
	Passed, Failed, Skipped int // leaf tests; Failed also counts packages that failed on their own
	Packages                int // packages with a result (pass or fail)
}

// Report reads the events from r, writes the terse report to out and every
// output line to log, and returns the counts.
func Report(r io.Reader, out, log io.Writer) (Counts, error) {
	var (
		c         Counts
		testOut   = map[string][]string{} // package + "\x00" + test -> output lines
		pkgOut    = map[string][]string{} // output outside any test, by package
		failedIn  = map[string]bool{}     // packages with a failed test
		buildOut  = map[string][]string{} // build output, by import path
		results   = map[string]string{}   // package + "\x00" + test -> pass, fail or skip
		parents   = map[string]bool{}     // keys of tests that have subtests
		skipWhy   = map[string]string{}   // package + "\x00" + test -> the skip's reason
		pkgFailed = 0                     // packages that failed on their own
		sawResult = false
		first     time.Time // the stream's first and last event times
		last      time.Time
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
			fmt.Fprintln(out, line) // go's own messages
			fmt.Fprintln(log, line)
			continue
		}
		if !e.Time.IsZero() {
			if first.IsZero() {
				first = e.Time
			}
			last = e.Time
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "output":
			io.WriteString(log, e.Output)
			if e.Test != "" {
				testOut[key] = append(testOut[key], e.Output)
			} else {
				pkgOut[e.Package] = append(pkgOut[e.Package], e.Output)
			}
		case "build-output":
			io.WriteString(log, e.Output)
			buildOut[e.ImportPath] = append(buildOut[e.ImportPath], e.Output)
		case "pass", "fail", "skip":
			if e.Test != "" {
				results[key] = e.Action
				for i := strings.LastIndex(e.Test, "/"); i > 0; i = strings.LastIndex(e.Test[:i], "/") {
					parents[e.Package+"\x00"+e.Test[:i]] = true
				}
				if e.Action == "fail" {
					failedIn[e.Package] = true
					io.WriteString(out, strings.Join(failFirst(relevant(testOut[key])), ""))
				}
				if e.Action == "skip" {
					skipWhy[key] = skipReason(testOut[key])
				}
				delete(testOut, key)
				continue
			}
			if e.Action == "skip" {
				continue // no test files
			}
			sawResult = true
			c.Packages++
			elapsed := (time.Duration(e.Elapsed * float64(time.Second))).Round(10 * time.Millisecond)
			if e.Action == "pass" {
				fmt.Fprintf(out, "ok   %s %s\n", e.Package, elapsed)
				continue
			}
			if !failedIn[e.Package] {
				// Failed on its own: say why.
				pkgFailed++
				lines := buildOut[e.FailedBuild]
				if e.FailedBuild == "" {
					lines = relevant(pkgOut[e.Package])
				}
				io.WriteString(out, strings.Join(lines, ""))
			}
			fmt.Fprintf(out, "FAIL %s %s\n", e.Package, elapsed)
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	for key, result := range results {
		if parents[key] && result != "fail" {
			continue
		}
		switch result {
		case "pass":
			c.Passed++
		case "skip":
			c.Skipped++
		case "fail":
			if !parents[key] || !anyFailedUnder(results, key) {
				c.Failed++
			}
		}
	}
	c.Failed += pkgFailed
	var skipped []string
	for key, result := range results {
		if result == "skip" && !parents[key] {
			skipped = append(skipped, key)
		}
	}
	slices.Sort(skipped)
	const maxSkipLines = 20
	for i, key := range skipped {
		if i == maxSkipLines {
			fmt.Fprintf(out, "go: skipped %d more (reasons in the log)\n", len(skipped)-maxSkipLines)
			break
		}
		pkg, test, _ := strings.Cut(key, "\x00")
		why := skipWhy[key]
		if why == "" {
			why = "no reason given"
		}
		fmt.Fprintf(out, "go: skipped %s (%s): %s\n", test, pkg, why)
	}
	if !sawResult {
		fmt.Fprintln(out, "go: no package reported a result")
	}
	// The closing line has the plain form CI reads, alone on its line.
	fmt.Fprintf(out, "go: %d packages in %s\n", c.Packages, last.Sub(first).Round(time.Second))
	fmt.Fprintf(out, "go: %d passed, %d failed, %d skipped\n", c.Passed, c.Failed, c.Skipped)
	return c, nil
}

// skipReason is what a skipped test said, without the file:line prefix, on one line.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range relevant(lines) {
		l = strings.TrimSpace(l)
		if file, rest, ok := strings.Cut(l, ": "); ok && strings.Contains(file, ".go:") && !strings.Contains(file, " ") {
			l = rest
		}
		if l != "" {
			msg = append(msg, l)
		}
	}
	return strings.Join(msg, " ")
}

// anyFailedUnder reports whether a subtest of the test named by key failed.
func anyFailedUnder(results map[string]string, key string) bool {
	for k, r := range results {
		if r == "fail" && strings.HasPrefix(k, key+"/") {
			return true
		}
	}
	return false
}

// failFirst puts a failed test's "--- FAIL: name" line before what it
// logged, as go test prints it.
func failFirst(lines []string) []string {
	var head, rest []string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "--- FAIL") {
			head = append(head, strings.TrimLeft(l, " "))
		} else {
			rest = append(rest, l)
		}
	}
	return append(head, rest...)
}

// relevant drops the runner's bookkeeping lines (=== RUN, PASS, ok, ...).
func relevant(lines []string) []string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "=== RUN"), strings.HasPrefix(t, "=== PAUSE"), strings.HasPrefix(t, "=== CONT"),
			strings.HasPrefix(t, "=== NAME"), t == "PASS", t == "FAIL", strings.HasPrefix(t, "ok  "),
			strings.HasPrefix(t, "FAIL\t"), strings.HasPrefix(t, "--- PASS"), strings.HasPrefix(t, "--- SKIP"):
			continue
		}
		out = append(out, l)
	}
	return out
}
