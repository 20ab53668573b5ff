package devhost

import (
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/funcapp"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/ncrontab"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
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
	t.Parallel()
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
	// Timer runs are counted apart from the message calls, on the
	// timer's own instance.
	runs := map[string]int{}
	for _, in := range h.Instances() {
		runs[in.ID] = in.TimerRuns
		if in.Invocations != 0 {
			t.Errorf("%s: %d message calls, want none", in.ID, in.Invocations)
		}
	}
	if want := map[string]int{"OrderStatus-1": 0, "Sweep-1": 2, "http-1": 0}; !mapsEqual(runs, want) {
		t.Errorf("timer runs by instance %v, want %v", runs, want)
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
	t.Parallel()
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

// TestStopTimers: after StopTimers no scheduled run starts (and none is
// running), while FireTimers still runs each timer once.
func TestStopTimers(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, timerApp("*/30 * * * * *"), func(o *Options) { o.TimeScale = 600 }) // every 50 ms
	calls := recordTimers(t, up, http.StatusOK)
	waitFor(t, "a scheduled timer run", func() bool { return len(calls()) >= 1 })
	h.StopTimers()
	if n := h.stats.inFlight.Load(); n != 0 {
		t.Errorf("calls running after StopTimers: %d, want 0", n)
	}
	stopped := len(calls())
	time.Sleep(300 * time.Millisecond) // six periods of the schedule
	if got := len(calls()); got != stopped {
		t.Errorf("timer runs after StopTimers: %d, want none", got-stopped)
	}
	if err := h.FireTimers(testCtx(t)); err != nil {
		t.Fatalf("FireTimers after StopTimers: %v", err)
	}
	if got := len(calls()); got != stopped+1 {
		t.Errorf("FireTimers after StopTimers: %d runs, want 1", got-stopped)
	}
	h.StopTimers() // again: nothing happens
}

func TestFireTimersReportsFailure(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, timerApp("0 0 0 1 1 *"), nil)
	recordTimers(t, up, http.StatusInternalServerError)
	if err := h.FireTimers(testCtx(t)); err == nil || !strings.Contains(err.Error(), "Sweep") {
		t.Errorf("FireTimers: got %v, want an error naming Sweep", err)
	}
}

func TestFireTimersWithoutTimers(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(1), nil)
	called := false
	up.set(func(w http.ResponseWriter, r *http.Request) { called = true })
	if err := h.FireTimers(testCtx(t)); err != nil || called {
		t.Errorf("FireTimers: got %v (called %v), want nothing done", err, called)
	}
}

func TestUnresolvedTimerSetting(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	_, err := New(Options{
		AppRoot: writeApp(t, timerApp("*/5 * * * *")),
		Env:     []string{},
	})
	if err == nil || !strings.Contains(err.Error(), "functions/Sweep/function.json") {
		t.Errorf("New: got %v, want an error naming the function file", err)
	}
}

// scriptedClock returns the given times from Now, in order (the last one
// again once they are used up); it makes no timers.
type scriptedClock struct {
	mu    sync.Mutex
	times []time.Time
}

func (c *scriptedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.times[0]
	if len(c.times) > 1 {
		c.times = c.times[1:]
	}
	return now
}

func (c *scriptedClock) NewTimer(time.Duration) clock.Timer { panic("scriptedClock makes no timers") }

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTimerEncodingMatchesGolden proves that the timer dispatcher invokes a
// timer function with exactly the real host's payload: the first run with
// ScheduleStatus null, and a regular tick whose status names the previous
// run (compared as JSON values; sys.RandGuid is random and left out).
func TestTimerEncodingMatchesGolden(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		reply(w, http.StatusOK, "")
	}))
	defer srv.Close()
	sched, err := ncrontab.Parse("0 */5 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	// dispatcher returns a timer dispatcher of DeadLetterSweeper whose
	// clock tells the given times: each fire reads it when it starts and
	// when the answer came.
	dispatcher := func(times ...string) *timerDispatcher {
		clk := &scriptedClock{}
		for _, s := range times {
			clk.times = append(clk.times, mustTime(t, s))
		}
		log := slog.New(slog.DiscardHandler)
		g := (&Host{}).groupOf("DeadLetterSweeper")
		in := &instance{g: g, n: 1, id: g.instanceID(1), inv: newInvoker(fixedReady(srv.URL), 0, log)}
		in.state.Store(InstanceRunning)
		h := &Host{clock: clk, stats: newStats(), log: log, pool: newPool()}
		h.pool.all = []*instance{in}
		return &timerDispatcher{h: h, g: g, fn: "DeadLetterSweeper", binding: funcapp.Binding{Type: funcapp.TypeTimerTrigger, Name: "timer"}, sched: sched}
	}
	ctx := testCtx(t)

	first := dispatcher("2026-11-29T10:20:00.0001Z", "2026-11-29T10:20:00.0002Z")
	if err := first.fire(ctx, false); err != nil {
		t.Fatal(err)
	}
	tick := dispatcher("2026-11-29T10:15:00.0012345Z", "2026-11-29T10:15:00.0098765Z", // the previous run
		"2026-11-29T10:20:00.0034567Z", "2026-11-29T10:20:00.0040000Z")
	for range 2 {
		if err := tick.fire(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range []struct {
		golden string
		body   []byte
	}{{"timer_first_run.json", bodies[0]}, {"timer_tick.json", bodies[2]}} {
		golden, err := os.ReadFile(filepath.Join(goldenDir, c.golden))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := normalise(t, c.body), normalise(t, golden); !reflect.DeepEqual(g, w) {
			gj, _ := json.MarshalIndent(g, "", "  ")
			wj, _ := json.MarshalIndent(w, "", "  ")
			t.Errorf("%s: the development host's invocation differs from the host's:\n got %s\nwant %s", c.golden, gj, wj)
		}
	}
}

// TestCallsRunningCountsATimerCall: a timer call counts as running from
// its start to its answer (the simulation moves the clock only when no
// call runs, so that a sweeper's run is never cut in two by a jump).
func TestCallsRunningCountsATimerCall(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, timerApp("0 0 0 1 1 *"), nil) // once a year: only FireTimers runs it
	h.StopTimers()
	entered, release := make(chan struct{}), make(chan struct{})
	up.set(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		close(entered)
		<-release
		reply(w, http.StatusOK, "")
	})
	if n := h.CallsRunning(); n != 0 {
		t.Fatalf("CallsRunning before the call = %d, want 0", n)
	}
	fired := make(chan error, 1)
	go func() { fired <- h.FireTimers(t.Context()) }()
	<-entered
	if n := h.CallsRunning(); n != 1 {
		t.Errorf("CallsRunning while the timer call runs = %d, want 1", n)
	}
	close(release)
	if err := <-fired; err != nil {
		t.Fatalf("FireTimers: %v", err)
	}
	if n := h.CallsRunning(); n != 0 {
		t.Errorf("CallsRunning after the answer = %d, want 0", n)
	}
}
