package deadletter_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

func timerBody(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "hostproto", "testdata", "timer_first_run.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type answer struct {
	Logs        []string
	ReturnValue deadletter.Summary
}

func post(t *testing.T, h http.Handler, body string) (int, answer) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/DeadLetterSweeper", strings.NewReader(body)))
	var a answer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("answer %q: %v", rec.Body.String(), err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return rec.Code, a
}

func TestFunctionAnswersWithTheSummaryAndStatsLines(t *testing.T) {
	f := newFixture(t)
	f.park(t, "o-20:1", "InvalidPayload")
	h := deadletter.Function(f.sweeper(deadletter.Options{}), nil)
	code, a := post(t, h, timerBody(t))
	if code != http.StatusOK {
		t.Fatalf("status %d, logs %q", code, a.Logs)
	}
	if a.ReturnValue.RunID == "" || a.ReturnValue.Counts[deadletter.ActionArchive] != 1 || a.ReturnValue.Counts[deadletter.ActionStored] != 1 ||
		a.ReturnValue.Depth[dlstore.Poison] != 0 {
		t.Errorf("ReturnValue = %+v, want a run id, stored 1, archived 1, poison depth 0 after the run", a.ReturnValue)
	}
	stats := 0
	for _, l := range a.Logs {
		if strings.Contains(l, `"msg":"deadletter_stats"`) && strings.Contains(l, `"run_id":"`+a.ReturnValue.RunID+`"`) {
			stats++
		}
	}
	if stats != 3 {
		t.Errorf("Logs hold %d deadletter_stats lines of the run, want 3 (one per source and reason): %q", stats, a.Logs)
	}
}

// downPeek fails every call: Service Bus cannot be reached.
type downPeek struct{ deadletter.Broker }

func (downPeek) Peek(_ context.Context, _ broker.Source, _ int, _ int64) ([]broker.Received, error) {
	return nil, broker.ErrTransient
}

func (downPeek) Receive(context.Context, broker.Source, int, time.Duration) ([]broker.Received, error) {
	return nil, broker.ErrTransient
}

func TestFunctionFailures(t *testing.T) {
	f := newFixture(t)
	t.Run("Service Bus unreachable: 503, nothing changed", func(t *testing.T) {
		s := deadletter.New(downPeek{f.mb}, f.store, f.options(deadletter.Options{}))
		if code, a := post(t, deadletter.Function(s, nil), timerBody(t)); code != http.StatusServiceUnavailable || a.ReturnValue.Error == "" {
			t.Errorf("status %d, return %+v; want 503 with the error", code, a.ReturnValue)
		}
	})
	t.Run("tables unreachable: 503, the message left as it was", func(t *testing.T) {
		f.deadLetter(t, "o-21:1", "o-21")
		s := deadletter.New(f.mb, downStore{}, f.options(deadletter.Options{}))
		if code, a := post(t, deadletter.Function(s, nil), timerBody(t)); code != http.StatusServiceUnavailable || a.ReturnValue.Error == "" {
			t.Errorf("status %d, return %+v; want 503 with the error", code, a.ReturnValue)
		}
		if d := f.peek(t, dlstore.DLQ); len(d) != 1 {
			t.Errorf("DLQ after a failed sweep = %+v, want the message untouched", d)
		}
	})
	t.Run("not a timer invocation: 400", func(t *testing.T) {
		if code, _ := post(t, deadletter.Function(f.sweeper(deadletter.Options{}), nil), `{"Data":{}}`); code != http.StatusBadRequest {
			t.Errorf("status %d, want 400", code)
		}
	})
	t.Run("no Service Bus configured: 500", func(t *testing.T) {
		if code, a := post(t, deadletter.Function(nil, nil), timerBody(t)); code != http.StatusInternalServerError || len(a.Logs) == 0 {
			t.Errorf("status %d logs %q, want 500 saying why", code, a.Logs)
		}
	})
}
