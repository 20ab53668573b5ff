package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The size budgets the repository keeps (go test -v -run TestDiet ./handler/
// prints the figures).
const (
	// MaxGoLines bounds the module's non-test Go, comments and blank
	// lines included.
	MaxGoLines = 36000
	// MaxCommentPercent bounds the share of those lines that are comments.
	MaxCommentPercent = 13
	// MaxDocsLines bounds docs/*.md together; MaxReadmeLines the README.
	MaxDocsLines   = 2400
	MaxReadmeLines = 200
	// MaxDatedLines bounds the lines of the README and docs/*.md that
	// carry a date or a clock time: reference pages state the current
	// truth, and history lives in git.
	MaxDatedLines = 12
)

var (
	datedLine   = regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b|\b[0-2]?\d:[0-5]\d(:[0-5]\d)?\b`)
	issueNumber = regexp.MustCompile(`(?i)\bissues? #?\d+\b|(?:^|[^\w/.-])#\d{1,4}\b`)
)

// goFiles walks the repository from its root (one up from handler/) and
// calls fn with every non-test Go file.
func goFiles(t *testing.T, fn func(path string, src []byte)) {
	t.Helper()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(path, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// commentLines counts the lines of src that hold only a comment.
func commentLines(src []byte) int {
	n, block := 0, false
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case block:
			n++
			block = !strings.Contains(l, "*/")
		case strings.HasPrefix(l, "//"):
			n++
		case strings.HasPrefix(l, "/*"):
			n++
			block = !strings.Contains(l, "*/")
		}
	}
	return n
}

func TestDietGo(t *testing.T) {
	var lines, comments, files int
	goFiles(t, func(path string, src []byte) {
		files++
		lines += bytes.Count(src, []byte("\n"))
		comments += commentLines(src)
		for i, l := range strings.Split(string(src), "\n") {
			if c := strings.Index(l, "//"); c >= 0 && issueNumber.MatchString(l[c:]) {
				t.Errorf("%s:%d names an issue number: say what the code does, not where it came from", path, i+1)
			}
		}
	})
	if files < 100 {
		t.Fatalf("found %d Go files: the walk saw nothing", files)
	}
	pct := 100 * float64(comments) / float64(lines)
	t.Logf("non-test Go: %d files, %d lines, %d comment lines (%.1f%%)", files, lines, comments, pct)
	if lines > MaxGoLines {
		t.Errorf("non-test Go is %d lines, over %d", lines, MaxGoLines)
	}
	if pct > MaxCommentPercent {
		t.Errorf("comments are %.1f%% of non-test Go, over %d%%", pct, MaxCommentPercent)
	}
}

func TestDietDocs(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil || len(pages) < 5 {
		t.Fatalf("docs/*.md: %d pages, %v", len(pages), err)
	}
	count := func(path string) (lines int, dated []string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(b), "\n") {
			if datedLine.MatchString(l) {
				dated = append(dated, filepath.Base(path)+":"+itoa(i+1))
			}
		}
		return bytes.Count(b, []byte("\n")), dated
	}
	readme, dated := count("../README.md")
	docs := 0
	for _, p := range pages {
		n, d := count(p)
		docs += n
		dated = append(dated, d...)
	}
	t.Logf("README %d lines, docs/*.md %d lines, %d dated lines %v", readme, docs, len(dated), dated)
	if readme > MaxReadmeLines {
		t.Errorf("README.md is %d lines, over %d", readme, MaxReadmeLines)
	}
	if docs > MaxDocsLines {
		t.Errorf("docs/*.md is %d lines, over %d", docs, MaxDocsLines)
	}
	if len(dated) > MaxDatedLines {
		t.Errorf("%d lines carry a date or clock time, over %d: %v", len(dated), MaxDatedLines, dated)
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}

// TestDietFindsWhatItCounts keeps the two scanners honest.
func TestDietFindsWhatItCounts(t *testing.T) {
	if got := commentLines([]byte("// a\nx := 1 // b\n/* c\nd */\ny\n")); got != 3 {
		t.Errorf("commentLines = %d, want 3", got)
	}
	for s, want := range map[string]bool{
		"run of 2026-12-04": true, "at 04:32": true, "at 4:32:10 UTC": true,
		"127.0.0.1:10002": false, "ratio 0.98": false, "PT5M": false, "v1.8.0": false,
	} {
		if datedLine.MatchString(s) != want {
			t.Errorf("datedLine(%q) = %v, want %v", s, !want, want)
		}
	}
	for s, want := range map[string]bool{
		"// issue 33 says": true, "// see #12": true, "// Azure/azure-service-bus#265": false, "// 5 retries": false, "// HTTP 409": false,
	} {
		if issueNumber.MatchString(s) != want {
			t.Errorf("issueNumber(%q) = %v, want %v", s, !want, want)
		}
	}
}
