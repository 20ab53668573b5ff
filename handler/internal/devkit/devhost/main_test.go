package devhost

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runMainEnv(t, os.Environ(), args...)
}

// runMainEnv is runMain with the settings read from env, not the process's
// environment: a test that can run in parallel.
func runMainEnv(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code = run(ctx, args, env, &out, &errb, DefaultHTTPAddr)
	return code, out.String(), errb.String()
}

// envWith is the process environment with kv's KEY=value settings in place
// of KEY's (an empty value unsets it, as for t.Setenv(KEY, "")).
func envWith(kv ...string) []string {
	env := os.Environ()
	for _, s := range kv {
		k, _, _ := strings.Cut(s, "=")
		env = append(slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }), s)
	}
	return env
}

func TestMainUsage(t *testing.T) {
	t.Parallel()
	existingDir := t.TempDir()
	missingDir := filepath.Join(existingDir, "missing")
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
		{"time scale over the cap", []string{"--time-scale", "10001"}, "at most 10000"},
		{"negative lock", []string{"--lock-duration", "-1s"}, "--lock-duration"},
		// Service Bus refuses these queue settings, so the host does too.
		{"zero lock", []string{"--lock-duration", "0"}, "--lock-duration 0s: Service Bus allows 5s to 5m"},
		{"lock below 5s", []string{"--lock-duration", "4s"}, "--lock-duration 4s: Service Bus allows 5s to 5m"},
		{"lock above 5m", []string{"--lock-duration", "5m1s"}, "--lock-duration 5m1s: Service Bus allows"},
		{"zero max delivery", []string{"--max-delivery", "0"}, "--max-delivery 0: Service Bus allows 1 to 2000"},
		{"max delivery above 2000", []string{"--max-delivery", "2001"}, "--max-delivery 2001: Service Bus allows 1 to 2000"},
		// --summary-json is checked before the run, not after it.
		{"summary in a missing folder", []string{"--summary-json", missingDir + "/out.json"},
			"--summary-json " + missingDir + "/out.json: folder " + missingDir + " does not exist"},
		{"summary is a folder", []string{"--summary-json", existingDir}, "--summary-json " + existingDir + ": is a directory"},
		{"app root without host.json", []string{"--app-root", existingDir}, "--app-root " + existingDir + ": no host.json there"},
		{"front address without a port", []string{"--http-addr", "localhost"}, "--http-addr localhost: want host:port"},
		{"front port not a number", []string{"--http-addr", "127.0.0.1:http"}, `port "http" is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, tt.args...)
			if code != ExitUsage {
				t.Errorf("exit code: got %d, want %d", code, ExitUsage)
			}
			if !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "usage: orderstatus-dev dev") {
				t.Errorf("stderr: got %q, want one line with %q and the usage", stderr, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout: got %q, want nothing", stdout)
			}
		})
	}
}

func TestMainHelp(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runMain(t, "-h")
	if code != ExitOK || !strings.Contains(stdout, "-exit-when-idle") {
		t.Errorf("-h: got %d %q, want 0 and the flags", code, stdout)
	}
}

func TestParseFlagsTimeScale(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want float64
	}{
		{nil, 1}, // the built-in demo runs in real time too
		{[]string{"--scenario", "f.jsonl"}, 1},
		{[]string{"--time-scale", "7"}, 7},
		{[]string{"--scenario", "f.jsonl", "--time-scale", "60"}, 60},
		{[]string{"--time-scale", "1"}, 1},
	}
	for _, tt := range tests {
		c, code := parseFlags(tt.args, &bytes.Buffer{}, &bytes.Buffer{}, DefaultHTTPAddr)
		if code != -1 || c.timeScale != tt.want {
			t.Errorf("parseFlags(%q): time scale %v (code %d), want %v", tt.args, c.timeScale, code, tt.want)
		}
	}
}

func TestMainBadScenario(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "w.jsonl")
	os.WriteFile(path, []byte(`{"sessionId":"o-1","messageId":"a"}`+"\n"+`{"messageId":"b"}`+"\n"), 0o644)
	code, _, stderr := runMain(t, "--scenario", path)
	if code != ExitUsage || !strings.Contains(stderr, path+":2") || !strings.Contains(stderr, "sessionId") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("got %d %q, want exit 2 and one line naming %s:2", code, stderr, path)
	}
	code, _, stderr = runMain(t, "--scenario", filepath.Join(t.TempDir(), "missing.jsonl"))
	if code != ExitUsage || !strings.Contains(stderr, "missing.jsonl") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("missing file: got %d %q, want exit 2 and one line naming the file", code, stderr)
	}
	big := `{"sessionId":"o-1","messageId":"big","body":"` + strings.Repeat("x", 300*1024) + `"}`
	os.WriteFile(path, []byte(`{"sessionId":"o-1","messageId":"a"}`+"\n"+big+"\n"), 0o644)
	code, _, stderr = runMain(t, "--scenario", path)
	if code != ExitUsage || !strings.Contains(stderr, path+":2") || !strings.Contains(stderr, "limit") {
		t.Errorf("message over 256 KiB: got %d %q, want exit 2 naming %s:2", code, stderr, path)
	}
}

func TestMainUnresolvedSetting(t *testing.T) {
	t.Parallel()
	root := writeApp(t, timerApp("%DEAD_LETTER_SWEEP_SCHEDULE%"))
	code, _, stderr := runMainEnv(t, envWith("DEAD_LETTER_SWEEP_SCHEDULE="), "--app-root", root, "--quiet")
	if code != ExitFailure || !strings.Contains(stderr, "DEAD_LETTER_SWEEP_SCHEDULE") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("got %d %q, want exit 1 and one line naming DEAD_LETTER_SWEEP_SCHEDULE", code, stderr)
	}
}

// TestMainExitWhenIdle runs Main over the fake handler: the invariants hold
// when GetOrder shows the row the messages lead to, and fail (exit 1, the
// violation in the summary) when it does not.
func TestMainExitWhenIdle(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		row      bool
		wantCode int
	}{{"invariants hold", true, ExitOK}, {"invariants fail", false, ExitFailure}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
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
			env := envWith(fakeUpstream+"="+up.URL, SettingStoreConnection+"=UseDevelopmentStorage=true")

			code, stdout, stderr := runMainEnv(t, env, "--app-root", root, "--scenario", scenarioPath, "--exit-when-idle",
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
			if s.Results["Applied"] != 1 {
				t.Errorf("summary: got %+v, want one message Applied", s)
			}
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(data, &keys); err != nil || len(keys) != 8 || keys["orders"] == nil || keys["results"] == nil ||
				keys["parked"] == nil || keys["deadLettered"] == nil || keys["archived"] == nil || keys["accounting"] == nil || keys["instances"] == nil || keys["outages"] == nil {
				t.Errorf("summary JSON: want exactly orders, results, parked, deadLettered, archived, accounting, instances, outages:\n%s", data)
			}
			// One instance per group: OrderStatus took the message, the
			// HTTP instance the summary's reads.
			if len(s.Instances) != 2 || s.Instances[0].ID != "OrderStatus-1" || s.Instances[0].Group != "function:OrderStatus" ||
				s.Instances[0].Invocations != 1 || s.Instances[0].Results["Applied"] != 1 ||
				s.Instances[1].ID != "http-1" || s.Instances[1].Group != "http" || s.Instances[1].Invocations != 0 {
				t.Errorf("summary instances: got %+v, want OrderStatus-1 with one call, Applied, and http-1 with none", s.Instances)
			}
			if tt.row {
				if s.Orders["o-1"] != (OrderRow{Status: "Created", LastSequence: 1}) || !strings.Contains(stdout, "invariants: all hold") {
					t.Errorf("summary: got %+v (stdout %q), want o-1 Created/1 and no violations", s, stdout)
				}
			} else if !strings.Contains(stdout, "order o-1: no row") {
				t.Errorf("stdout %q, want the missing row reported", stdout)
			}
			if !strings.Contains(stdout, "HTTP front on http://127.0.0.1:") || strings.Contains(stderr, "HTTP front") {
				t.Errorf("want the front's address on stdout (progress) under --quiet, not on stderr (warnings):\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			if !strings.Contains(stdout, "orders by status") || !strings.Contains(stdout, "handler calls by result") ||
				!strings.Contains(stdout, "all 1 accounted for") {
				t.Errorf("stdout lacks the summary table:\n%s", stdout)
			}
		})
	}
}

// TestParseFlagsQueueLimits: the bounds Service Bus accepts are accepted.
func TestParseFlagsQueueLimits(t *testing.T) {
	t.Parallel()
	summary := filepath.Join(t.TempDir(), "summary.json")
	tests := []struct {
		args     []string
		wantLock time.Duration
		wantMax  int
	}{
		{[]string{"--lock-duration", "5s", "--max-delivery", "1"}, 5 * time.Second, 1},
		{[]string{"--lock-duration", "5m", "--max-delivery", "2000"}, 5 * time.Minute, 2000},
		{[]string{"--summary-json", summary}, 0, 0}, // 0: the deployed defaults
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		c, code := parseFlags(tt.args, &bytes.Buffer{}, &stderr, DefaultHTTPAddr)
		if code != -1 || c.lockDuration != tt.wantLock || c.maxDelivery != tt.wantMax {
			t.Errorf("parseFlags(%q): lock %v, max delivery %d, code %d (%s); want %v, %d, -1",
				tt.args, c.lockDuration, c.maxDelivery, code, stderr.String(), tt.wantLock, tt.wantMax)
		}
	}
	if _, err := os.Stat(summary); !os.IsNotExist(err) {
		t.Errorf("checking --summary-json left a file at %s (%v)", summary, err)
	}
}

// TestMainBadScalePlan: a scale event that cannot happen (an instance not
// running then, the last one removed, too many) is a usage error before
// anything starts: exit 2, one line naming the event, no start-up line.
func TestMainBadScalePlan(t *testing.T) {
	t.Parallel()
	app := writeApp(t, appFiles(1))
	scaleFile := filepath.Join(t.TempDir(), "scale.jsonl")
	if err := os.WriteFile(scaleFile, []byte(`{"scale":"add","sendAfter":"1m"}`+"\n"+`{"scale":"kill","instance":4,"sendAfter":"2m"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"kill an instance that never runs", []string{"--instances", "2", "--scale", "kill:9@1m"},
			"--scale kill:9@1m (at 1m0s): kill: OrderStatus-9 is not running then (running in function:OrderStatus: OrderStatus-1, OrderStatus-2)"},
		{"remove one twice", []string{"--instances", "3", "--scale", "remove:2@1m,kill:OrderStatus-2@2m"},
			"--scale kill:OrderStatus-2@2m (at 2m0s): kill: OrderStatus-2 is not running then (running in function:OrderStatus: OrderStatus-1, OrderStatus-3)"},
		{"the last instance", []string{"--scale", "remove@1m"}, "remove: OrderStatus-1 is the last running instance of function:OrderStatus"},
		{"the last of a group", []string{"--instances", "3", "--scale", "kill:http@1m"}, "kill: http-1 is the last running instance of http"},
		{"too many", []string{"--instances", "16", "--scale", "add@1m"}, "add: 17 instances of function:OrderStatus would be running, at most 16"},
		{"a group the app lacks", []string{"--scale", "add:Nope@1m"}, `add: "Nope" is not a group of the app (OrderStatus, http)`},
		{"an instance of no group", []string{"--scale", "kill:instance-1@1m"}, `"instance-1" is neither a group (OrderStatus, http) nor an instance id such as OrderStatus-1`},
		{"instances of a group the app lacks", []string{"--instances", "DeadLetterSweeper=2"}, `no such instance group: "DeadLetterSweeper" (the app's groups: OrderStatus, http)`},
		{"a scenario's scale line", []string{"--scenario", scaleFile}, "scale.jsonl:2 (at 2m0s): kill: OrderStatus-4 is not running then (running in function:OrderStatus: OrderStatus-1, OrderStatus-2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, append([]string{"--app-root", app, "--exit-when-idle"}, tt.args...)...)
			if code != ExitUsage || stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing on stdout", code, stdout, ExitUsage)
			}
			if !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr %q, want one line with %q", stderr, tt.want)
			}
		})
	}
	// What can happen passes the check: kill the added one, then remove
	// by number; scale the HTTP group out and in.
	h, err := New(Options{AppRoot: app, Env: []string{}, HTTPAddr: "off", Instances: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CheckScale(mergeScale(nil, mustScale(t, "add@1m,kill:3@2m,remove:1@3m,add:http@4m,remove:http-1@5m"))); err != nil {
		t.Errorf("CheckScale on a possible plan: %v", err)
	}
}

func mustScale(t *testing.T, s string) []ScenarioLine {
	t.Helper()
	l, err := ParseScale(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestClockLine(t *testing.T) {
	t.Parallel()
	wall := time.Date(2026, 12, 1, 8, 7, 0, 0, time.UTC)
	if got := clockLine(wall, wall, 1); got != "" {
		t.Errorf("real time: %q, want no line", got)
	}
	got := clockLine(wall.Add(30*time.Minute+2*time.Second), wall, 120)
	want := "clock: the broker's clock says 08:37:02Z, 30m2s ahead of your watch (08:07:00Z), and keeps running 120 times faster"
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "the due times, enqueued times and ages the CLIs show for this host are on it") {
		t.Errorf("clockLine = %q, want it to start %q and say what is on that clock", got, want)
	}
}
