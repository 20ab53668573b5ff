package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// line is one line a process wrote, with the stream it went to.
type line struct {
	text   string
	stderr bool
}

func lines(out, errOut *bytes.Buffer) []line {
	var ls []line
	for _, s := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if s != "" {
			ls = append(ls, line{s, false})
		}
	}
	for _, s := range strings.Split(strings.TrimSpace(errOut.String()), "\n") {
		if s != "" {
			ls = append(ls, line{s, true})
		}
	}
	return ls
}

// TestEachRecordOnceAtTheHostsLevel writes records of every level, some
// whose text would mislead the host's substring rule, and checks that each
// is written once, as valid JSON with the same content, on the stream from
// which the host logs it at the record's own level.
func TestEachRecordOnceAtTheHostsLevel(t *testing.T) {
	var out, errOut bytes.Buffer
	log := New(&out, &errOut, slog.LevelInfo).With("order_id", "o-1")
	log.Debug("hidden")
	records := []struct {
		level slog.Level
		msg   string
		err   string
	}{
		{slog.LevelInfo, "settled", ""},
		{slog.LevelInfo, "an error was retried and the warning cleared", "connection refused"},
		{slog.LevelWarn, "parked", ""},
		{slog.LevelWarn, "sequence gap", "failed twice"},
		{slog.LevelError, "failed", "connection refused"},
		{slog.LevelError, "failed after a WARNING", "Warn: lock lost; rewarned"},
	}
	for _, r := range records {
		log.Log(t.Context(), r.level, r.msg, "error", r.err)
	}
	got := lines(&out, &errOut)
	if len(got) != len(records) {
		t.Fatalf("%d lines written, want %d (one per record, Debug hidden):\n%s\n%s", len(got), len(records), out.String(), errOut.String())
	}
	seen := map[string]int{}
	for _, l := range got {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l.text), &rec); err != nil {
			t.Fatalf("line is not JSON: %q: %v", l.text, err)
		}
		if rec["order_id"] != "o-1" {
			t.Errorf("line lacks order_id: %q", l.text)
		}
		msg, _ := rec["msg"].(string)
		seen[msg]++
		for _, r := range records {
			if r.msg != msg {
				continue
			}
			if rec["error"] != r.err {
				t.Errorf("%q: error = %q, want %q (the content survives the rewrite)", msg, rec["error"], r.err)
			}
			if hl := HostLevel(l.text, l.stderr); hl != r.level {
				t.Errorf("%q (stderr %v): the host logs it at %v, want %v: %s", msg, l.stderr, hl, r.level, l.text)
			}
		}
	}
	for _, r := range records {
		if seen[r.msg] != 1 {
			t.Errorf("%q written %d times, want once", r.msg, seen[r.msg])
		}
	}
}

func TestNoErrOutWritesAllToOut(t *testing.T) {
	var out bytes.Buffer
	log := New(&out, nil, slog.LevelInfo)
	log.Info("a")
	log.Warn("b")
	log.Error("c")
	if n := strings.Count(out.String(), "\n"); n != 3 {
		t.Errorf("%d lines on out, want 3: %s", n, out.String())
	}
}

// TestHostLevel pins the host's rule (WorkerProcess.ParseErrorMessageAndLog
// with UseStdErrorStreamForErrorsOnly, as for custom handlers).
func TestHostLevel(t *testing.T) {
	tests := []struct {
		line   string
		stderr bool
		want   slog.Level
	}{
		{`{"level":"ERROR"}`, false, slog.LevelInfo},
		{`{"level":"WARN"}`, true, slog.LevelWarn},
		{`plain text`, true, slog.LevelError},
		{`a wArNiNg`, true, slog.LevelWarn},
		{`{"msg":"\u0077arn"}`, true, slog.LevelError},
	}
	for _, tt := range tests {
		if got := HostLevel(tt.line, tt.stderr); got != tt.want {
			t.Errorf("HostLevel(%q, stderr %v) = %v, want %v", tt.line, tt.stderr, got, tt.want)
		}
	}
}

func FuzzNoWarnKeepsJSON(f *testing.F) {
	for _, s := range []string{"warn", "WARN\\", `\warn"`, "wwarnn", "ｗarn", "\x00warn"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var errOut bytes.Buffer
		New(&bytes.Buffer{}, &errOut, slog.LevelInfo).Error(s, s, s)
		text := strings.TrimSuffix(errOut.String(), "\n")
		if strings.Contains(text, "\n") {
			t.Fatalf("one record, several lines: %q", text)
		}
		if HostLevel(text, true) != slog.LevelError {
			t.Fatalf("the host would not log this error as an Error: %q", text)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(text), &rec); err != nil {
			t.Fatalf("not JSON after the rewrite: %q: %v", text, err)
		}
		var want map[string]any
		var plain bytes.Buffer
		slog.New(slog.NewJSONHandler(&plain, nil)).Error(s, s, s)
		if err := json.Unmarshal(plain.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if rec["msg"] != want["msg"] || rec[keyOf(want, s)] != want[keyOf(want, s)] {
			t.Fatalf("content changed: got %v, want %v", rec, want)
		}
	})
}

// keyOf is the key the attribute s=s got (slog writes "!BADKEY" for none).
func keyOf(rec map[string]any, s string) string {
	if _, ok := rec[s]; ok {
		return s
	}
	return "!BADKEY"
}

// TestInstanceIDIsReadAsTheHostReadsIt: the instance id is read as the
// host reads it (Azure/azure-functions-host,
// src/WebJobs.Script/Environment/EnvironmentExtensions.cs, GetInstanceId,
// IsAnyLinuxConsumption, IsFlexConsumptionSku, IsLinuxConsumptionOnAtlas,
// IsAppService): on Linux and Flex Consumption WEBSITE_POD_NAME, else
// CONTAINER_NAME, and never WEBSITE_INSTANCE_ID; on every other plan
// WEBSITE_INSTANCE_ID only. The first four cases are the host's own
// (test/WebJobs.Script.Tests/Extensions/EnvironmentExtensionsTests.cs,
// GetInstanceId_ReturnsExpectedResult).
func TestInstanceIDIsReadAsTheHostReadsIt(t *testing.T) {
	const (
		pod, container, instance = "p-1", "c-1", "w-1"
		sku, legion, managed     = "WEBSITE_SKU", "LEGION_SERVICE_HOST", "MANAGED_ENVIRONMENT"
	)
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"linux consumption: the container", map[string]string{EnvContainerName: container}, container},
		{"linux consumption: no container, no id", map[string]string{}, ""},
		{"app service: the instance", map[string]string{EnvWebsiteInstanceID: instance}, instance},
		{"app service with a container name: the instance", map[string]string{EnvContainerName: container, EnvWebsiteInstanceID: instance}, instance},
		{"flex consumption (legion): the pod first", map[string]string{legion: "l", EnvWebsitePodName: pod, EnvContainerName: container}, pod},
		{"flex consumption (legion): the container without a pod", map[string]string{legion: "l", EnvContainerName: container}, container},
		{"flex consumption (legion), pod only", map[string]string{legion: "l", EnvWebsitePodName: pod}, pod},
		{"flex consumption by sku: the pod, never the instance", map[string]string{sku: "FlexConsumption", EnvWebsitePodName: pod, EnvContainerName: container, EnvWebsiteInstanceID: instance}, pod},
		{"flex consumption by sku without pod or container: none", map[string]string{sku: "flexconsumption", EnvWebsiteInstanceID: instance}, ""},
		{"linux consumption (atlas): the pod first", map[string]string{EnvWebsitePodName: pod, EnvContainerName: container}, pod},
		{"a pod name alone is no consumption plan", map[string]string{EnvWebsitePodName: pod}, ""},
		{"container apps (managed environment): the instance", map[string]string{managed: "m", EnvContainerName: container, EnvWebsiteInstanceID: instance}, instance},
		{"orderstatus-dev dev: the container", map[string]string{EnvContainerName: "OrderStatus-1"}, "OrderStatus-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InstanceID(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("InstanceID(%v) = %q, want %q", tt.env, got, tt.want)
			}
		})
	}
}

func TestWithInstanceOnEveryLine(t *testing.T) {
	var out, errOut bytes.Buffer
	log := WithInstance(New(&out, &errOut, slog.LevelInfo), "instance-2")
	log.Info("settled")
	log.Warn("parked")
	log.Error("failed")
	for _, l := range lines(&out, &errOut) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l.text), &rec); err != nil {
			t.Fatalf("line %q: %v", l.text, err)
		}
		if rec[KeyInstanceID] != "instance-2" {
			t.Errorf("line %q: instance_id = %v, want instance-2", l.text, rec[KeyInstanceID])
		}
	}
	out.Reset()
	WithInstance(New(&out, nil, slog.LevelInfo), "").Info("x")
	if strings.Contains(out.String(), KeyInstanceID) {
		t.Errorf("no instance id set, but the line has one: %s", out.String())
	}
}
