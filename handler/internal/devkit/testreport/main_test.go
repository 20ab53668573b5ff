package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The testdata streams were recorded from `go test -json` over a module
// with a passing package (a test, a subtest, a skipped subtest), a failing
// one (a passing test, a failing subtest) and one that does not build.
func TestReport(t *testing.T) {
	tests := []struct {
		file       string
		want       Counts
		wantOut    []string // lines the report must hold, in order
		wantNotOut []string
	}{
		{
			file: "testdata/pass.jsonl",
			want: Counts{Passed: 2, Skipped: 1, Packages: 1},
			wantOut: []string{
				"ok   example.com/gt/good",
				"go: skipped TestB/y (example.com/gt/good): later",
				"go: 1 packages",
				"go: 2 passed, 0 failed, 1 skipped",
			},
			wantNotOut: []string{"=== RUN", "--- PASS", "--- SKIP"},
		},
		{
			file: "testdata/mixed.jsonl",
			// TestBad/sub failed (TestBad only through it), and the
			// broken package failed on its own.
			want: Counts{Passed: 3, Failed: 2, Skipped: 1, Packages: 3},
			wantOut: []string{
				"broken/x_test.go:3:28: undefined: undefined",
				"FAIL example.com/gt/broken",
				"--- FAIL: TestBad/sub",
				"b_test.go:4: got 1, want 2",
				"FAIL example.com/gt/bad",
				"go: 3 packages",
				"go: 3 passed, 2 failed, 1 skipped",
			},
			wantNotOut: []string{"noise", "=== RUN", "--- PASS"},
		},
		{
			file: "testdata/skips.jsonl",
			// Each skipped test is named on the closing lines, with the
			// reason its t.Skip gave.
			want: Counts{Passed: 1, Skipped: 3, Packages: 1},
			wantOut: []string{
				"ok   example.com/gt/skips",
				"go: skipped TestAzure (example.com/gt/skips): set SERVICEBUS_TEST_NAMESPACE to run the broker suite against a real namespace\n",
				"go: skipped TestQuiet (example.com/gt/skips): no reason given\n",
				"go: skipped TestTables/real (example.com/gt/skips): set ORDERSTATUS_TEST_TABLES_SERVICE_URI to run it\n",
				"go: 1 packages",
				"go: 1 passed, 0 failed, 3 skipped",
			},
			wantNotOut: []string{"s_test.go:", "--- SKIP"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			in, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			var out, log bytes.Buffer
			got, err := Report(bytes.NewReader(in), &out, &log)
			if err != nil {
				t.Fatalf("Report: %v", err)
			}
			if got != tt.want {
				t.Errorf("counts = %+v, want %+v", got, tt.want)
			}
			rest := out.String()
			for _, w := range tt.wantOut {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Errorf("report lacks %q (in this order):\n%s", w, out.String())
					break
				}
				rest = rest[i+len(w):]
			}
			if !strings.HasSuffix(out.String(), tt.wantOut[len(tt.wantOut)-1]+"\n") {
				t.Errorf("report does not end with the closing line:\n%s", out.String())
			}
			for _, w := range tt.wantNotOut {
				if strings.Contains(out.String(), w) {
					t.Errorf("report holds %q, which only the log should:\n%s", w, out.String())
				}
			}
			// The log keeps everything, the noise of passing tests included.
			if strings.Contains(string(in), "noise") && !strings.Contains(log.String(), "noise") {
				t.Errorf("log lacks the output of a passing test:\n%s", log.String())
			}
		})
	}
}

func TestReportPassesOtherLinesThrough(t *testing.T) {
	var out bytes.Buffer
	got, err := Report(strings.NewReader("go: downloading example.com/x v1.0.0\n"), &out, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Packages != 0 || !strings.Contains(out.String(), "go: downloading example.com/x") ||
		!strings.Contains(out.String(), "go: no package reported a result") {
		t.Errorf("got %+v, report:\n%s\nwant the line passed through and no package result noted", got, out.String())
	}
}

// TestReportWallTime: the packages line says how long the run took, from
// the stream's first event to its last.
func TestReportWallTime(t *testing.T) {
	stream := `{"Time":"2026-12-01T10:00:00Z","Action":"start","Package":"example.com/p"}
{"Time":"2026-12-01T10:00:01Z","Action":"run","Package":"example.com/p","Test":"TestA"}
{"Time":"2026-12-01T10:03:09.6Z","Action":"pass","Package":"example.com/p","Test":"TestA","Elapsed":188}
{"Time":"2026-12-01T10:03:10Z","Action":"pass","Package":"example.com/p","Elapsed":190}
`
	var out bytes.Buffer
	if _, err := Report(strings.NewReader(stream), &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "go: 1 packages in 3m10s\n") {
		t.Errorf("report:\n%s\nwant the packages line with the run's wall time, 3m10s", out.String())
	}
}
