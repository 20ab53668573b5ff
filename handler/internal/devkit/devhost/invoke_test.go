package devhost

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"strings"
)

// fixedReady is a handler that is always ready at base.
type fixedReady string

func (f fixedReady) Ready(context.Context) (string, error) { return string(f), nil }

var _ readier = fixedReady("")

// TestInvokerDoesNotFollowRedirects: the host takes a 3xx as the answer;
// following it would complete a message the handler never handled.
func TestInvokerDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var followed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Store(true)
			reply(w, http.StatusOK, "Applied")
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	iv := newInvoker(fixedReady(srv.URL), 0, slog.New(slog.DiscardHandler))
	defer iv.close()
	a, err := iv.invoke(testCtx(t), "OrderStatus", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != http.StatusTemporaryRedirect || a.OK() || followed.Load() {
		t.Errorf("answer %d (followed %v), want the 307 itself, not followed", a.Status, followed.Load())
	}
}

// TestInvokerCloseClosesIdleConnections: Close leaves no connection to
// the handler open.
func TestInvokerCloseClosesIdleConnections(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, "Applied")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	srv.Start()
	defer srv.Close()
	iv := newInvoker(fixedReady(srv.URL), 0, slog.New(slog.DiscardHandler))
	if _, err := iv.invoke(testCtx(t), "OrderStatus", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
		t.Fatal("the connection closed before Close")
	default:
	}
	iv.close()
	waitFor(t, "the idle connection to close", func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	})
}

func TestResultOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, rv, want string
	}{
		{"object", `{"result":"Applied","orderId":"o-1"}`, "Applied"},
		{"object with space", " \n{\"result\":\"Stale\"}", "Stale"},
		{"string holding an object", `"{\"result\":\"Duplicate\"}"`, "Duplicate"},
		{"string holding no object", `"Applied"`, ""},
		{"no result", `{"orderId":"o-1"}`, ""},
		{"null", `null`, ""},
		{"absent", ``, ""},
		{"number", `42`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resultOf(json.RawMessage(tt.rv)); got != tt.want {
				t.Errorf("resultOf(%s) = %q, want %q", tt.rv, got, tt.want)
			}
		})
	}
}

// TestInvokerSendsOnlyTheHostsHeaders: an invocation carries the headers
// the Functions host sends (Content-Type, the invocation id) and nothing
// of the development host's own: no clock of the dev host reaches the
// handler.
func TestInvokerSendsOnlyTheHostsHeaders(t *testing.T) {
	t.Parallel()
	var seen atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Clone())
		reply(w, http.StatusOK, "Applied")
	}))
	defer srv.Close()
	iv := newInvoker(fixedReady(srv.URL), 0, slog.New(slog.DiscardHandler))
	defer iv.close()
	if _, err := iv.invoke(testCtx(t), "OrderStatus", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for name := range seen.Load().(http.Header) {
		if strings.HasPrefix(strings.ToLower(name), "x-orderstatus") || strings.HasPrefix(strings.ToLower(name), "x-loopback") {
			t.Errorf("invocation header %s: the handler must not be able to tell the development host", name)
		}
	}
}
