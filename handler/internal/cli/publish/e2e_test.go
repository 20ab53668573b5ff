package publish

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/sim"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// repoRoot is the repository root, seen from this package.
const repoRoot = "../../../.."

// e2eTimeScale runs the development host's broker 300 times faster: a
// 30 minute payment timeout fires after 6 s. The lock duration is the
// longest Service Bus allows (5 min on that clock is 1 s), so that no call
// outlives its lock.
const e2eTimeScale = 300

// liveHost is a `orderstatus-dev dev` running the real bin/handler against
// Azurite, in this process, as `make run` does, with an app root of its
// own (bin/handler links to the built binary).
type liveHost struct {
	app, handlerLog string
	ep              devrun.Endpoints
	broker          *loopback.Client
	out             *sim.SyncBuffer // the host's stdout
}

// startLiveHost starts the host with its broker clock scale times faster
// than real time (1: real time, as `make run`), with no workload.
func startLiveHost(t *testing.T, scale float64) *liveHost { return startHost(t, scale, false) }

// startHost starts the host; with demo it plays the built-in demo, as
// `make run` does, instead of no workload.
func startHost(t *testing.T, scale float64, demo bool) *liveHost {
	t.Helper()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	cs := testenv.Azurite(t)
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	t.Setenv(devhost.SettingStoreConnection, cs)
	t.Setenv("OrderStore__tableName", fmt.Sprintf("publish%x", suffix))
	t.Setenv("LOG_LEVEL", "info")
	t.Setenv("ServiceBusConnection__fullyQualifiedNamespace", "")

	app := t.TempDir()
	copyFile := func(rel string) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(app, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("host.json")
	copyFile("local.settings.json.template")
	fns, _ := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	for _, f := range fns {
		rel, _ := filepath.Rel(root, f)
		copyFile(rel)
	}
	if err := os.MkdirAll(filepath.Join(app, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(handler, filepath.Join(app, "bin", "handler")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testenv.Tools(t, repoRoot), filepath.Join(app, "bin", "orderstatus")); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := &liveHost{app: app, handlerLog: filepath.Join(t.TempDir(), "handler.log"), out: &sim.SyncBuffer{}}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	errOut := &sim.SyncBuffer{}
	args := []string{"--app-root", app, "--time-scale", fmt.Sprint(scale),
		"--lock-duration", "5m", "--http-addr", "127.0.0.1:0", "--handler-log", h.handlerLog, "--quiet"}
	if !demo {
		args = append(args, "--scenario", empty)
	}
	go func() { done <- devhost.Main(ctx, args, h.out, errOut) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the development host did not stop")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		ep, err := devrun.Find(app)
		if err == nil && ep.PID == os.Getpid() && ep.HTTPAddr != "" {
			h.ep = ep
			break
		}
		select {
		case code := <-done:
			t.Fatalf("the development host exited %d before it was ready: %s", code, errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the development host did not announce itself: %v", err)
		}
	}
	b, err := loopback.NewClient(h.ep.BrokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.broker = b
	// The handler is ready once the front answers for an unknown order.
	h.waitOrder(t, "e2e-ready", func(code int, _ orderView, _ string) bool { return code == http.StatusNotFound })
	return h
}

// appFiles are what the app root holds before the walkthrough runs.
var appFiles = []string{"host.json", "local.settings.json.template", "functions", "bin", devrun.Dir}

// demoCount is the number on the summary line that starts with label
// (two-space indented, as the host prints it), 0 if there is none.
func demoCount(out, label string) int {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "  "+label+" "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rest))
			return n
		}
	}
	return 0
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// publish runs `bin/orderstatus publish args...` in the app root, as a user
// in the checkout would, with no Service Bus setting.
func (h *liveHost) publish(t *testing.T, args ...string) result {
	t.Helper()
	return h.shell(t, nil, append([]string{"bin/orderstatus", "publish"}, args...)...)
}

func (h *liveHost) shell(t *testing.T, env []string, argv ...string) result {
	t.Helper()
	// Longer than any --timeout of the walkthrough's waits, which bound
	// themselves.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = h.app
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + h.app}, env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{code: 0, stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%v: %v", argv, err)
	}
	return r
}

type orderView struct {
	OrderID      string `json:"orderId"`
	Status       string `json:"status"`
	LastSequence int64  `json:"lastSequence"`
}

func (h *liveHost) getOrder(t *testing.T, id string) (int, orderView, string) {
	t.Helper()
	resp, err := http.Get("http://" + h.ep.HTTPAddr + "/api/orders/" + id)
	if err != nil {
		return 0, orderView{}, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v orderView
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v, string(b)
}

// waitOrder polls GET /api/orders/{id} until ok holds, failing after a
// generous bound (a guard against hanging, not a timing assertion).
func (h *liveHost) waitOrder(t *testing.T, id string, ok func(code int, v orderView, body string) bool) orderView {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		code, v, body := h.getOrder(t, id)
		if ok(code, v, body) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s: still %d %s\nhandler log (tail):\n%s", id, code, body, h.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *liveHost) waitStatus(t *testing.T, id, status string, seq int64) {
	t.Helper()
	h.waitOrder(t, id, func(code int, v orderView, _ string) bool {
		return code == http.StatusOK && v.Status == status && v.LastSequence == seq
	})
}

func (h *liveHost) log() string {
	b, _ := os.ReadFile(h.handlerLog)
	return string(b)
}

func (h *liveHost) logTail() string {
	s := h.log()
	if len(s) > 3000 {
		s = s[len(s)-3000:]
	}
	return s
}

// results returns the results the handler logged for messageID, one per
// call.
func (h *liveHost) results(messageID string) []string {
	var out []string
	for _, l := range strings.Split(h.log(), "\n") {
		var e struct {
			MessageID string `json:"message_id"`
			Result    string `json:"result"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.MessageID == messageID && e.Result != "" {
			out = append(out, e.Result)
		}
	}
	return out
}

// handled reports whether the handler logged a call for messageID.
func (h *liveHost) handled(messageID string) bool { return len(h.results(messageID)) > 0 }

// brokerNow is the development broker's own clock (its /broker/now);
// its clients see real time.
func (h *liveHost) brokerNow(t *testing.T) time.Time {
	t.Helper()
	resp, err := http.Post(h.ep.BrokerURL+"/broker/now", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var now struct{ Now time.Time }
	if err := json.NewDecoder(resp.Body).Decode(&now); err != nil {
		t.Fatal(err)
	}
	return now.Now
}

// waitBrokerTime waits until the broker's clock has passed d after now on
// it.
func (h *liveHost) waitBrokerTime(t *testing.T, d time.Duration) {
	t.Helper()
	start := h.brokerNow(t)
	for {
		now := h.brokerNow(t)
		if now.Sub(start) >= d {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustOK(t *testing.T, what string, r result) result {
	t.Helper()
	if r.code != ExitOK {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
	}
	return r
}

var seqLine = regexp.MustCompile(`^(\d+)\n$`)

// TestEndToEndDevHost drives the walkthrough's producer side through the
// real handler binary, the development host and Azurite.
func TestEndToEndDevHost(t *testing.T) {
	h := startLiveHost(t, e2eTimeScale)

	t.Run("paid cancels the timeout, which never arrives", func(t *testing.T) {
		// Let the broker's clock get 40 minutes ahead of the real one, so
		// that scheduling on the wrong clock shows. (Before Created: an
		// order left unpaid that long is cancelled by the check the
		// handler schedules itself when it applies the Created.)
		for {
			if h.brokerNow(t).Sub(time.Now()) >= 40*time.Minute {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The producer schedules its check before the handler applies
		// the Created: the handler's own check (the same MessageId) is
		// then the one duplicate detection drops, and the producer's
		// cancel finds its own. (Scheduled the other way round, the
		// producer's would be dropped, its cancel would find nothing,
		// harmlessly, and the handler's check would find the order paid.)
		r := mustOK(t, "timeout", h.publish(t, "timeout", "--order", "e2e-paid", "--after", "30m"))
		m := seqLine.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("timeout printed %q, want the sequence number alone", r.stdout)
		}
		// Due 30 minutes after the CLI's now: the broker's clock, 40
		// minutes ahead and 300 times faster, does not show.
		sent := time.Now()
		at := regexp.MustCompile(`for (\S+) \(in 30m0s on the broker's clock, which runs 300 times faster than your watch here: due in 6s by it\)`).FindStringSubmatch(r.stderr)
		if at == nil {
			t.Fatalf("timeout's line %q does not say when it is due", r.stderr)
		}
		due, err := time.Parse(time.RFC3339, at[1])
		if err != nil {
			t.Fatal(err)
		}
		if d := sent.Add(30 * time.Minute).Sub(due); d < -5*time.Second || d > 5*time.Second {
			t.Fatalf("due at %v, want 30m after the CLI's now (%v), not after the broker's (%v)", due, sent.UTC(), h.brokerNow(t))
		}
		mustOK(t, "status Created", h.publish(t, "status", "--order", "e2e-paid", "--status", "Created", "--sequence", "1"))
		mustOK(t, "status Paid", h.publish(t, "status", "--order", "e2e-paid", "--status", "Paid", "--sequence", "2"))
		h.waitStatus(t, "e2e-paid", "Paid", 2)
		r = mustOK(t, "cancel", h.publish(t, "cancel-timeout", "--sequence", m[1]))
		if !strings.HasPrefix(r.stdout, "cancelled scheduled message "+m[1]) {
			t.Fatalf("cancel-timeout printed %q, want it cancelled (if it says nothing to cancel, the timeout was scheduled on the wrong clock)", r.stdout)
		}
		h.waitBrokerTime(t, 35*time.Minute) // past when it was due
		if h.handled("e2e-paid:payment-timeout-1") {
			t.Errorf("the cancelled timeout reached the handler:\n%s", h.logTail())
		}
		if code, v, body := h.getOrder(t, "e2e-paid"); code != http.StatusOK || v.Status != "Paid" || v.LastSequence != 2 {
			t.Errorf("order after the due time: %d %s, want Paid at sequence 2", code, body)
		}
	})

	t.Run("cancel after it became visible says so; the order stays Paid", func(t *testing.T) {
		mustOK(t, "status Created", h.publish(t, "status", "--order", "e2e-race", "--status", "Created", "--sequence", "1"))
		mustOK(t, "status Paid", h.publish(t, "status", "--order", "e2e-race", "--status", "Paid", "--sequence", "2"))
		h.waitStatus(t, "e2e-race", "Paid", 2)
		r := mustOK(t, "timeout", h.publish(t, "timeout", "--order", "e2e-race", "--after", "1m"))
		m := seqLine.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("timeout printed %q, want the sequence number alone", r.stdout)
		}
		deadline := time.Now().Add(45 * time.Second)
		for !h.handled("e2e-race:payment-timeout-1") {
			if time.Now().After(deadline) {
				t.Fatalf("the timeout never reached the handler:\n%s", h.logTail())
			}
			time.Sleep(50 * time.Millisecond)
		}
		r = mustOK(t, "cancel", h.publish(t, "cancel-timeout", "--sequence", m[1]))
		if !strings.HasPrefix(r.stdout, "nothing to cancel: no scheduled message "+m[1]) || !strings.Contains(r.stdout, "delivered or cancelled already") {
			t.Errorf("cancel-timeout after delivery printed %q, want the nothing-to-cancel line", r.stdout)
		}
		if code, v, body := h.getOrder(t, "e2e-race"); code != http.StatusOK || v.Status != "Paid" || v.LastSequence != 2 {
			t.Errorf("order after its timeout: %d %s, want Paid at sequence 2", code, body)
		}
	})

	t.Run("created only: the timeout cancels the order", func(t *testing.T) {
		mustOK(t, "status Created", h.publish(t, "status", "--order", "e2e-unpaid", "--status", "Created", "--sequence", "1",
			"--occurred-at", "2026-11-29T10:00:00Z"))
		mustOK(t, "timeout", h.publish(t, "timeout", "--order", "e2e-unpaid"))
		// Created days ago: the handler's own check is due at once.
		h.waitStatus(t, "e2e-unpaid", "Cancelled", 1)
	})

	t.Run("status from a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "changes.jsonl")
		lines := `{"orderId":"e2e-file-1","status":"Created","sequence":1}
{"orderId":"e2e-file-2","status":"Created","sequence":1}
{"orderId":"e2e-file-1","status":"Shipped","sequence":3}
{"orderId":"e2e-file-1","status":"Paid","sequence":2}
{"orderId":"e2e-file-2","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:04:00+01:00"}
`
		if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		r := mustOK(t, "status --from", h.publish(t, "status", "--from", path))
		if !strings.Contains(r.stdout, "sent 5/5") || !strings.HasSuffix(r.stdout, "sent 5 status changes\n") {
			t.Errorf("stdout %q, want a progress line and the closing count", r.stdout)
		}
		h.waitStatus(t, "e2e-file-1", "Shipped", 3)
		h.waitStatus(t, "e2e-file-2", "Paid", 2)
		// Sent in sequence order: each change was applied, none stale.
		for _, id := range []string{"e2e-file-1:1", "e2e-file-1:2", "e2e-file-1:3", "e2e-file-2:1", "e2e-file-2:2"} {
			if got := h.results(id); len(got) == 0 || got[0] != "Applied" {
				t.Errorf("%s: handler results %v, want Applied first (sent in sequence order)", id, got)
			}
		}
	})
}

// TestReadmeWalkthrough runs the README's walkthrough against a host in
// real time, as `make run` leaves it: after the built-in demo. Lines are
// typed at once, or ORDERSTATUS_README_PACE apart (a person's pace, e.g.
// 10s: `make soak` runs it so); every comment must hold either way.
func TestReadmeWalkthrough(t *testing.T) {
	var pace time.Duration
	if v := os.Getenv("ORDERSTATUS_README_PACE"); v != "" {
		var err error
		if pace, err = time.ParseDuration(v); err != nil || pace < 0 {
			t.Fatalf("ORDERSTATUS_README_PACE=%q: want a duration such as 10s", v)
		}
	}
	h := startHost(t, 1, true)
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(h.out.String(), "invariants: ") {
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not end within 3 minutes:\n%s", tail(h.out.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(h.out.String(), "invariants: all hold") {
		t.Fatalf("the demo broke an invariant:\n%s", tail(h.out.String(), 3000))
	}
	// The demo stays calm on a loaded machine (make test runs packages side
	// by side): at most 2% of its workload rescheduled.
	sent, rescheduled := demoCount(h.out.String(), "sent by the workload"), demoCount(h.out.String(), "Rescheduled")
	if sent < 1000 || rescheduled*50 > sent {
		t.Errorf("the demo sent %d workload messages and rescheduled %d, want at most 2%%:\n%s", sent, rescheduled, tail(h.out.String(), 3000))
	}
	t.Logf("the demo: %d workload messages, %d rescheduled", sent, rescheduled)
	runReadme(t, h, pace)
}

// runReadme runs the README's publish walkthrough line by line against
// the live host, as written: `make run` is the host itself; a curl line
// asks GetOrder once and must show what the line's comment says at once
// (what it waits for, the line before waited on: a publish with --wait,
// or `publish wait`); every other line runs in a shell in the app root
// (variables assigned with $(...) carry over), must exit 0, and when it
// has a comment, that comment is what it prints: a line of its stdout is
// the comment, or starts with it when the comment ends in "...". A
// `sleep` fails the test: a pause cannot be checked (a sleep long enough
// on this machine may be too short on a loaded one); the walkthrough
// waits with `publish wait`, which exits 1 when what it waits for does not
// come.
func runReadme(t *testing.T, h *liveHost, pace time.Duration) {
	lines := readmeWalkthrough(t)
	if bad := sleepLines(lines); len(bad) > 0 {
		t.Fatalf("the README walkthrough pauses with sleep (%q): wait with 'bin/orderstatus publish wait --order ID --status S' (or --sequence N) instead, which fails when it does not come", bad)
	}
	assign := regexp.MustCompile(`^([a-z_]+)=\$\((.*)\)$`)
	curl := regexp.MustCompile(`^curl -s http://127\.0\.0\.1:7071/api/orders/([^ ]+)\s+# (.*)$`)
	var env []string
	ran := map[string]bool{}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		comment := ""
		if i := strings.Index(l, "  # "); i > 0 && !strings.HasPrefix(l, "curl ") {
			l, comment = strings.TrimSpace(l[:i]), strings.TrimSpace(l[i+len("  # "):])
		}
		if l == "" || strings.HasPrefix(l, "#") || l == "make run" {
			continue
		}
		time.Sleep(pace)
		switch {
		case curl.MatchString(l):
			m := curl.FindStringSubmatch(l)
			want := strings.Split(m[2], ", ")
			code, _, body := h.getOrder(t, m[1])
			shows := code == http.StatusOK
			for _, w := range want {
				shows = shows && strings.Contains(body, w)
			}
			if !shows {
				t.Fatalf("README walkthrough: %s: answers %d %s at once\nhandler log (tail):\n%s", l, code, body, h.logTail())
			}
			ran["curl"] = true
		case assign.MatchString(l):
			m := assign.FindStringSubmatch(l)
			r := mustOK(t, l, h.shell(t, env, "sh", "-c", m[2]))
			checkPrints(t, l, comment, r)
			env = append(env, m[1]+"="+strings.TrimSpace(r.stdout))
			ran[firstWords(m[2])] = true
		default:
			r := mustOK(t, l, h.shell(t, env, "sh", "-c", l))
			checkPrints(t, l, comment, r)
			ran[firstWords(l)] = true
		}
	}
	for _, cmd := range []string{"bin/orderstatus publish status", "bin/orderstatus publish timeout", "bin/orderstatus publish cancel-timeout",
		"bin/orderstatus publish commit", "bin/orderstatus publish relay", "bin/orderstatus publish wait", "curl"} {
		if !ran[cmd] {
			t.Errorf("the README walkthrough has no %q line (ran %v)", cmd, ran)
		}
	}
	// The walkthrough leaves nothing in the repository root but .run/.
	entries, err := os.ReadDir(h.app)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(appFiles, e.Name()) {
			t.Errorf("the README walkthrough left %s in the repository root", e.Name())
		}
	}
}

// readmeWalkthrough returns the lines of the code blocks between the
// README's walkthrough markers.
func readmeWalkthrough(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const start, end = "<!-- walkthrough: run by TestReadmeWalkthrough -->", "<!-- end of walkthrough -->"
	var lines []string
	in, found, code := false, false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.TrimSpace(l) == start:
			found, in = true, true
		case strings.TrimSpace(l) == end:
			in = false
		case in && strings.HasPrefix(l, "```"):
			code = !code
		case in && code:
			lines = append(lines, l)
		}
	}
	if !found || len(lines) == 0 {
		t.Fatalf("README.md has no walkthrough after %q", start)
	}
	return lines
}

// sleepCommand is a sleep run as a command: at the start of a line or
// after ;, &&, || or |.
var sleepCommand = regexp.MustCompile(`(^|[;&|]\s*)sleep(\s|$)`)

// sleepLines returns the lines of a walkthrough that sleep.
func sleepLines(lines []string) []string {
	var bad []string
	for _, l := range lines {
		if sleepCommand.MatchString(strings.TrimSpace(l)) {
			bad = append(bad, strings.TrimSpace(l))
		}
	}
	return bad
}

// checkPrints fails the test unless r's stdout has a line that is
// comment, or starts with it less a final "..." (the rest of the line
// elided); an empty comment checks nothing.
func checkPrints(t *testing.T, line, comment string, r result) {
	t.Helper()
	if comment == "" {
		return
	}
	if !printsComment(r.stdout, comment) {
		t.Errorf("README walkthrough: %s: the comment says it prints %q, but its stdout is %q", line, comment, r.stdout)
	}
}

func printsComment(stdout, comment string) bool {
	prefix, elided := strings.CutSuffix(comment, "...")
	for _, out := range strings.Split(stdout, "\n") {
		out = strings.TrimSpace(out)
		if out == comment || (elided && strings.HasPrefix(out, prefix)) {
			return true
		}
	}
	return false
}

func firstWords(l string) string {
	w := strings.Fields(l)
	if len(w) >= 3 && strings.HasPrefix(w[0], "bin/orderstatus") {
		return strings.Join(w[:3], " ")
	}
	if len(w) > 0 {
		return w[0]
	}
	return ""
}

// TestWalkthroughRules holds the rules runReadme applies, without a
// host: the README's walkthrough has no sleep, a sleep anywhere on a line
// is found, and a comment is checked against what a command prints.
func TestWalkthroughRules(t *testing.T) {
	if bad := sleepLines(readmeWalkthrough(t)); len(bad) > 0 {
		t.Errorf("the README walkthrough sleeps: %q; wait with bin/orderstatus publish wait", bad)
	}
	for _, tc := range []struct {
		line  string
		sleep bool
	}{
		{"sleep 2", true},
		{"  sleep 20", true},
		{"sleep", true},
		{"bin/orderstatus publish relay --table checkout --once && sleep 2", true},
		{"true; sleep 1", true},
		{"bin/orderstatus publish wait --order o-9002 --status Cancelled --timeout 1m", false},
		{"curl -s http://127.0.0.1:7071/api/orders/o-sleep   # \"status\":\"Paid\"", false},
		{"# sleep 2 would do on a fast machine", false},
	} {
		if got := len(sleepLines([]string{tc.line})) > 0; got != tc.sleep {
			t.Errorf("sleepLines(%q) found a sleep: %v, want %v", tc.line, got, tc.sleep)
		}
	}
	relay := "relaying outbox table checkout on Azurite to order-status on the development host\nsent 2, scheduled 1, cancelled 1, parked 0, waiting 0, purged 0\n"
	for _, tc := range []struct {
		stdout, comment string
		ok              bool
	}{
		{relay, "sent 2, scheduled 1, cancelled 1, ...", true},
		{relay, "sent 2, scheduled 1, cancelled 1, parked 0, waiting 0, purged 0", true},
		{relay, "sent 2, scheduled 1, cancelled 1", false}, // not the whole line, and no "..."
		{relay, "sent 2, scheduled 0, cancelled 1, ...", false},
		{relay, "sent 1, ...", false},
		{"", "sent 2, ...", false},
	} {
		if got := printsComment(tc.stdout, tc.comment); got != tc.ok {
			t.Errorf("printsComment(%q, %q) = %v, want %v", tc.stdout, tc.comment, got, tc.ok)
		}
	}
}
