package devhost

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
)

// instanceEnv asks an instance's handler process for its environment.
func instanceEnv(t *testing.T, h *Host, in *instance) map[string]string {
	t.Helper()
	base, err := in.proc.Ready(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + pathFakeEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env fakeEnv
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range env.Environ {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// pidOf returns the instance whose handler has pid.
func pidOf(h *Host, pid int) string {
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	for _, in := range h.pool.all {
		if in.proc.PID() == pid {
			return in.id
		}
	}
	return ""
}

func TestInstancesOwnProcessPortAndID(t *testing.T) {
	t.Parallel()
	h, _ := testHost(t, appFiles(2), func(o *Options) {
		o.Instances = 3
		o.Settings[logging.EnvContainerName] = "from-settings" // must not name them all
		o.Settings[logging.EnvWebsitePodName] = "pod-from-settings"
	})
	// Three of OrderStatus, the default group, and one of the HTTP
	// functions (GetOrder, Metrics), on instances of their own.
	if got, want := h.RunningInstances(), []string{"OrderStatus-1", "OrderStatus-2", "OrderStatus-3", "http-1"}; !slices.Equal(got, want) {
		t.Fatalf("RunningInstances = %v, want %v", got, want)
	}
	groups := map[string]string{}
	for _, s := range h.Instances() {
		groups[s.ID] = s.Group
	}
	if want := map[string]string{"OrderStatus-1": "function:OrderStatus", "OrderStatus-2": "function:OrderStatus",
		"OrderStatus-3": "function:OrderStatus", "http-1": "http"}; !reflect.DeepEqual(groups, want) {
		t.Errorf("groups = %v, want %v", groups, want)
	}
	pids, ports := map[int]bool{}, map[string]bool{}
	for _, in := range h.pool.runningIn(nil) {
		env := instanceEnv(t, h, in)
		if env[logging.EnvContainerName] != in.id {
			t.Errorf("%s: CONTAINER_NAME = %q, want %q", in.id, env[logging.EnvContainerName], in.id)
		}
		if got := logging.InstanceID(func(k string) string { return env[k] }); got != in.id {
			t.Errorf("%s: the handler reads instance id %q, want %q", in.id, got, in.id)
		}
		pids[in.proc.PID()] = true
		ports[env["FUNCTIONS_CUSTOMHANDLER_PORT"]] = true
	}
	if len(pids) != 4 || len(ports) != 4 {
		t.Errorf("pids %v, ports %v: want four of each", pids, ports)
	}
	if n := h.sessions[0].workers; n != 2 {
		t.Fatalf("session slots per instance = %d, want host.json's 2", n)
	}
}

// TestInstancesShareTheQueue: every instance takes sessions (each with its
// own maxConcurrentSessions slots), and the summary counts per instance.
func TestInstancesShareTheQueue(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(1), func(o *Options) { o.Instances = 3 })
	var mu sync.Mutex
	byPID := map[int]int{}
	running := 0
	maxRunning := 0
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		mu.Lock()
		byPID[c.PID]++
		running++
		maxRunning = max(maxRunning, running)
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	for i := range 12 {
		id := "o-" + strconv.Itoa(i)
		if err := h.Send(ctx, statusLine(id, id+":1", "Created", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(byPID) != 3 || maxRunning > 3 {
		t.Errorf("calls by pid %v, at most %d at once: want all three instances, one session slot each", byPID, maxRunning)
	}
	total := 0
	for _, s := range h.Instances() {
		if s.Invocations != byPID[pidFor(h, s.ID)] || s.Results["Applied"] != s.Invocations || s.State != InstanceRunning {
			t.Errorf("%s: %+v, want %d invocations, all Applied, running", s.ID, s, byPID[pidFor(h, s.ID)])
		}
		total += s.Invocations
	}
	if total != 12 {
		t.Errorf("invocations over instances = %d, want 12", total)
	}
}

// TestInstancesShareTheSessions sends more sessions than one instance
// has slots for, but fewer than all instances have together, and holds
// every call until all of them run: each instance must hold its share
// (the least busy instance takes the next session), not whichever
// instance's slots happened to wake first.
func TestInstancesShareTheSessions(t *testing.T) {
	t.Parallel()
	const instances, slots, sessions = 3, 16, 24
	h, up := testHost(t, appFiles(slots), func(o *Options) { o.Instances = instances })
	var mu sync.Mutex
	byPID := map[int]int{}
	all := make(chan struct{})
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		mu.Lock()
		byPID[c.PID]++
		n := 0
		for _, v := range byPID {
			n += v
		}
		if n == sessions {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(20 * time.Second):
		}
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	for i := range sessions {
		id := "o-" + strconv.Itoa(i)
		if err := h.Send(ctx, statusLine(id, id+":1", "Created", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(byPID) != instances {
		t.Fatalf("calls by pid %v: want all %d instances", byPID, instances)
	}
	for pid, n := range byPID {
		// Even shares are 8 each; slots still starting when the first
		// sessions came may tilt it a little, never to an idle instance.
		if n < sessions/instances/2 {
			t.Errorf("the instance with pid %d took %d of %d sessions (by pid %v): want about %d each",
				pid, n, sessions, byPID, sessions/instances)
		}
	}
}

func pidFor(h *Host, id string) int {
	for _, in := range h.pool.runningIn(nil) {
		if in.id == id {
			return in.proc.PID()
		}
	}
	return 0
}

// TestFrontSpreadsRequests: the front takes the running instances of the
// HTTP group in turn, never an instance of OrderStatus (as in Azure, where
// GET /api/metrics answers from an HTTP instance).
func TestFrontSpreadsRequests(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(1), func(o *Options) { o.Instances = 2; o.GroupInstances = map[string]int{"http": 3} })
	up.set(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Header.Get(headerFakePID)) })
	seen := map[string]int{}
	for range 6 {
		resp, err := http.Get("http://" + h.Addr() + "/api/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pid, _ := strconv.Atoi(string(b))
		seen[pidOf(h, pid)]++
	}
	if want := map[string]int{"http-1": 2, "http-2": 2, "http-3": 2}; !mapsEqual(seen, want) {
		t.Errorf("requests by instance = %v, want %v", seen, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestTimerRunsOnOneInstance: the timer runs on its own group's instances,
// never on OrderStatus's; its singleton lock is held by the oldest running
// one, and passes on when that one is removed.
func TestTimerRunsOnOneInstance(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, timerApp("0 0 0 1 1 *"), func(o *Options) {
		o.Instances = 2
		o.GroupInstances = map[string]int{"Sweep": 2}
		o.Settings[fakeGracefulTerm] = "1"
	})
	var mu sync.Mutex
	var pids []int
	up.set(func(w http.ResponseWriter, r *http.Request) {
		pid, _ := strconv.Atoi(r.Header.Get(headerFakePID))
		mu.Lock()
		pids = append(pids, pid)
		mu.Unlock()
		reply(w, http.StatusOK, "")
	})
	ctx := testCtx(t)
	first, second := pidFor(h, "Sweep-1"), pidFor(h, "Sweep-2")
	for range 3 {
		if err := h.FireTimers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.RemoveInstance(ctx, "Sweep-1"); err != nil {
		t.Fatal(err)
	}
	if err := h.FireTimers(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{first, first, first, second}; !slices.Equal(pids, want) {
		t.Errorf("timer calls by pid = %v, want %v (Sweep-1, then Sweep-2 once Sweep-1 left)", pids, want)
	}
}

// TestRemoveInstanceFinishesItsCall: a graceful removal lets the call in
// flight finish and settles it; the session's next message goes to the
// instance that is left.
func TestRemoveInstanceFinishesItsCall(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(1), func(o *Options) {
		o.Instances = 2
		o.Settings[fakeGracefulTerm] = "1"
	})
	var mu sync.Mutex
	var calls []call
	inFirst, release := make(chan struct{}), make(chan struct{})
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		mu.Lock()
		calls = append(calls, c)
		first := len(calls) == 1
		mu.Unlock()
		if first {
			close(inFirst)
			<-release
		}
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
		t.Fatal(err)
	}
	<-inFirst
	mu.Lock()
	victim := pidOf(h, calls[0].PID)
	mu.Unlock()
	removed := make(chan error, 1)
	go func() {
		_, err := h.RemoveInstance(ctx, victim)
		removed <- err
	}()
	waitFor(t, "the removal to begin", func() bool { return !slices.Contains(h.RunningInstances(), victim) })
	close(release)
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if err := h.Send(ctx, statusLine("o-1", "o-1:2", "Paid", 2)); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[1].Msg.MessageID != "o-1:2" || pidOf(h, calls[1].PID) == victim {
		t.Fatalf("calls %+v: want o-1:1 on %s, then o-1:2 on the other instance", calls, victim)
	}
	_, results := h.stats.snapshot()
	if !mapsEqual(results, map[string]int{"Applied": 2}) {
		t.Errorf("results %v, want 2 Applied: the call in flight finished and was completed", results)
	}
	for _, s := range h.Instances() {
		if s.ID == victim && (s.State != InstanceRemoved || s.Results["Applied"] != 1) {
			t.Errorf("%s: %+v, want removed with its one call Applied", victim, s)
		}
	}
	select {
	case <-h.HandlerDone():
		t.Errorf("HandlerDone closed by a removal: %v", h.HandlerErr())
	default:
	}
}

// TestKillInstanceSessionMovesAfterLockExpiry: a killed instance settles
// nothing and closes nothing; the message is delivered again, on the
// other instance, once the session lock ran out.
func TestKillInstanceSessionMovesAfterLockExpiry(t *testing.T) {
	t.Parallel()
	const lock = time.Second
	h, up := testHost(t, appFiles(1), func(o *Options) {
		o.Instances = 2
		o.Queues.LockDuration = lock
	})
	var mu sync.Mutex
	var calls []call
	var at []time.Time
	inFirst := make(chan struct{})
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		mu.Lock()
		calls = append(calls, c)
		at = append(at, h.Clock().Now())
		first := len(calls) == 1
		mu.Unlock()
		if first {
			close(inFirst)
			<-r.Context().Done() // the instance dies under this call
			return
		}
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
		t.Fatal(err)
	}
	<-inFirst
	mu.Lock()
	victim := pidOf(h, calls[0].PID)
	lockedUntil := calls[0].Msg.SessionLockedUntil
	mu.Unlock()
	if _, err := h.KillInstance(victim); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[1].Msg.MessageID != "o-1:1" || calls[1].Msg.DeliveryCount != 2 || pidOf(h, calls[1].PID) == victim {
		t.Fatalf("calls %+v: want o-1:1 again, delivery 2, on the other instance", calls)
	}
	// The encoding of SessionLockedUntil drops fractions of a second.
	if at[1].Before(lockedUntil.Add(-time.Second)) {
		t.Errorf("delivered again at %s, before the session lock ran out at %s", at[1], lockedUntil)
	}
	_, results := h.stats.snapshot()
	if !mapsEqual(results, map[string]int{"Applied": 1}) {
		t.Errorf("results %v, want only the redelivery's Applied: a killed instance settles nothing", results)
	}
	sum := h.Instances()
	if sum[0].ID != victim && sum[1].ID != victim {
		t.Fatalf("instances %+v lack %s", sum, victim)
	}
	for _, s := range sum {
		if s.ID == victim && (s.State != InstanceKilled || s.Invocations != 1 || len(s.Results) != 0) {
			t.Errorf("%s: %+v, want killed, one invocation, no result", victim, s)
		}
	}
	select {
	case <-h.HandlerDone():
		t.Errorf("HandlerDone closed by a kill: %v", h.HandlerErr())
	default:
	}
}

func TestScaleErrors(t *testing.T) {
	t.Parallel()
	h, _ := testHost(t, appFiles(1), nil)
	ctx := testCtx(t)
	if _, err := h.RemoveInstance(ctx, ""); !errors.Is(err, ErrLastInstance) {
		t.Errorf("removing the only instance: %v, want ErrLastInstance", err)
	}
	if _, err := h.KillInstance("OrderStatus-1"); !errors.Is(err, ErrLastInstance) {
		t.Errorf("killing the only instance: %v, want ErrLastInstance", err)
	}
	if _, err := h.KillInstance("http"); !errors.Is(err, ErrLastInstance) {
		t.Errorf("killing the HTTP group's only instance: %v, want ErrLastInstance", err)
	}
	id, err := h.AddInstance(ctx, "")
	if err != nil || id != "OrderStatus-2" {
		t.Fatalf("AddInstance = %q, %v; want OrderStatus-2", id, err)
	}
	if id, err := h.AddInstance(ctx, "http"); err != nil || id != "http-2" {
		t.Fatalf(`AddInstance("http") = %q, %v; want http-2`, id, err)
	}
	if _, err := h.AddInstance(ctx, "Nope"); !errors.Is(err, ErrUnknownGroup) {
		t.Errorf("adding to a group the app lacks: %v, want ErrUnknownGroup", err)
	}
	if _, err := h.KillInstance("OrderStatus-9"); !errors.Is(err, ErrNoInstance) {
		t.Errorf("killing OrderStatus-9: %v, want ErrNoInstance", err)
	}
	if _, err := h.KillInstance("instance-1"); !errors.Is(err, ErrNoInstance) {
		t.Errorf("killing instance-1: %v, want ErrNoInstance", err)
	}
	if id, err := h.KillInstance("2"); err != nil || id != "OrderStatus-2" {
		t.Errorf(`KillInstance("2") = %q, %v; want OrderStatus-2`, id, err)
	}
	if id, err := h.KillInstance("http"); err != nil || id != "http-2" {
		t.Errorf(`KillInstance("http") = %q, %v; want http-2, the newest of the group`, id, err)
	}
	if _, err := h.Scale(ctx, "explode", ""); err == nil {
		t.Errorf("an unknown action is no error")
	}
	if _, err := New(Options{AppRoot: writeApp(t, appFiles(1)), Instances: MaxInstances + 1}); err == nil {
		t.Errorf("New with %d instances: no error", MaxInstances+1)
	}
}

// TestPlayAppliesScaleLines: a scale line in a workload changes the
// instances at its time and is no message.
func TestPlayAppliesScaleLines(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []string
	h, up := testHost(t, appFiles(1), func(o *Options) {
		o.Queues.LockDuration = time.Second // the killed instance's session comes back soon
		o.OnScale = func(action, id string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				events = append(events, action+" failed")
				return
			}
			events = append(events, action+" "+id)
		}
	})
	up.set(func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, "Applied") })
	lines := []ScenarioLine{
		statusLine("o-1", "o-1:1", "Created", 1),
		{Scale: scenario.ScaleAdd},
		{Scale: scenario.ScaleKill, Instance: "1", SendAfter: 10 * time.Millisecond},
		{Scale: scenario.ScaleRemove},
		statusLine("o-1", "o-1:2", "Paid", 2),
	}
	ctx := testCtx(t)
	if err := h.Play(ctx, lines); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"add OrderStatus-2", "kill OrderStatus-1", "remove failed"}; !slices.Equal(events, want) {
		t.Errorf("scale events = %v, want %v", events, want)
	}
	if got := h.RunningInstances(); !slices.Equal(got, []string{"http-1", "OrderStatus-2"}) {
		t.Errorf("running = %v, want http-1 and OrderStatus-2", got)
	}
	if sent, _ := h.stats.snapshot(); sent != 2 {
		t.Errorf("sent %d, want the 2 messages only", sent)
	}
}

func TestParseScale(t *testing.T) {
	t.Parallel()
	got, err := ParseScale("add@30s, remove@2m,kill:OrderStatus-1@3m,kill:2@4m,add:http@5m")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		action, id string
		after      time.Duration
	}{{"add", "", 30 * time.Second}, {"remove", "", 2 * time.Minute}, {"kill", "OrderStatus-1", 3 * time.Minute}, {"kill", "2", 4 * time.Minute},
		{"add", "http", 5 * time.Minute}}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Scale != w.action || got[i].Instance != w.id || got[i].SendAfter != w.after {
			t.Errorf("event %d = %s %q %s, want %s %q %s", i, got[i].Scale, got[i].Instance, got[i].SendAfter, w.action, w.id, w.after)
		}
	}
	for _, bad := range []string{"add", "grow@1s", "add@soon", "add:2@1s", "remove@-1s", ""} {
		if _, err := ParseScale(bad); err == nil {
			t.Errorf("ParseScale(%q): no error", bad)
		}
	}
}

func TestMergeScale(t *testing.T) {
	t.Parallel()
	lines := []ScenarioLine{{MessageID: "a"}, {MessageID: "b", SendAfter: 10 * time.Second}, {MessageID: "c", SendAfter: 2 * time.Second}}
	events := []ScenarioLine{{Scale: "add", SendAfter: 5 * time.Second}, {Scale: "kill", SendAfter: time.Minute}}
	var got []string
	for _, l := range mergeScale(lines, events) {
		got = append(got, l.MessageID+l.Scale)
	}
	if want := []string{"a", "add", "b", "c", "kill"}; !slices.Equal(got, want) {
		t.Errorf("merged = %v, want %v", got, want)
	}
	if n := messages(mergeScale(lines, events)); n != 3 {
		t.Errorf("messages = %d, want 3", n)
	}
}

func TestLogTapCountsSettledLines(t *testing.T) {
	t.Parallel()
	var c instanceCounts
	var out strings.Builder
	tap := &logTap{w: &out, c: &c}
	lines := `{"msg":"handler listening","instance_id":"instance-1"}
{"msg":"message settled","message_id":"o-1:2","result":"Applied","round_trips":3,"etag_conflicts":1,"cache_hit":true}
{"msg":"message settled","message_id":"o-1:3","result":"Applied","round_trips":1}
`
	// In two pieces, split inside a line.
	tap.Write([]byte(lines[:60]))
	tap.Write([]byte(lines[60:]))
	if out.String() != lines {
		t.Errorf("output passed on = %q, want it unchanged", out.String())
	}
	if c.roundTrips != 4 || c.conflicts != 1 || c.cacheHits != 1 {
		t.Errorf("counts = %d round trips, %d conflicts, %d hits; want 4, 1, 1", c.roundTrips, c.conflicts, c.cacheHits)
	}
}

// TestMainInstancesFlag: --instances and --scale are checked before
// anything starts.
func TestMainInstancesFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--instances", "0"}, {"--instances", "17"}, {"--instances", "OrderStatus=0"},
		{"--instances", "OrderStatus"}, {"--instances", "http=2,http=3"}, {"--instances", "=2"}, {"--scale", "grow@1s"}} {
		code, _, stderr := runMain(t, args...)
		if code != ExitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, args[0]) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %s", args, code, stderr, args[0])
		}
	}
}

func TestParseInstances(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want InstanceCounts
	}{
		{"3", InstanceCounts{Default: 3}},
		{"OrderStatus=3", InstanceCounts{ByGroup: map[string]int{"OrderStatus": 3}}},
		{" OrderStatus=3, http=2 ,DeadLetterSweeper=1", InstanceCounts{ByGroup: map[string]int{"OrderStatus": 3, "http": 2, "DeadLetterSweeper": 1}}},
	}
	for _, tt := range tests {
		got, err := ParseInstances(tt.in)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseInstances(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "0", "17", "-1", "http", "http=", "http=x", "=2", "http=0", "http=17", "http=1,http=2", "3,http=2"} {
		if _, err := ParseInstances(bad); err == nil {
			t.Errorf("ParseInstances(%q): no error", bad)
		}
	}
}

// TestGroupsOfTheApp: the repository's app has Flex's groups: OrderStatus
// (the default, on the workload queue), DeadLetterSweeper and http, each
// with what runs on it; counts name them case-insensitively, and a group
// the app lacks is refused.
func TestGroupsOfTheApp(t *testing.T) {
	t.Parallel()
	h, err := New(Options{AppRoot: repoRoot, Env: []string{}, HTTPAddr: "off", Instances: 3,
		GroupInstances: map[string]int{"http": 2, "deadlettersweeper": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Groups(), []string{"OrderStatus", "DeadLetterSweeper", "http"}; !slices.Equal(got, want) {
		t.Errorf("Groups = %v, want %v", got, want)
	}
	what := map[string]string{}
	for _, g := range h.groups {
		var fns []string
		for _, d := range g.sessions {
			fns = append(fns, "session:"+d.fn)
		}
		for _, d := range g.timers {
			fns = append(fns, "timer:"+d.fn)
		}
		for _, r := range g.routes {
			fns = append(fns, "http:"+r.fn)
		}
		slices.Sort(fns)
		what[g.name] = strings.Join(fns, " ")
	}
	want := map[string]string{"function:OrderStatus": "session:OrderStatus", "function:DeadLetterSweeper": "timer:DeadLetterSweeper",
		"http": "http:GetOrder http:Metrics"}
	if !reflect.DeepEqual(what, want) {
		t.Errorf("groups run %v, want %v", what, want)
	}
	counts, err := h.startCounts()
	if err != nil {
		t.Fatal(err)
	}
	for key, n := range map[string]int{"OrderStatus": 3, "DeadLetterSweeper": 1, "http": 2} {
		if got := counts[h.group(key)]; got != n {
			t.Errorf("%s starts with %d instances, want %d", key, got, n)
		}
	}
	h.opts.GroupInstances = map[string]int{"Poison": 1}
	if _, err := h.startCounts(); !errors.Is(err, ErrUnknownGroup) {
		t.Errorf("a group the app lacks: %v, want ErrUnknownGroup", err)
	}
}
