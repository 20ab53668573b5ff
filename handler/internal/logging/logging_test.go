package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestTeeSendsFailuresToStderrToo(t *testing.T) {
	var out, errOut bytes.Buffer
	log := New(&out, &errOut, slog.LevelInfo).With("order_id", "o-1")
	log.Debug("hidden")
	log.Info("settled", "result", "Applied")
	log.Error("failed", "result", "Failed")

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout has %d lines, want 2: %q", len(lines), out.String())
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("stdout line is not JSON: %q", l)
		}
		if rec["order_id"] != "o-1" {
			t.Errorf("line lacks order_id: %q", l)
		}
	}
	errLines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(errLines) != 1 || !strings.Contains(errLines[0], `"msg":"failed"`) || !strings.Contains(errLines[0], `"order_id":"o-1"`) {
		t.Errorf("stderr = %q, want only the failure, with its attributes", errOut.String())
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud) succeeded")
	}
}
