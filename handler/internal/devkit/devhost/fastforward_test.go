package devhost

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// jumps records the host's fast-forwards.
type jumps struct {
	mu  sync.Mutex
	all []string
	sum time.Duration
}

func (j *jumps) record(by time.Duration, to string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.all = append(j.all, to)
	j.sum += by
}

func (j *jumps) total() (time.Duration, []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sum, append([]string(nil), j.all...)
}

// calls records the message ids the handler was invoked with and answers
// Applied.
type calls struct {
	mu  sync.Mutex
	ids []string
}

func (c *calls) handler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var inv struct {
		Metadata struct{ MessageId string }
	}
	_ = json.Unmarshal(body, &inv)
	var id string
	_ = json.Unmarshal([]byte(inv.Metadata.MessageId), &id)
	if id == "" {
		id = inv.Metadata.MessageId
	}
	c.mu.Lock()
	c.ids = append(c.ids, id)
	c.mu.Unlock()
	reply(w, http.StatusOK, "Applied")
}

func (c *calls) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ids...)
}

func timeoutLine(session string, after time.Duration) ScenarioLine {
	return ScenarioLine{
		Subject: "PaymentTimeoutCheck", SessionID: session, MessageID: session + ":payment-timeout",
		ContentType: "application/json", Body: []byte(`{"orderId":"` + session + `"}`), ScheduleAfter: after,
	}
}

// TestFastForwardScheduled: in real time, a message scheduled 30 minutes
// ahead is handled at once when nothing else is left to do.
func TestFastForwardScheduled(t *testing.T) {
	t.Parallel()
	var j jumps
	h, up := testHost(t, appFiles(2), func(o *Options) {
		o.FastForward = true
		o.OnFastForward = j.record
	})
	var c calls
	up.set(c.handler)
	ctx := testCtx(t)
	start := h.Clock().Now()
	for _, l := range []ScenarioLine{statusLine("o-1", "o-1:1", "Created", 1), timeoutLine("o-1", 30*time.Minute)} {
		if err := h.Send(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle: %v (a 30m schedule in real time must be fast-forwarded)", err)
	}
	if got := c.got(); strings.Join(got, " ") != "o-1:1 o-1:payment-timeout" {
		t.Errorf("calls: got %q, want o-1:1, then the timeout", got)
	}
	sum, to := j.total()
	if sum < 29*time.Minute || sum > 31*time.Minute || to[len(to)-1] != JumpScheduled {
		t.Errorf("jumps: %v in all (%q), want about 30m ending %q", sum, to, JumpScheduled)
	}
	if elapsed := h.Clock().Now().Sub(start); elapsed < 30*time.Minute {
		t.Errorf("the clock moved %v, want at least 30m", elapsed)
	}
	if _, r := h.stats.snapshot(); r[ResultLockLost] != 0 || r[ResultAbandoned] != 0 {
		t.Errorf("results %v: a jump cost a lock", r)
	}
}

// TestFastForwardSendAfter: Play's hold of a line is skipped too, and the
// broker sees the time as passed: a replay after the 10-minute duplicate
// detection window is delivered again.
func TestFastForwardSendAfter(t *testing.T) {
	t.Parallel()
	var j jumps
	h, up := testHost(t, appFiles(2), func(o *Options) {
		o.FastForward = true
		o.OnFastForward = j.record
	})
	var c calls
	up.set(c.handler)
	ctx := testCtx(t)
	replay := statusLine("o-1", "o-1:1", "Created", 1)
	replay.SendAfter = 11 * time.Minute
	if err := h.Play(ctx, []ScenarioLine{statusLine("o-1", "o-1:1", "Created", 1), replay}); err != nil {
		t.Fatalf("Play: %v", err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.got(); strings.Join(got, " ") != "o-1:1 o-1:1" {
		t.Errorf("calls: got %q, want o-1:1 twice (the replay came after the duplicate window)", got)
	}
	if _, to := j.total(); len(to) == 0 || to[len(to)-1] != JumpSendAfter {
		t.Errorf("jumps: %q, want the last %q", to, JumpSendAfter)
	}
}

// TestFastForwardWaitsForCalls: no jump while a call runs (its lock would
// run out in it); the jump comes once the call answered.
func TestFastForwardWaitsForCalls(t *testing.T) {
	t.Parallel()
	var j jumps
	h, up := testHost(t, appFiles(2), func(o *Options) {
		o.FastForward = true
		o.OnFastForward = j.record
	})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var c calls
	up.set(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
			<-release // only the first call waits
		default:
		}
		c.handler(w, r)
	})
	ctx := testCtx(t)
	for _, l := range []ScenarioLine{statusLine("o-1", "o-1:1", "Created", 1), timeoutLine("o-2", 30*time.Minute)} {
		if err := h.Send(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- h.WaitIdle(ctx) }()
	<-entered
	time.Sleep(10 * pollInterval) // WaitIdle looks ten times meanwhile
	if sum, to := j.total(); sum != 0 {
		t.Errorf("the clock jumped %v (%q) while a call ran", sum, to)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
	if sum, _ := j.total(); sum < 29*time.Minute {
		t.Errorf("jumps after the call: %v, want about 30m", sum)
	}
	if _, r := h.stats.snapshot(); r["Applied"] != 2 || r[ResultLockLost] != 0 {
		t.Errorf("results %v, want 2 Applied and no lost lock", r)
	}
}

func TestFastForwardNeedsAnAdvancingClock(t *testing.T) {
	t.Parallel()
	_, err := New(Options{
		AppRoot:     writeApp(t, appFiles(1)),
		Env:         []string{},
		Clock:       clock.Real(),
		FastForward: true,
	})
	if err == nil || !strings.Contains(err.Error(), "FastForward") {
		t.Errorf("New: got %v, want an error about FastForward's clock", err)
	}
}

// TestFastForwardIdleSessions: with more sessions than workers, each
// worker holds a finished session for sessionIdleTimeout (here a minute)
// before it takes the next; that wait is skipped too, without a lost lock.
func TestFastForwardIdleSessions(t *testing.T) {
	t.Parallel()
	files := appFiles(2)
	files["host.json"] = strings.Replace(files["host.json"], `"sessionIdleTimeout":"00:00:01"`, `"sessionIdleTimeout":"00:01:00"`, 1)
	var j jumps
	h, up := testHost(t, files, func(o *Options) {
		o.FastForward = true
		o.OnFastForward = j.record
	})
	var c calls
	up.set(c.handler)
	ctx := testCtx(t)
	for _, s := range []string{"o-1", "o-2", "o-3", "o-4", "o-5", "o-6"} {
		if err := h.Send(ctx, statusLine(s, s+":1", "Created", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle: %v (idle sessions must be fast-forwarded)", err)
	}
	if got := c.got(); len(got) != 6 {
		t.Errorf("calls: got %q, want one per session", got)
	}
	if _, to := j.total(); len(to) == 0 || to[0] != JumpIdleSessions {
		t.Errorf("jumps: %q, want them to let idle sessions close", to)
	}
	if _, r := h.stats.snapshot(); r["Applied"] != 6 || r[ResultLockLost] != 0 {
		t.Errorf("results %v, want 6 Applied and no lost lock", r)
	}
}

// TestFastForwardKilledInstanceLocks: the session lock a killed instance
// left (a minute, in real time) is skipped when nothing else runs, and the
// message is delivered again on the other instance.
func TestFastForwardKilledInstanceLocks(t *testing.T) {
	t.Parallel()
	var j jumps
	h, up := testHost(t, appFiles(1), func(o *Options) {
		o.Instances = 2
		o.FastForward = true
		o.OnFastForward = j.record
	})
	var mu sync.Mutex
	var pids []int
	inFirst := make(chan struct{})
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		mu.Lock()
		pids = append(pids, c.PID)
		first := len(pids) == 1
		mu.Unlock()
		if first {
			close(inFirst)
			<-r.Context().Done()
			return
		}
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t) // well under the minute the lock would take in real time
	if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
		t.Fatal(err)
	}
	<-inFirst
	mu.Lock()
	victim := pidOf(h, pids[0])
	mu.Unlock()
	if _, err := h.KillInstance(victim); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := h.WaitIdle(waitCtx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pids) != 2 || pidOf(h, pids[1]) == victim {
		t.Errorf("calls on pids %v: want the message again on the other instance", pids)
	}
	if _, all := j.total(); !slices.Contains(all, JumpLockExpiry) {
		t.Errorf("fast-forwards %v, want one %q", all, JumpLockExpiry)
	}
}

// TestSendAfterCountsFromTheStartAndHoldsLaterLines: sendAfter is the
// time since the workload's first line, not since the line before, and
// lines are sent in file order, so a line waits for every line before
// it: a line without sendAfter after one with 5m is sent at 5m, and a
// 1m line after it at 5m too (its minute has long passed). Enqueued
// times show it, mapped back to the host's clock: the handler receives
// them on the real one (Host.view).
func TestSendAfterCountsFromTheStartAndHoldsLaterLines(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(4), func(o *Options) { o.FastForward = true })
	var mu sync.Mutex
	enqueued := map[string]time.Time{}
	up.set(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := hostproto.DecodeServiceBus(body, "message")
		if err != nil {
			t.Errorf("decode: %v", err)
		}
		mu.Lock()
		enqueued[m.MessageID] = clock.OffsetOf(h.Clock(), time.Now()).ToClock(m.EnqueuedTime)
		mu.Unlock()
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	at := func(l ScenarioLine, d time.Duration) ScenarioLine { l.SendAfter = d; return l }
	lines := []ScenarioLine{
		statusLine("a", "a:1", "Created", 1),
		at(statusLine("b", "b:1", "Created", 1), 5*time.Minute),
		statusLine("c", "c:1", "Created", 1),
		at(statusLine("d", "d:1", "Created", 1), time.Minute),
		at(statusLine("e", "e:1", "Created", 1), 7*time.Minute),
	}
	start := h.Clock().Now()
	if err := h.Play(ctx, lines); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Enqueued times have whole seconds in the host protocol; allow for
	// that and for the moments between sends.
	for _, w := range []struct {
		id       string
		from, to time.Duration
	}{
		{"a:1", -time.Second, 30 * time.Second},
		{"b:1", 5*time.Minute - time.Second, 5*time.Minute + 30*time.Second},
		{"c:1", 5*time.Minute - time.Second, 5*time.Minute + 30*time.Second}, // held behind b
		{"d:1", 5*time.Minute - time.Second, 5*time.Minute + 30*time.Second}, // its 1m passed, but it comes after b
		{"e:1", 7*time.Minute - time.Second, 7*time.Minute + 30*time.Second}, // 7m from the start, not 7m after d
	} {
		got, ok := enqueued[w.id]
		if d := got.Sub(start); !ok || d < w.from || d > w.to {
			t.Errorf("%s enqueued %v after the start (seen %v), want %v to %v", w.id, d, ok, w.from, w.to)
		}
	}
}
