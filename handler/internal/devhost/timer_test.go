package devhost

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"orderstatus/handler/internal/hostproto"
)

func timerApp(schedule string) map[string]string {
	files := appFiles(1)
	files["functions/Sweep/function.json"] = `{"bindings":[{"type":"timerTrigger","direction":"in","name":"timer","schedule":"` + schedule + `","useMonitor":true}]}`
	return files
}

type timerCall struct {
	info hostproto.TimerInfo
	at   time.Time
}

func recordTimers(t *testing.T, up *upstream, status int) (get func() []timerCall) {
	var mu sync.Mutex
	var calls []timerCall
	up.set(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/Sweep" {
			t.Errorf("path: got %s, want /Sweep", r.URL.Path)
		}
		info, err := hostproto.DecodeTimer(body, "timer")
		if err != nil {
			t.Errorf("timer invocation does not decode: %v\n%s", err, body)
		}
		var inv struct {
			Metadata struct {
				Sys struct{ UtcNow, MethodName string } `json:"sys"`
			}
		}
		_ = json.Unmarshal(body, &inv)
		at, _ := time.Parse(time.RFC3339Nano, inv.Metadata.Sys.UtcNow)
		if inv.Metadata.Sys.MethodName != "Sweep" {
			t.Errorf("sys.MethodName: got %q, want Sweep", inv.Metadata.Sys.MethodName)
		}
		mu.Lock()
		calls = append(calls, timerCall{info: info, at: at})
		mu.Unlock()
		reply(w, status, "")
	})
	return func() []timerCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]timerCall(nil), calls...)
	}
}

func TestFireTimers(t *testing.T) {
	h, up := testHost(t, timerApp("%SWEEP%"), func(o *Options) {
		o.Settings = maps.Clone(o.Settings)
		o.Settings["SWEEP"] = "0 0 0 1 1 *" // yearly: never on its own during the test
	})
	calls := recordTimers(t, up, http.StatusOK)
	ctx := testCtx(t)
	if got := h.TimerFunctions(); len(got) != 1 || got[0] != "Sweep" {
		t.Fatalf("timer functions: got %v, want [Sweep]", got)
	}
	for range 2 {
		if err := h.FireTimers(ctx); err != nil {
			t.Fatalf("FireTimers: %v", err)
		}
	}
	got := calls()
	if len(got) != 2 {
		t.Fatalf("timer calls: got %d, want 2", len(got))
	}
	first, second := got[0].info, got[1].info
	if !first.AdjustForDST || first.IsPastDue || !first.Last.IsZero() || !first.Next.IsZero() {
		t.Errorf("first run: got %+v, want AdjustForDST and no schedule status", first)
	}
	wantNext := time.Date(got[1].at.Year()+1, 1, 1, 0, 0, 0, 0, time.UTC)
	if !second.Last.Equal(got[0].at) || !second.Next.Equal(wantNext) || second.LastUpdated.Before(second.Last) {
		t.Errorf("second run: got %+v, want Last %s, Next %s", second, got[0].at, wantNext)
	}
}

func TestTimerRunsOnSchedule(t *testing.T) {
	_, up := testHost(t, timerApp("*/30 * * * * *"), func(o *Options) { o.TimeScale = 600 }) // every 50 ms
	calls := recordTimers(t, up, http.StatusOK)
	waitFor(t, "three scheduled timer runs", func() bool { return len(calls()) >= 3 })
	got := calls()
	for i := 1; i < 3; i++ {
		if !got[i].info.Last.Equal(got[i-1].at) || !got[i].at.After(got[i-1].at) {
			t.Errorf("run %d at %s with Last %s, want after and naming the previous run %s", i, got[i].at, got[i].info.Last, got[i-1].at)
		}
	}
}

func TestFireTimersReportsFailure(t *testing.T) {
	h, up := testHost(t, timerApp("0 0 0 1 1 *"), nil)
	recordTimers(t, up, http.StatusInternalServerError)
	if err := h.FireTimers(testCtx(t)); err == nil || !strings.Contains(err.Error(), "Sweep") {
		t.Errorf("FireTimers: got %v, want an error naming Sweep", err)
	}
}

func TestFireTimersWithoutTimers(t *testing.T) {
	h, up := testHost(t, appFiles(1), nil)
	called := false
	up.set(func(w http.ResponseWriter, r *http.Request) { called = true })
	if err := h.FireTimers(testCtx(t)); err != nil || called {
		t.Errorf("FireTimers: got %v (called %v), want nothing done", err, called)
	}
}

func TestUnresolvedTimerSetting(t *testing.T) {
	_, err := New(Options{
		AppRoot:  writeApp(t, timerApp("%DEAD_LETTER_SWEEP_SCHEDULE%")),
		Env:      []string{"PATH=" + os.Getenv("PATH")},
		Settings: map[string]string{SettingStoreConnection: "UseDevelopmentStorage=true"},
	})
	if err == nil || !strings.Contains(err.Error(), "DEAD_LETTER_SWEEP_SCHEDULE") || strings.Contains(err.Error(), "\n") {
		t.Errorf("New: got %v, want one line naming DEAD_LETTER_SWEEP_SCHEDULE", err)
	}
}

func TestBadSchedule(t *testing.T) {
	_, err := New(Options{
		AppRoot: writeApp(t, timerApp("*/5 * * * *")),
		Env:     []string{},
	})
	if err == nil || !strings.Contains(err.Error(), "functions/Sweep/function.json") {
		t.Errorf("New: got %v, want an error naming the function file", err)
	}
}
