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

func TestInstanceID(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"flex consumption", map[string]string{EnvContainerName: "c-1", EnvWebsiteInstanceID: "w-1"}, "c-1"},
		{"app service", map[string]string{EnvWebsiteInstanceID: "w-1"}, "w-1"},
		{"local", map[string]string{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InstanceID(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("InstanceID = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWithInstanceOnEveryLine(t *testing.T) {
	var out, errOut bytes.Buffer
	log := WithInstance(New(&out, &errOut, slog.LevelInfo), "instance-2")
	log.Info("settled")
	log.Error("failed")
	for _, l := range strings.Split(strings.TrimSpace(out.String()+errOut.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if rec[KeyInstanceID] != "instance-2" {
			t.Errorf("line %q: instance_id = %v, want instance-2", l, rec[KeyInstanceID])
		}
	}
	out.Reset()
	WithInstance(New(&out, nil, slog.LevelInfo), "").Info("x")
	if strings.Contains(out.String(), KeyInstanceID) {
		t.Errorf("no instance id set, but the line has one: %s", out.String())
	}
}
