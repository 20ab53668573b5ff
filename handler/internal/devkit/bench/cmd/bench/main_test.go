package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestBadArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-nope"}, "flag provided but not defined"},
		{"not a number", []string{"-orders", "many"}, "invalid value"},
		{"zero orders", []string{"-orders", "0"}, "at least 1"},
		{"an argument", []string{"extra"}, "no arguments"},
		{"an unknown group", []string{"-only", "outage,nope"}, `group "nope"`},
		{"an empty group", []string{"-only", "outage,"}, `group ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if lines := strings.Count(stderr.String(), "\n"); lines != 1 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr = %q, want one line with %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestOnly(t *testing.T) {
	opts, err := parseFlags([]string{"-only", "outage, memory"})
	if err != nil || !slices.Equal(opts.Only, []string{"outage", "memory"}) {
		t.Errorf("-only outage, memory: %q, %v", opts.Only, err)
	}
	if opts, err := parseFlags(nil); err != nil || opts.Only != nil {
		t.Errorf("no -only: %q, %v; want every group", opts.Only, err)
	}
}

// TestReadmeArguments: every BENCH_ARGS the README and the pages that
// describe make bench (docs/performance.md, docs/outages.md) show, and
// every `go run ./handler/internal/devkit/bench/cmd/bench ...` they name (the
// bench part of make bench alone, without its Go micro-benchmarks), is
// accepted.
func TestReadmeArguments(t *testing.T) {
	var found [][][]byte
	for _, doc := range []string{"README.md", "docs/performance.md", "docs/outages.md"} {
		text, err := os.ReadFile("../../../../../../" + doc)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, regexp.MustCompile(`make bench BENCH_ARGS="([^"]*)"`).FindAllSubmatch(text, -1)...)
		found = append(found, regexp.MustCompile("`go run \\./handler/internal/devkit/bench/cmd/bench([^`]*)`").FindAllSubmatch(text, -1)...)
	}
	if len(found) == 0 {
		t.Fatal("neither the README nor the bench pages show a make bench BENCH_ARGS; update this test")
	}
	for _, m := range found {
		if _, err := parseFlags(strings.Fields(string(m[1]))); err != nil {
			t.Errorf("the documented arguments %q: %v", m[1], err)
		}
	}
}
