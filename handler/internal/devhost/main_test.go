package devhost

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderstatus/handler/internal/devhost/internal/fakehandler"
)

func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code = Main(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestMainUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--nope"}, "flag provided but not defined: -nope"},
		{"bad value", []string{"--orders", "x"}, "invalid value"},
		{"extra argument", []string{"run"}, `unexpected argument "run"`},
		{"no orders", []string{"--orders", "0"}, "--orders 0"},
		{"zero time scale", []string{"--time-scale", "0"}, "--time-scale 0"},
		{"negative lock", []string{"--lock-duration", "-1s"}, "--lock-duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, tt.args...)
			if code != ExitUsage {
				t.Errorf("exit code: got %d, want %d", code, ExitUsage)
			}
			if !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "usage: handler dev") {
				t.Errorf("stderr: got %q, want one line with %q and the usage", stderr, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout: got %q, want nothing", stdout)
			}
		})
	}
}

func TestMainHelp(t *testing.T) {
	code, stdout, _ := runMain(t, "-h")
	if code != ExitOK || !strings.Contains(stdout, "-exit-when-idle") {
		t.Errorf("-h: got %d %q, want 0 and the flags", code, stdout)
	}
}

func TestParseFlagsTimeScale(t *testing.T) {
	tests := []struct {
		args []string
		want float64
	}{
		{nil, DemoTimeScale},
		{[]string{"--scenario", "f.jsonl"}, 1},
		{[]string{"--time-scale", "7"}, 7},
		{[]string{"--scenario", "f.jsonl", "--time-scale", "60"}, 60},
		{[]string{"--time-scale", "1"}, 1},
	}
	for _, tt := range tests {
		c, code := parseFlags(tt.args, &bytes.Buffer{}, &bytes.Buffer{})
		if code != -1 || c.timeScale != tt.want {
			t.Errorf("parseFlags(%q): time scale %v (code %d), want %v", tt.args, c.timeScale, code, tt.want)
		}
	}
}

func TestMainBadScenario(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.jsonl")
	os.WriteFile(path, []byte(`{"sessionId":"o-1","messageId":"a"}`+"\n"+`{"sessionId":"o-1"}`+"\n"), 0o644)
	code, _, stderr := runMain(t, "--scenario", path)
	if code != ExitUsage || !strings.Contains(stderr, path+":2") || !strings.Contains(stderr, "messageId") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("got %d %q, want exit 2 and one line naming %s:2", code, stderr, path)
	}
	code, _, stderr = runMain(t, "--scenario", filepath.Join(t.TempDir(), "missing.jsonl"))
	if code != ExitFailure || !strings.Contains(stderr, "missing.jsonl") {
		t.Errorf("missing file: got %d %q, want exit 1 naming the file", code, stderr)
	}
}

func TestMainUnresolvedSetting(t *testing.T) {
	root := writeApp(t, timerApp("%DEAD_LETTER_SWEEP_SCHEDULE%"))
	t.Setenv("DEAD_LETTER_SWEEP_SCHEDULE", "")
	code, _, stderr := runMain(t, "--app-root", root, "--quiet")
	if code != ExitFailure || !strings.Contains(stderr, "DEAD_LETTER_SWEEP_SCHEDULE") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("got %d %q, want exit 1 and one line naming DEAD_LETTER_SWEEP_SCHEDULE", code, stderr)
	}
}

// TestMainExitWhenIdle runs Main over the fake handler: the invariants hold
// when GetOrder shows the row the messages lead to, and fail (exit 1, the
// violation in the summary) when it does not.
func TestMainExitWhenIdle(t *testing.T) {
	for _, tt := range []struct {
		name     string
		row      bool
		wantCode int
	}{{"invariants hold", true, ExitOK}, {"invariants fail", false, ExitFailure}} {
		t.Run(tt.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodPost:
					reply(w, http.StatusOK, "Applied")
				case r.URL.Path == "/api/orders/o-1" && tt.row:
					w.Header().Set("Content-Type", "application/json")
					json.NewEncoder(w).Encode(OrderRow{Status: "Created", LastSequence: 1})
				default:
					http.NotFound(w, r)
				}
			}))
			defer up.Close()
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			files := appFiles(2)
			files["host.json"] = strings.Replace(files["host.json"], `"bin/handler"`, `"`+exe+`"`, 1)
			root := writeApp(t, files)
			scenarioPath := filepath.Join(root, "w.jsonl")
			os.WriteFile(scenarioPath, []byte(`{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}`+"\n"), 0o644)
			summaryPath := filepath.Join(root, "summary.json")
			t.Setenv(fakehandler.EnvUpstream, up.URL)
			t.Setenv(SettingStoreConnection, "UseDevelopmentStorage=true")

			code, stdout, stderr := runMain(t, "--app-root", root, "--scenario", scenarioPath, "--exit-when-idle",
				"--summary-json", summaryPath, "--http-addr", "127.0.0.1:0", "--quiet")
			if code != tt.wantCode {
				t.Fatalf("exit code: got %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout, stderr)
			}
			data, err := os.ReadFile(summaryPath)
			if err != nil {
				t.Fatal(err)
			}
			var s Summary
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatalf("summary JSON: %v\n%s", err, data)
			}
			if s.Results["Applied"] != 1 || s.Sent != 1 {
				t.Errorf("summary: got %+v, want one message sent and Applied", s)
			}
			for _, key := range []string{`"orders"`, `"results"`, `"parked"`, `"deadLettered"`} {
				if !bytes.Contains(data, []byte(key)) {
					t.Errorf("summary JSON lacks %s:\n%s", key, data)
				}
			}
			if tt.row {
				if len(s.Violations) != 0 || s.Orders["o-1"] != (OrderRow{Status: "Created", LastSequence: 1}) {
					t.Errorf("summary: got %+v, want o-1 Created/1 and no violations", s)
				}
			} else if len(s.Violations) != 1 || !strings.Contains(s.Violations[0], "order o-1: no row") ||
				!strings.Contains(stdout, "order o-1: no row") {
				t.Errorf("violations: got %q (stdout %q), want the missing row reported", s.Violations, stdout)
			}
			if !strings.Contains(stdout, "orders by status") || !strings.Contains(stdout, "messages by result") {
				t.Errorf("stdout lacks the summary table:\n%s", stdout)
			}
		})
	}
}
