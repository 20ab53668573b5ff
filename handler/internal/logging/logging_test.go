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
	log.Warn("parked", "result", "Parked")
	log.Error("failed", "result", "Failed")

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("stdout has %d lines, want 3: %q", len(lines), out.String())
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
		t.Errorf("stderr = %q, want only the failure (not the warning), with its attributes", errOut.String())
	}
}
