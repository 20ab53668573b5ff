package devhost

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
)

// mainApp writes an app whose handler is the fake handler (this test
// binary) and returns its root.
func mainApp(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files := appFiles(2)
	files["host.json"] = strings.Replace(files["host.json"], `"bin/handler"`, `"`+exe+`"`, 1)
	return writeApp(t, files)
}

// writeScenario writes lines to a scenario file in dir.
func writeScenario(t *testing.T, dir string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, "w.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// orderUpstream answers every invocation Applied and GetOrder for o-1 with
// row (404 when row is nil).
func orderUpstream(t *testing.T, row *OrderRow) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			reply(w, http.StatusOK, "Applied")
		case r.URL.Path == "/api/orders/o-1" && row != nil:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(row)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// TestMainExitWhenIdleFastForwards is what the acceptance check does: a
// scenario with a 30-minute schedule, in real time, with --exit-when-idle.
// It must finish at once, with the harmless oddities of the file (an
// unknown field, no messageId, nulls) only warned about, and the handler's
// own output on stderr.
func TestMainExitWhenIdleFastForwards(t *testing.T) {
	t.Parallel()
	root := mainApp(t)
	up := orderUpstream(t, &OrderRow{Status: "Cancelled", LastSequence: 1})
	env := envWith(fakeUpstream+"="+up.URL, fakeLogLine+`={"msg":"fake handler log line"}`, SettingStoreConnection+"=UseDevelopmentStorage=true")
	scenarioPath := writeScenario(t, root,
		`{"subject":"OrderStatusChanged","sessionId":"o-1","body":{"orderId":"o-1","status":"Created","sequence":1},"note":"x","scheduleAfter":null}`,
		`{"subject":"PaymentTimeoutCheck","sessionId":"o-1","messageId":"o-1:payment-timeout","body":{"orderId":"o-1"},"scheduleAfter":"30m","note":"y","applicationProperties":{"gone":null}}`)
	summaryPath := filepath.Join(root, "summary.json")

	code, stdout, stderr := runMainEnv(t, env, "--app-root", root, "--scenario", scenarioPath, "--exit-when-idle",
		"--summary-json", summaryPath, "--http-addr", "127.0.0.1:0")
	if code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// Progress on stdout; warnings (and the handler's own output, by
	// default) on stderr.
	for _, want := range []string{"idle: fast-forwarded the clock ", " to the next scheduled message"} {
		if !strings.Contains(stdout, want) || strings.Contains(stderr, want) {
			t.Errorf("want %q on stdout only:\nstdout:\n%s\nstderr:\n%s", want, stdout, stderr)
		}
	}
	for _, want := range []string{
		`unknown field "note" ignored`, `no messageId; sending it as "w.jsonl:1"`,
		"fake handler log line",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "last scheduled message is due") {
		t.Errorf("stderr: the note about the last scheduled message is moot when fast-forwarding:\n%s", stderr)
	}
	if strings.Count(stderr, "unknown field") != 1 {
		t.Errorf("stderr: want the unknown field reported once:\n%s", stderr)
	}
	if strings.Contains(stdout, "fake handler log line") {
		t.Errorf("the handler's output reached stdout:\n%s", stdout)
	}
	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	want := Summary{Orders: map[string]OrderRow{"o-1": {Status: "Cancelled", LastSequence: 1}}, Results: map[string]int{"Applied": 2},
		Parked: []Entry{}, DeadLettered: []Entry{}, Archived: []Entry{}, Accounting: Accounting{Sent: 2, Completed: map[string]int{"Applied": 2}},
		Instances: []InstanceSummary{
			{ID: "OrderStatus-1", Group: "function:OrderStatus", State: InstanceRunning, Invocations: 2, Results: map[string]int{"Applied": 2}, HandlerStarts: 1},
			{ID: "http-1", Group: HTTPGroup, State: InstanceRunning, Results: map[string]int{}, HandlerStarts: 1},
		},
		Outages: []OutageSummary{}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("summary:\n got %+v\nwant %+v", s, want)
	}
}

// TestMainFrontAddress: with --exit-when-idle and no --http-addr, a busy
// default address falls back to a free port (and says so); an explicit
// busy address fails the run before anything starts, Azurite included.
func TestMainFrontAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyAddr := busy.Addr().String()
	root := mainApp(t)
	up := orderUpstream(t, &OrderRow{Status: "Created", LastSequence: 1})
	t.Setenv(fakeUpstream, up.URL)
	t.Setenv(SettingStoreConnection, "UseDevelopmentStorage=true")
	scenarioPath := writeScenario(t, root,
		`{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var out, errb bytes.Buffer
	code := run(ctx, []string{"--app-root", root, "--scenario", scenarioPath, "--exit-when-idle", "--quiet"}, os.Environ(), &out, &errb, busyAddr)
	if code != ExitOK || !strings.Contains(errb.String(), "warning: "+busyAddr+" is in use; the HTTP front is on http://127.0.0.1:") ||
		!strings.Contains(out.String(), "HTTP front on http://127.0.0.1:") {
		t.Errorf("default address busy: exit %d\nstdout:\n%s\nstderr:\n%s\nwant 0, a warning naming the fallback address, and the address on stdout", code, out.String(), errb.String())
	}

	t.Run("explicit address", func(t *testing.T) {
		// No store configured and no Azurite to start: the busy address
		// must be what fails.
		t.Setenv(SettingStoreConnection, "")
		t.Setenv(azurite.EnvBinary, filepath.Join(t.TempDir(), "no-azurite-here"))
		var out, errb bytes.Buffer
		code := run(ctx, []string{"--app-root", root, "--scenario", scenarioPath, "--exit-when-idle", "--quiet", "--http-addr", busyAddr},
			os.Environ(), &out, &errb, busyAddr)
		if code != ExitFailure || !strings.Contains(errb.String(), "HTTP front on "+busyAddr) || strings.Contains(errb.String(), "Azurite") ||
			!strings.Contains(errb.String(), `make run ARGS="--http-addr 127.0.0.1:PORT"`) {
			t.Errorf("explicit address busy: exit %d, stderr:\n%s\nwant 1 naming the address and how to pick another, before any Azurite", code, errb.String())
		}
	})
}

// TestMainStoreDies: when the Azurite the host started dies mid-run, the
// run fails at once with a line saying so, instead of retrying the
// messages into the dead-letter queue.
func TestMainStoreDies(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dieFile := filepath.Join(t.TempDir(), "die")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			_ = os.WriteFile(dieFile, nil, 0o644) // the store dies during the call
			select {
			case <-r.Context().Done():
			case <-time.After(500 * time.Millisecond):
			}
			reply(w, http.StatusServiceUnavailable, "")
			return
		}
		http.NotFound(w, r)
	}))
	defer up.Close()
	root := mainApp(t)
	t.Setenv(fakeUpstream, up.URL)
	t.Setenv(SettingStoreConnection, "")
	t.Setenv(SettingStoreServiceURI, "")
	t.Setenv(azurite.EnvBinary, exe)
	t.Setenv(fakeAzuriteDieFile, dieFile)
	scenarioPath := writeScenario(t, root,
		`{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}`)

	code, stdout, stderr := runMain(t, "--app-root", root, "--scenario", scenarioPath, "--exit-when-idle", "--http-addr", "127.0.0.1:0", "--quiet")
	if code != ExitFailure || !strings.Contains(stderr, "Azurite, the store on 127.0.0.1:") || !strings.Contains(stderr, "exited") {
		t.Errorf("exit %d, want 1 and a line saying Azurite exited\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "dead-lettered by reason") {
		t.Errorf("a summary was printed for a run whose store died:\n%s", stdout)
	}
}

func TestAzuriteDirs(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(t.TempDir(), "app")
	got := azuriteDirs(app, "bin/handler")
	want := []string{wd, app, filepath.Dir(exe), filepath.Join(app, "bin")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("azuriteDirs:\n got %q\nwant %q (working directory, app root, executable's and handler's directories)", got, want)
	}
	if got := azuriteDirs(app, "/opt/handler/handler"); got[len(got)-1] != "/opt/handler" {
		t.Errorf("azuriteDirs with an absolute handler: got %q, want it to end with /opt/handler", got)
	}
}

// notifyWriter calls fn with everything written so far after each write.
type notifyWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	fn  func(string)
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.fn(w.buf.String())
	return len(p), nil
}

// TestMainNotesLateScheduleWhenQuiet: without --exit-when-idle the clock
// runs in real time, and a scenario that will take hours says so on
// stderr even with --quiet.
func TestMainNotesLateScheduleWhenQuiet(t *testing.T) {
	t.Parallel()
	root := mainApp(t)
	up := orderUpstream(t, nil)
	env := envWith(fakeUpstream+"="+up.URL, SettingStoreConnection+"=UseDevelopmentStorage=true")
	scenarioPath := writeScenario(t, root,
		`{"subject":"PaymentTimeoutCheck","sessionId":"o-1","messageId":"o-1:payment-timeout","body":{"orderId":"o-1"},"scheduleAfter":"2h"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const want = "the last scheduled message is due 2h0m0s after it is sent"
	errw := &notifyWriter{fn: func(s string) {
		if strings.Contains(s, want) {
			cancel() // seen: Ctrl-C
		}
	}}
	var out bytes.Buffer
	code := run(ctx, []string{"--app-root", root, "--scenario", scenarioPath, "--http-addr", "127.0.0.1:0", "--quiet"}, env, &out, errw, DefaultHTTPAddr)
	errw.mu.Lock()
	stderr := errw.buf.String()
	errw.mu.Unlock()
	if code != ExitOK || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant 0 after the note %q", code, stderr, want)
	}
}
