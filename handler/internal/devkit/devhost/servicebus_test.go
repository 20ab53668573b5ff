package devhost

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// call is one invocation as the fake handler saw it.
type call struct {
	Path string
	Msg  hostproto.ServiceBusMessage
	PID  int
}

func decodeCall(t *testing.T, r *http.Request) call {
	t.Helper()
	body, _ := io.ReadAll(r.Body)
	m, err := hostproto.DecodeServiceBus(body, "message")
	if err != nil {
		t.Errorf("the invocation does not decode: %v\n%s", err, body)
	}
	if r.Header.Get("X-Azure-Functions-InvocationId") == "" {
		t.Errorf("invocation without X-Azure-Functions-InvocationId")
	}
	pid, _ := strconv.Atoi(r.Header.Get(headerFakePID))
	return call{Path: r.URL.Path, Msg: m, PID: pid}
}

func TestSettleByAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		answer      func(w http.ResponseWriter)
		wantResults map[string]int
		wantDLQ     bool
	}{
		{
			name:        "2xx completes",
			answer:      func(w http.ResponseWriter) { reply(w, http.StatusOK, "Applied") },
			wantResults: map[string]int{"Applied": 1},
		},
		{
			name: "2xx without result completes",
			answer: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{}`)
			},
			wantResults: map[string]int{ResultCompleted: 1},
		},
		{
			name:        "5xx abandons until dead-lettered",
			answer:      func(w http.ResponseWriter) { reply(w, http.StatusInternalServerError, "Failed") },
			wantResults: map[string]int{ResultAbandoned: 2},
			wantDLQ:     true,
		},
		{
			name:        "404 abandons",
			answer:      func(w http.ResponseWriter) { http.NotFound(w, nil) },
			wantResults: map[string]int{ResultAbandoned: 2},
			wantDLQ:     true,
		},
		{
			name:        "2xx as text/plain fails",
			answer:      func(w http.ResponseWriter) { w.Header().Set("Content-Type", "text/plain"); io.WriteString(w, `{}`) },
			wantResults: map[string]int{ResultAbandoned: 2},
			wantDLQ:     true,
		},
		{
			name:        "2xx with an empty body fails",
			answer:      func(w http.ResponseWriter) { w.Header().Set("Content-Type", "application/json") },
			wantResults: map[string]int{ResultAbandoned: 2},
			wantDLQ:     true,
		},
		{
			name: "no answer abandons",
			answer: func(w http.ResponseWriter) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
			},
			wantResults: map[string]int{ResultAbandoned: 2},
			wantDLQ:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, up := testHost(t, appFiles(2), func(o *Options) { o.Queues.MaxDeliveryCount = 2 })
			var mu sync.Mutex
			var deliveries []int32
			up.set(func(w http.ResponseWriter, r *http.Request) {
				c := decodeCall(t, r)
				if c.Path != "/OrderStatus" {
					t.Errorf("path: got %s, want /OrderStatus", c.Path)
				}
				mu.Lock()
				deliveries = append(deliveries, c.Msg.DeliveryCount)
				mu.Unlock()
				tt.answer(w)
			})
			ctx := testCtx(t)
			if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
				t.Fatal(err)
			}
			if err := h.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			_, results := h.stats.snapshot()
			if !reflect.DeepEqual(results, tt.wantResults) {
				t.Errorf("results: got %v, want %v", results, tt.wantResults)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []int32{1}
			if tt.wantDLQ {
				want = []int32{1, 2}
			}
			if !reflect.DeepEqual(deliveries, want) {
				t.Errorf("delivery counts seen: got %v, want %v", deliveries, want)
			}
			dl, err := broker.PeekAll(ctx, h.Broker(), broker.Source{Queue: h.Queue(), DeadLetter: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(dl) == 1; got != tt.wantDLQ {
				t.Errorf("dead-lettered: got %d messages, want dead-lettered=%v", len(dl), tt.wantDLQ)
			}
			if tt.wantDLQ && len(dl) == 1 && dl[0].DeadLetterReason != broker.ReasonMaxDeliveryCountExceeded {
				t.Errorf("dead-letter reason: got %q, want %s", dl[0].DeadLetterReason, broker.ReasonMaxDeliveryCountExceeded)
			}
		})
	}
}

func TestInvocationContent(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(1), nil)
	got := make(chan call, 1)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		got <- decodeCall(t, r)
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	l := statusLine("o-7", "o-7:1", "Created", 1)
	l.ApplicationProperties = map[string]any{"k": "v"}
	if err := h.Send(ctx, l); err != nil {
		t.Fatal(err)
	}
	c := <-got
	m := c.Msg
	if m.MessageID != "o-7:1" || m.SessionID != "o-7" || m.Subject != "OrderStatusChanged" || m.ContentType != "application/json" ||
		string(m.Body) != string(l.Body) || m.DeliveryCount != 1 || m.SequenceNumber == 0 || m.LockToken == "" ||
		m.EnqueuedTime.IsZero() || m.ExpiresAt.IsZero() || m.SessionLockedUntil.IsZero() || m.ApplicationProperties["k"] != "v" {
		t.Errorf("invocation: got %+v", m)
	}
	if c.PID != h.HandlerPID() {
		t.Errorf("handled by pid %d, want the handler %d", c.PID, h.HandlerPID())
	}
}

func TestHandlerKilledRestartedRedelivered(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(2), nil)
	var mu sync.Mutex
	var calls []call
	inFirst := make(chan struct{})
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		mu.Lock()
		calls = append(calls, c)
		first := len(calls) == 1
		mu.Unlock()
		if first {
			close(inFirst)
			<-r.Context().Done() // the handler process dies under this call
			return
		}
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
		t.Fatal(err)
	}
	<-inFirst
	firstPID := h.HandlerPID()
	if err := syscall.Kill(firstPID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the handler: %v", err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("calls: got %d, want 2 (the killed one and the redelivery)", len(calls))
	}
	if calls[0].Msg.DeliveryCount != 1 || calls[1].Msg.DeliveryCount != 2 || calls[1].Msg.MessageID != "o-1:1" {
		t.Errorf("deliveries: got %+v and %+v, want o-1:1 with delivery counts 1 then 2", calls[0].Msg, calls[1].Msg)
	}
	if calls[1].PID == firstPID || calls[1].PID != h.HandlerPID() {
		t.Errorf("redelivery handled by pid %d; killed %d, running %d", calls[1].PID, firstPID, h.HandlerPID())
	}
	// One handler per instance (OrderStatus-1, http-1), and the restart.
	if got, want := h.HandlerStarts(), len(h.Instances())+1; got != want {
		t.Errorf("handler starts: got %d, want %d", got, want)
	}
	_, results := h.stats.snapshot()
	if want := map[string]int{ResultAbandoned: 1, "Applied": 1}; !reflect.DeepEqual(results, want) {
		t.Errorf("results: got %v, want %v", results, want)
	}
}

func TestConcurrencyLimits(t *testing.T) {
	t.Parallel()
	const sessions, perSession, maxSessions = 8, 4, 3
	h, up := testHost(t, appFiles(maxSessions), nil)
	var (
		mu        sync.Mutex
		running   = map[string]int{}
		total     int
		peak      int
		overlap   []string
		order     = map[string][]string{}
		reached   = make(chan struct{})
		reachOnce sync.Once
	)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		s := c.Msg.SessionID
		mu.Lock()
		running[s]++
		total++
		if running[s] > 1 {
			overlap = append(overlap, s)
		}
		peak = max(peak, total)
		order[s] = append(order[s], c.Msg.MessageID)
		if total == maxSessions {
			reachOnce.Do(func() { close(reached) })
		}
		mu.Unlock()
		// Hold the calls until maxSessions run at once, so the limit is
		// reached for certain.
		select {
		case <-reached:
		case <-time.After(10 * time.Second):
			t.Errorf("never %d calls at once", maxSessions)
		}
		mu.Lock()
		running[s]--
		total--
		mu.Unlock()
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	var lines []ScenarioLine
	for i := range perSession {
		for s := range sessions {
			id := "o-" + strconv.Itoa(s)
			lines = append(lines, statusLine(id, id+":"+strconv.Itoa(i+1), "Paid", i+1))
		}
	}
	if err := h.Play(ctx, lines); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlap) > 0 {
		t.Errorf("two calls at once for sessions %v, want at most one per session", overlap)
	}
	if peak != maxSessions {
		t.Errorf("peak concurrent calls: got %d, want maxConcurrentSessions %d", peak, maxSessions)
	}
	for s := range sessions {
		id := "o-" + strconv.Itoa(s)
		var want []string
		for i := range perSession {
			want = append(want, id+":"+strconv.Itoa(i+1))
		}
		if !slices.Equal(order[id], want) {
			t.Errorf("session %s delivered in order %v, want %v", id, order[id], want)
		}
	}
}

func TestLockLostWithoutRenewal(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(2), func(o *Options) {
		o.DisableLockRenewal = true
		o.Queues.LockDuration = 300 * time.Millisecond
	})
	second := make(chan struct{})
	var mu sync.Mutex
	var seen []int32
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		mu.Lock()
		seen = append(seen, c.Msg.DeliveryCount)
		mu.Unlock()
		if c.Msg.DeliveryCount == 1 {
			// Answer only after the lock ran out and the message was
			// delivered again.
			select {
			case <-second:
			case <-time.After(15 * time.Second):
				t.Errorf("the message was not delivered again after its lock expired")
			}
		} else {
			close(second)
		}
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both answers settled", func() bool {
		_, r := h.stats.snapshot()
		return r[ResultLockLost]+r["Applied"] == 2
	})
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	_, results := h.stats.snapshot()
	if want := map[string]int{ResultLockLost: 1, "Applied": 1}; !reflect.DeepEqual(results, want) {
		t.Errorf("results: got %v, want %v", results, want)
	}
}

func TestLockRenewedDuringLongCall(t *testing.T) {
	t.Parallel()
	const lock = 200 * time.Millisecond
	h, up := testHost(t, appFiles(2), func(o *Options) { o.Queues.LockDuration = lock })
	var mu sync.Mutex
	var seen []int32
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		mu.Lock()
		seen = append(seen, c.Msg.DeliveryCount)
		mu.Unlock()
		time.Sleep(4 * lock) // well past the lock duration
		reply(w, http.StatusOK, "Applied")
	})
	ctx := testCtx(t)
	if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	_, results := h.stats.snapshot()
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"Applied": 1}; !reflect.DeepEqual(results, want) || !slices.Equal(seen, []int32{1}) {
		t.Errorf("results %v, deliveries %v; want %v after one delivery (the lock renewed)", results, seen, want)
	}
}

func TestSummaryRecordsParkedAndDeadLettered(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(2), func(o *Options) { o.Queues.MaxDeliveryCount = 1 })
	up.set(func(w http.ResponseWriter, r *http.Request) {
		c := decodeCall(t, r)
		switch c.Msg.MessageID {
		case "o-1:bad":
			// Park as the handler does, through the broker it is given.
			err := h.rec.Send(r.Context(), h.PoisonQueue(), broker.Message{MessageID: "o-1:bad:parked", Body: c.Msg.Body,
				ApplicationProperties: map[string]any{"DeadLetterReason": "InvalidPayload", "OriginalMessageId": "o-1:bad"}})
			if err != nil {
				t.Errorf("park: %v", err)
			}
			reply(w, http.StatusOK, "Parked")
		case "o-2:1":
			reply(w, http.StatusServiceUnavailable, "Failed")
		default:
			reply(w, http.StatusOK, "Applied")
		}
	})
	up2 := up.fn
	up.set(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			switch r.URL.Path {
			case "/api/orders/o-1":
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"orderId": "o-1", "status": "Created", "lastSequence": 1})
			default:
				http.NotFound(w, r)
			}
			return
		}
		up2(w, r)
	})
	ctx := testCtx(t)
	bad := ScenarioLine{Subject: "OrderStatusChanged", SessionID: "o-1", MessageID: "o-1:bad", Body: []byte("{not json")}
	for _, l := range []ScenarioLine{statusLine("o-1", "o-1:1", "Created", 1), bad, statusLine("o-2", "o-2:1", "Created", 1)} {
		if err := h.Send(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := h.Summary(ctx)
	if err != nil {
		t.Fatalf("Summary: %v", err)
	}
	if want := map[string]OrderRow{"o-1": {Status: "Created", LastSequence: 1}}; !reflect.DeepEqual(s.Orders, want) {
		t.Errorf("orders: got %v, want %v", s.Orders, want)
	}
	if len(s.Parked) != 1 || s.Parked[0].MessageID != "o-1:bad" || s.Parked[0].Reason != "InvalidPayload" || s.PoisonDepth != 1 {
		t.Errorf("parked: got %+v (depth %d), want o-1:bad InvalidPayload", s.Parked, s.PoisonDepth)
	}
	if len(s.DeadLettered) != 1 || s.DeadLettered[0].MessageID != "o-2:1" || s.DeadLettered[0].Reason != broker.ReasonMaxDeliveryCountExceeded || s.DeadLetterDepth != 1 {
		t.Errorf("dead-lettered: got %+v (depth %d), want o-2:1 MaxDeliveryCountExceeded", s.DeadLettered, s.DeadLetterDepth)
	}
	if want := map[string]int{"Applied": 1, "Parked": 1, ResultAbandoned: 1}; !reflect.DeepEqual(s.Results, want) {
		t.Errorf("results: got %v, want %v", s.Results, want)
	}
	if len(s.Violations) != 0 {
		t.Errorf("violations: got %q, want none", s.Violations)
	}
	if s.Accounting.Sent != 3 {
		t.Errorf("sent: got %d, want 3", s.Accounting.Sent)
	}

	// A sweeper takes the dead-lettered message out through the loopback
	// broker, whose settle request names it only by lock token: the
	// summary still knows it, and nothing is lost.
	cl, err := loopback.NewClient(h.BrokerURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	dlq := broker.Source{Queue: h.Queue(), DeadLetter: true}
	got, err := cl.Receive(ctx, dlq, 10, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive from the dead-letter queue: got %d messages, %v; want 1", len(got), err)
	}
	if err := cl.Complete(ctx, dlq, got[0]); err != nil {
		t.Fatalf("complete from the dead-letter queue: %v", err)
	}
	if s, err = h.Summary(ctx); err != nil {
		t.Fatalf("Summary: %v", err)
	}
	if len(s.DeadLettered) != 1 || s.DeadLetterDepth != 0 {
		t.Fatalf("dead-lettered after the sweep: got %+v (depth %d), want o-2:1 taken out", s.DeadLettered, s.DeadLetterDepth)
	}
	want := Entry{MessageID: "o-2:1", Reason: broker.ReasonMaxDeliveryCountExceeded, Queue: h.Queue(), SessionID: "o-2", DeliveryCount: got[0].DeliveryCount, Removed: true}
	if s.DeadLettered[0] != want {
		t.Errorf("dead-lettered after the sweep: got %+v, want %+v", s.DeadLettered[0], want)
	}
	if len(s.Violations) != 0 {
		t.Errorf("violations after the sweep: got %q, want none", s.Violations)
	}
}

// TestQueueWithoutSessions: the app's triggers are session-enabled; a
// trigger on a queue without sessions is refused at New, naming its file.
func TestQueueWithoutSessions(t *testing.T) {
	t.Parallel()
	files := appFiles(1)
	files["functions/Plain/function.json"] = `{"bindings":[{"type":"serviceBusTrigger","direction":"in","name":"message",
	  "queueName":"plain","connection":"ServiceBusConnection","dataType":"binary"}]}`
	_, err := New(Options{AppRoot: writeApp(t, files), Env: []string{}, HTTPAddr: "off"})
	if err == nil || !strings.Contains(err.Error(), "functions/Plain/function.json: only session-enabled queue triggers are supported") {
		t.Errorf("New: got %v, want the Plain function refused", err)
	}
}

func TestHandlerEnvironment(t *testing.T) {
	t.Parallel()
	h, _ := testHost(t, appFiles(1), func(o *Options) {
		o.Settings = maps.Clone(o.Settings)
		o.Settings["ServiceBusConnection__fullyQualifiedNamespace"] = "prod.servicebus.windows.net"
		o.Settings["ServiceBusConnection__clientId"] = "x"
		o.Settings["MY_SETTING"] = "v"
	})
	base, err := groupReadier{h.pool, nil}.Ready(testCtx(t))
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
	got := map[string]string{}
	for _, kv := range env.Environ {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	root := h.app.Root
	for k, want := range map[string]string{
		SettingDevBrokerURL:            h.BrokerURL(),
		SettingAppRootPath:             root,
		"MY_SETTING":                   "v",
		SettingQueue:                   DefaultQueue,
		SettingPoisonQueue:             DefaultPoisonQueue,
		"FUNCTIONS_CUSTOMHANDLER_PORT": strings.TrimPrefix(base, "http://127.0.0.1:"),
	} {
		if got[k] != want {
			t.Errorf("handler env %s: got %q, want %q", k, got[k], want)
		}
	}
	for _, k := range []string{"ServiceBusConnection__fullyQualifiedNamespace", "ServiceBusConnection__clientId"} {
		if v, ok := got[k]; ok {
			t.Errorf("handler env %s=%q: the development host is the Service Bus, want it left out", k, v)
		}
	}
	if got["FUNCTIONS_CUSTOMHANDLER_WORKER_ID"] == "" {
		t.Errorf("handler env lacks FUNCTIONS_CUSTOMHANDLER_WORKER_ID")
	}
	if env.Dir != root {
		t.Errorf("handler working directory: got %q, want the app root %q", env.Dir, root)
	}
}
