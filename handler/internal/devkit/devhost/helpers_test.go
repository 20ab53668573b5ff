package devhost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// mainArg as the first argument makes the test binary run Main with the
// rest of its arguments: `orderstatus-dev dev` as a process of its own.
const mainArg = "devhost-test-main"

func TestMain(m *testing.M) {
	fakeAzuriteMain() // when re-executed as Azurite
	if len(os.Args) > 1 && os.Args[1] == mainArg {
		os.Exit(Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	fakeHandlerMain() // when re-executed as the fake handler
	os.Exit(testenv.Main(m))
}

// appFiles returns a minimal app: host.json with the given Service Bus
// concurrency, the OrderStatus session trigger and the GetOrder and
// Metrics HTTP functions.
func appFiles(maxSessions int) map[string]string {
	return map[string]string{
		"host.json": fmt.Sprintf(`{"version":"2.0","functionTimeout":"00:00:30",
		  "customHandler":{"description":{"defaultExecutablePath":"bin/handler"},"enableForwardingHttpRequest":true},
		  "extensions":{"http":{"routePrefix":"api"},"serviceBus":{"maxConcurrentSessions":%d,"maxConcurrentCallsPerSession":1,
		    "sessionIdleTimeout":"00:00:01","maxAutoLockRenewalDuration":"00:05:00"}}}`, maxSessions),
		"functions/OrderStatus/function.json": `{"bindings":[{"type":"serviceBusTrigger","direction":"in","name":"message",
		  "queueName":"%ORDER_STATUS_QUEUE%","connection":"ServiceBusConnection","isSessionsEnabled":true,"dataType":"binary"}]}`,
		"functions/GetOrder/function.json": `{"bindings":[{"type":"httpTrigger","direction":"in","name":"req","authLevel":"function",
		  "methods":["get"],"route":"orders/{orderId}"},{"type":"http","direction":"out","name":"res"}]}`,
		"functions/Metrics/function.json": `{"bindings":[{"type":"httpTrigger","direction":"in","name":"req","authLevel":"function",
		  "methods":["get"],"route":"metrics"},{"type":"http","direction":"out","name":"res"}]}`,
	}
}

func writeApp(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// upstream is the test's side of the fake handler: every request the
// handler process receives (except GET /) arrives here.
type upstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	fn  http.HandlerFunc
}

func (u *upstream) set(fn http.HandlerFunc) {
	u.mu.Lock()
	u.fn = fn
	u.mu.Unlock()
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	fn := u.fn
	u.mu.Unlock()
	if fn == nil {
		http.NotFound(w, r)
		return
	}
	fn(w, r)
}

// testHost starts a host on files with the fake handler and returns it and
// the upstream. The store setting is a placeholder (no Azurite).
func testHost(t *testing.T, files map[string]string, tweak func(*Options)) (*Host, *upstream) {
	t.Helper()
	up := &upstream{}
	up.srv = httptest.NewServer(up)
	t.Cleanup(up.srv.Close)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		AppRoot:     writeApp(t, files),
		HandlerPath: exe,
		Env:         []string{"PATH=" + os.Getenv("PATH")},
		Settings: map[string]string{
			fakeUpstream:           up.srv.URL,
			SettingStoreConnection: "UseDevelopmentStorage=true",
		},
		HTTPAddr:     "127.0.0.1:0",
		Stderr:       os.Stderr,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		DrainTimeout: 2 * time.Second,
	}
	if tweak != nil {
		tweak(&opts)
	}
	h, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, up
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// reply answers as the real handler does.
func reply(w http.ResponseWriter, status int, result string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"Outputs": map[string]any{}, "Logs": []string{}, "ReturnValue": map[string]any{"result": result}})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds, failing the test after a generous
// bound (a guard against hanging, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func statusLine(session, id, status string, seq int) ScenarioLine {
	return ScenarioLine{
		Subject: "OrderStatusChanged", SessionID: session, MessageID: id, ContentType: "application/json",
		Body: []byte(fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d}`, session, status, seq)),
	}
}
