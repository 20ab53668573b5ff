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

	"github.com/orderstatus/orderstatus/handler/internal/clock"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// fixedReady is a handler that is always ready at base.
type fixedReady string

func (f fixedReady) Ready(context.Context) (string, error) { return string(f), nil }

var _ readier = fixedReady("")

// TestInvokerDoesNotFollowRedirects: the host takes a 3xx as the answer;
// following it would complete a message the handler never handled.
func TestInvokerDoesNotFollowRedirects(t *testing.T) {
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

// TestInvokerSendsTheClockRate: every invocation carries the host clock's
// rate at the time of the call while it runs faster than the wall clock,
// and nothing at real time.
func TestInvokerSendsTheClockRate(t *testing.T) {
	var seen atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store([2]any{r.Header.Get(hostproto.HeaderClockRate), hostproto.ClockRate(r)})
		reply(w, http.StatusOK, "Applied")
	}))
	defer srv.Close()
	iv := newInvoker(fixedReady(srv.URL), 0, slog.New(slog.DiscardHandler))
	defer iv.close()
	var rate float64
	for _, tc := range []struct {
		rate   float64 // 0: no rate function
		header string
		read   float64
	}{{0, "", 1}, {1, "", 1}, {60, "60", 60}, {2.5, "2.5", 2.5}, {0.5, "", 1}} {
		iv.rate = nil
		if tc.rate != 0 {
			rate = tc.rate
			iv.rate = func() float64 { return rate }
		}
		if _, err := iv.invoke(testCtx(t), "OrderStatus", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if got := seen.Load().([2]any); got[0] != tc.header || got[1] != tc.read {
			t.Errorf("rate %v: header %q read as %v, want %q and %v", tc.rate, got[0], got[1], tc.header, tc.read)
		}
	}
}

// TestClockRateFollowsTheClock: the rate is the clock's present one.
func TestClockRateFollowsTheClock(t *testing.T) {
	scaled := clock.Scaled(60)
	h := &Host{clock: scaled}
	if got := h.clockRate(); got != 60 {
		t.Errorf("Scaled(60): rate %v, want 60", got)
	}
	scaled.SetFactor(2)
	if got := h.clockRate(); got != 2 {
		t.Errorf("after SetFactor(2): rate %v, want 2", got)
	}
	if got := (&Host{clock: clock.Real()}).clockRate(); got != 1 {
		t.Errorf("the real clock: rate %v, want 1", got)
	}
}
