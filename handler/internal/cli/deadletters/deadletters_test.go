package deadletters

import (
	"context"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"purge"}, "unknown command"},
		{"bad flag", []string{"list", "--nope"}, "flag provided but not defined"},
		{"bad source", []string{"list", "--source", "dead"}, "--source"},
		{"replay without source", []string{"replay", "--message-id", "x"}, "--source is required"},
		{"replay from poison-dlq", []string{"replay", "--source", "poison-dlq", "--message-id", "x"}, "--source"},
		{"discard without id", []string{"discard", "--source", "poison"}, "--message-id is required"},
		{"discard off a terminal without --yes", []string{"discard", "--source", "poison", "--message-id", "x"}, "refusing to discard without --yes"},
		{"max zero", []string{"list", "--max", "0"}, "--max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut strings.Builder
			code := Run(context.Background(), tt.args, &out, &errOut, Env{
				Getenv: func(string) string { return "" }, Dir: t.TempDir(), IsTerminal: func() bool { return false }})
			if code != exitUsage {
				t.Errorf("exit %d, want %d (stderr %q)", code, exitUsage, errOut.String())
			}
			if lines := strings.Count(strings.TrimSpace(errOut.String()), "\n"); lines != 0 || !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("stderr %q: want one line containing %q", errOut.String(), tt.want)
			}
		})
	}
}

func TestHelpNamesEveryFlagTheRunbooksUse(t *testing.T) {
	for _, c := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"--help"}, []string{"list", "stats", "sweep", "replay", "discard"}},
		{[]string{"list", "--help"}, []string{"--source", "--reason", "--max", "--json", "--namespace", "--tables"}},
		{[]string{"sweep", "--help"}, []string{"--dry-run"}},
		{[]string{"replay", "--help"}, []string{"--source", "--message-id", "--body"}},
		{[]string{"discard", "--help"}, []string{"--source", "--message-id", "--yes"}},
	} {
		var out, errOut strings.Builder
		if code := Run(context.Background(), c.args, &out, &errOut, Env{}); code != exitOK {
			t.Errorf("%v: exit %d", c.args, code)
		}
		for _, f := range c.flags {
			if !strings.Contains(out.String(), f) {
				t.Errorf("%v: help lacks %s:\n%s", c.args, f, out.String())
			}
		}
	}
}
