package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
)

// fakeGetOrder is GetOrder on 127.0.0.1: an order is not found until the
// test applies a sequence to it, as the handler would.
type fakeGetOrder struct {
	mu       sync.Mutex
	rows     map[string]int64  // order -> last sequence
	statuses map[string]string // order -> status (default Paid)
	gets     map[string]int
	srv      *httptest.Server
	after    map[string]func() // run on an order's n-th GET (n = 3)
}

func newFakeGetOrder(t *testing.T) *fakeGetOrder {
	f := &fakeGetOrder{rows: map[string]int64{}, statuses: map[string]string{}, gets: map[string]int{}, after: map[string]func(){}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/orders/{orderId}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("orderId")
		f.mu.Lock()
		f.gets[id]++
		if fn := f.after[id]; fn != nil && f.gets[id] == 3 {
			fn()
		}
		seq, ok := f.rows[id]
		status := f.statuses[id]
		f.mu.Unlock()
		if status == "" {
			status = "Paid"
		}
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":"order not found","orderId":%q}`, id)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"orderId": id, "status": status, "lastSequence": seq})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// applyOnThirdGet makes order id show seq from its third GET on: the
// message is "applied" only after --wait has polled twice.
func (f *fakeGetOrder) applyOnThirdGet(id string, seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.after[id] = func() { f.rows[id] = seq }
}

// set makes order id show status at seq from now on.
func (f *fakeGetOrder) set(id, status string, seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows[id], f.statuses[id] = seq, status
}

// setOnThirdGet makes order id show status at seq from its third GET on.
func (f *fakeGetOrder) setOnThirdGet(id, status string, seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.after[id] = func() { f.rows[id], f.statuses[id] = seq, status }
}

func (f *fakeGetOrder) getsOf(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets[id]
}

// devHostWithFront is devHost with an HTTP front announced, as make run's.
func devHostWithFront(t *testing.T, front string) (*membroker.Broker, env) {
	mb, e := devHost(t, clock.Real())
	ep, err := devrun.Find(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	ep.HTTPAddr = front
	if _, err := devrun.Write(e.dir, ep); err != nil {
		t.Fatal(err)
	}
	return mb, e
}

func TestStatusWait(t *testing.T) {
	f := newFakeGetOrder(t)
	mb, e := devHostWithFront(t, strings.TrimPrefix(f.srv.URL, "http://"))

	t.Run("waits until the order shows the sequence sent", func(t *testing.T) {
		f.applyOnThirdGet("o-1", 1)
		r := runCLI(t, e, "status", "--order", "o-1", "--status", "Created", "--sequence", "1", "--wait")
		if r.code != ExitOK || !strings.HasSuffix(r.stdout, "applied: order o-1 shows sequence 1 or later (GetOrder)\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the applied line", r.code, r.stdout, r.stderr)
		}
		if n := f.getsOf("o-1"); n != 3 {
			t.Errorf("GetOrder asked %d times, want 3 (two misses, then the answer)", n)
		}
	})

	t.Run("a later sequence counts", func(t *testing.T) {
		f.applyOnThirdGet("o-2", 7)
		if r := runCLI(t, e, "status", "--order", "o-2", "--status", "Paid", "--sequence", "2", "--wait"); r.code != ExitOK {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("every order of a file", func(t *testing.T) {
		f.applyOnThirdGet("o-3", 2)
		f.applyOnThirdGet("o-4", 1)
		path := filepath.Join(t.TempDir(), "changes.jsonl")
		lines := `{"orderId":"o-3","status":"Created","sequence":1}` + "\n" + `{"orderId":"o-3","status":"Paid","sequence":2}` + "\n" + `{"orderId":"o-4","status":"Created","sequence":1}` + "\n"
		if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, e, "status", "--from", path, "--wait")
		if r.code != ExitOK || !strings.HasSuffix(r.stdout, "applied: all 2 orders show the sequence sent or later (GetOrder)\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("not applied in time: exit 1, one line naming the order", func(t *testing.T) {
		before := mb.Stats(queue).Active
		r := runCLI(t, e, "status", "--order", "o-never", "--status", "Created", "--sequence", "1", "--wait", "--wait-timeout", "300ms")
		if r.code != ExitFailure {
			t.Fatalf("exit %d, want %d; stdout %q, stderr %q", r.code, ExitFailure, r.stdout, r.stderr)
		}
		if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "o-never (want sequence 1, GetOrder says not found)") || !strings.Contains(r.stderr, "--wait-timeout 300ms") {
			t.Errorf("stderr %q, want one line naming o-never and the timeout", r.stderr)
		}
		if !strings.Contains(r.stdout, "sent OrderStatusChanged o-never:1") {
			t.Errorf("stdout %q: the send itself is reported", r.stdout)
		}
		if got := mb.Stats(queue).Active; got != before+1 {
			t.Errorf("active %d, want %d: the message is sent however the wait ends", got, before+1)
		}
	})

	t.Run("--get-order-url is used as given", func(t *testing.T) {
		f.applyOnThirdGet("o-5", 1)
		r := runCLI(t, e, "status", "--order", "o-5", "--status", "Created", "--sequence", "1", "--wait",
			"--get-order-url", f.srv.URL+"/api/orders/{orderId}?code=k")
		if r.code != ExitOK {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestStatusWaitBadInput(t *testing.T) {
	mb, e := devHost(t, clock.Real()) // no HTTP front announced
	ok := []string{"status", "--order", "o-1", "--status", "Paid", "--sequence", "2"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"timeout without wait", append(ok, "--wait-timeout", "5s"), "go with --wait"},
		{"url without wait", append(ok, "--get-order-url", "http://127.0.0.1:1/api/orders/{orderId}"), "go with --wait"},
		{"zero timeout", append(ok, "--wait", "--wait-timeout", "0s"), "--wait-timeout 0s"},
		{"url without placeholder", append(ok, "--wait", "--get-order-url", "http://127.0.0.1:1/api/orders/o-1"), "{orderId}"},
		{"url not http", append(ok, "--wait", "--get-order-url", "ftp://x/{orderId}"), "http or https"},
		{"no front to ask", append(ok, "--wait"), "--wait needs --get-order-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, e, tc.args...)
			if r.code != ExitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and one line with %q", r.code, r.stderr, ExitUsage, tc.want)
			}
		})
	}
	if st := mb.Stats(queue); st != (membroker.QueueStats{}) {
		t.Errorf("queue %+v, want nothing sent", st)
	}
}

// TestWaitCommand: `orderstatus publish wait` polls GetOrder until the order
// shows the sequence, the status, or both asked for (exit 0, one line on
// stdout), or says in one line on stderr what it saw last (exit 1). It
// sends nothing.
func TestWaitCommand(t *testing.T) {
	f := newFakeGetOrder(t)
	mb, e := devHostWithFront(t, strings.TrimPrefix(f.srv.URL, "http://"))
	tests := []struct {
		name    string
		setup   func()
		args    []string
		code    int
		line    string // the whole stdout (exit 0) or stderr (exit 1) line
		minGets int
	}{
		{"a sequence, reached on the third ask", func() { f.setOnThirdGet("w-1", "Paid", 2) },
			[]string{"--order", "w-1", "--sequence", "2"}, ExitOK,
			"reached: order w-1 shows Paid at sequence 2 (GetOrder), waited for sequence 2 or later\n", 3},
		{"a later sequence counts", func() { f.setOnThirdGet("w-2", "Shipped", 3) },
			[]string{"--order", "w-2", "--sequence", "2"}, ExitOK,
			"reached: order w-2 shows Shipped at sequence 3 (GetOrder), waited for sequence 2 or later\n", 3},
		{"a status: the timeout cancels a Created order", func() { f.set("w-3", "Created", 1); f.setOnThirdGet("w-3", "Cancelled", 1) },
			[]string{"--order", "w-3", "--status", "cancelled"}, ExitOK,
			"reached: order w-3 shows Cancelled at sequence 1 (GetOrder), waited for status Cancelled\n", 3},
		{"both", func() { f.set("w-4", "Paid", 2) },
			[]string{"--order", "w-4", "--status", "Paid", "--sequence", "2"}, ExitOK,
			"reached: order w-4 shows Paid at sequence 2 (GetOrder), waited for sequence 2 or later and status Paid\n", 1},
		{"both: the status alone is not enough", func() { f.set("w-5", "Paid", 1) },
			[]string{"--order", "w-5", "--status", "Paid", "--sequence", "2", "--timeout", "300ms"}, ExitFailure,
			"orderstatus publish wait: order w-5 did not reach sequence 2 or later and status Paid within --timeout 300ms: GetOrder says Paid at sequence 1\n", 2},
		{"the status never comes: exit 1 with what it saw", func() { f.set("w-6", "Created", 1) },
			[]string{"--order", "w-6", "--status", "Cancelled", "--timeout", "300ms"}, ExitFailure,
			"orderstatus publish wait: order w-6 did not reach status Cancelled within --timeout 300ms: GetOrder says Created at sequence 1\n", 2},
		{"an order GetOrder does not know", func() {},
			[]string{"--order", "w-7", "--sequence", "1", "--timeout", "300ms"}, ExitFailure,
			"orderstatus publish wait: order w-7 did not reach sequence 1 or later within --timeout 300ms: GetOrder says not found\n", 2},
		{"--get-order-url is used as given", func() { f.set("w-8", "Paid", 2) },
			[]string{"--order", "w-8", "--sequence", "2", "--get-order-url", f.srv.URL + "/api/orders/{orderId}?code=k"}, ExitOK,
			"reached: order w-8 shows Paid at sequence 2 (GetOrder), waited for sequence 2 or later\n", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			r := runCLI(t, e, append([]string{"wait"}, tc.args...)...)
			out, other := r.stdout, r.stderr
			if tc.code != ExitOK {
				out, other = r.stderr, r.stdout
			}
			if r.code != tc.code || out != tc.line || other != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and the one line %q", r.code, r.stdout, r.stderr, tc.code, tc.line)
			}
			if n := f.getsOf(tc.args[1]); n < tc.minGets {
				t.Errorf("GetOrder asked %d times, want at least %d", n, tc.minGets)
			}
		})
	}
	if st := mb.Stats(queue); st != (membroker.QueueStats{}) {
		t.Errorf("queue %+v, want nothing sent", st)
	}

	t.Run("interrupted: exit 1, one line", func(t *testing.T) {
		f.set("w-9", "Created", 1)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		var out, errOut strings.Builder
		code := run(ctx, []string{"wait", "--order", "w-9", "--status", "Cancelled"}, &out, &errOut, e)
		if want := "orderstatus publish wait: interrupted before order w-9 reached status Cancelled: GetOrder says Created at sequence 1\n"; code != ExitFailure || errOut.String() != want || out.Len() != 0 {
			t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", code, out.String(), errOut.String(), ExitFailure, want)
		}
	})
}

func TestWaitCommandBadInput(t *testing.T) {
	_, noFront := devHost(t, clock.Real()) // a development host without an HTTP front
	f := newFakeGetOrder(t)
	_, e := devHostWithFront(t, strings.TrimPrefix(f.srv.URL, "http://"))
	nothing := env{dir: t.TempDir(), getenv: func(string) string { return "" }, now: time.Now}
	for _, tc := range []struct {
		name string
		e    env
		args []string
		want string
	}{
		{"no --order", e, []string{"--sequence", "1"}, "--order is required"},
		{"bad order", e, []string{"--order", "a/b", "--sequence", "1"}, "--order: orderId"},
		{"nothing to wait for", e, []string{"--order", "o-1"}, "--sequence or --status is required"},
		{"sequence 0", e, []string{"--order", "o-1", "--sequence", "0"}, "--sequence 0: want at least 1"},
		{"sequence not a number", e, []string{"--order", "o-1", "--sequence", "two"}, "invalid value"},
		{"unknown status", e, []string{"--order", "o-1", "--status", "Refunded"}, `--status "Refunded"`},
		{"zero timeout", e, []string{"--order", "o-1", "--sequence", "1", "--timeout", "0s"}, "--timeout 0s"},
		{"timeout over 1h", e, []string{"--order", "o-1", "--sequence", "1", "--timeout", "2h"}, "at most 1h"},
		{"url without placeholder", e, []string{"--order", "o-1", "--sequence", "1", "--get-order-url", "http://127.0.0.1:1/api/orders/o-1"}, "{orderId}"},
		{"url not http", e, []string{"--order", "o-1", "--sequence", "1", "--get-order-url", "ftp://x/{orderId}"}, "http or https"},
		{"no --namespace: it talks to no Service Bus", e, []string{"--order", "o-1", "--sequence", "1", "--namespace", "sb-x"}, "flag provided but not defined: -namespace"},
		{"extra argument", e, []string{"--order", "o-1", "--sequence", "1", "now"}, `unexpected argument "now"`},
		{"a host without a front", noFront, []string{"--order", "o-1", "--sequence", "1"}, "no GetOrder to ask: pass --get-order-url"},
		{"no host at all", nothing, []string{"--order", "o-1", "--sequence", "1"}, "no GetOrder to ask: pass --get-order-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.e, append([]string{"wait"}, tc.args...)...)
			if r.code != ExitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and one line with %q", r.code, r.stdout, r.stderr, ExitUsage, tc.want)
			}
		})
	}
	if n := f.getsOf("o-1"); n != 0 {
		t.Errorf("GetOrder asked %d times on bad input, want none", n)
	}
}
