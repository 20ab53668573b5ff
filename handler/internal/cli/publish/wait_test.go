package publish

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devrun"
)

// fakeGetOrder is GetOrder on 127.0.0.1: an order is not found until the
// test applies a sequence to it, as the handler would.
type fakeGetOrder struct {
	mu    sync.Mutex
	rows  map[string]int64 // order -> last sequence
	gets  map[string]int
	srv   *httptest.Server
	after map[string]func() // run on an order's n-th GET (n = 3)
}

func newFakeGetOrder(t *testing.T) *fakeGetOrder {
	f := &fakeGetOrder{rows: map[string]int64{}, gets: map[string]int{}, after: map[string]func(){}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/orders/{orderId}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("orderId")
		f.mu.Lock()
		f.gets[id]++
		if fn := f.after[id]; fn != nil && f.gets[id] == 3 {
			fn()
		}
		seq, ok := f.rows[id]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":"order not found","orderId":%q}`, id)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"orderId": id, "status": "Paid", "lastSequence": seq})
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
