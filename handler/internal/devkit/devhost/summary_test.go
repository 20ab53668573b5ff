package devhost

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/parking"
)

func TestSummaryJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    Summary
		want string
	}{
		{
			name: "empty: objects and arrays, never null",
			s:    Summary{PoisonDepth: 1, DeadLetterDepth: 2, Violations: []string{"v"}},
			want: `{"orders":{},"results":{},"parked":[],"deadLettered":[],"archived":[],` +
				`"accounting":{"sent":0,"sentByHandlerOrCli":0,"completed":{},"deadLettered":0,"droppedAsDuplicates":0,"cancelledScheduled":0,"expiredDropped":0,"waiting":0,"unaccounted":0},` +
				`"instances":[],"outages":[]}`,
		},
		{
			name: "eight keys only, map keys sorted",
			s: Summary{
				Orders:       map[string]OrderRow{"o-2": {Status: "Paid", LastSequence: 2}, "o-1": {Status: "Created", LastSequence: 1}},
				Results:      map[string]int{"Stale": 1, "Applied": 3},
				Parked:       []Entry{{MessageID: "a", Reason: "InvalidPayload", ParkedID: "a:parked"}},
				DeadLettered: []Entry{{MessageID: "b", Reason: "MaxDeliveryCountExceeded", Queue: "q", DeliveryCount: 5}},
				Archived:     []Entry{{MessageID: "a", Reason: "InvalidPayload"}},
				Accounting:   Accounting{Sent: 9, Completed: map[string]int{"Stale": 1, "Applied": 3}, DeadLettered: 1, DroppedAsDuplicates: 4},
				Instances: []InstanceSummary{{ID: "OrderStatus-1", Group: "function:OrderStatus", State: InstanceRunning, Invocations: 4, Results: map[string]int{"Applied": 3},
					RoundTrips: 5, ETagConflicts: 1, CacheHits: 2, HandlerStarts: 1}},
				Outages: []OutageSummary{{Target: OutageTable, After: "2m", Duration: "30m", Ended: true, Refused: 40, Rescheduled: 3,
					DeadLettered: 1, Parked: 0}},
				Violations: []string{},
			},
			want: `{"orders":{"o-1":{"status":"Created","lastSequence":1},"o-2":{"status":"Paid","lastSequence":2}},` +
				`"results":{"Applied":3,"Stale":1},"parked":[{"messageId":"a","reason":"InvalidPayload"}],` +
				`"deadLettered":[{"messageId":"b","reason":"MaxDeliveryCountExceeded"}],"archived":[{"messageId":"a","reason":"InvalidPayload"}],` +
				`"accounting":{"sent":9,"sentByHandlerOrCli":0,"completed":{"Applied":3,"Stale":1},"deadLettered":1,` +
				`"droppedAsDuplicates":4,"cancelledScheduled":0,"expiredDropped":0,"waiting":0,"unaccounted":0},` +
				`"instances":[{"id":"OrderStatus-1","group":"function:OrderStatus","state":"running","invocations":4,"timerRuns":0,"results":{"Applied":3},"roundTrips":5,"etagConflicts":1,"cacheHits":2,"handlerStarts":1}],` +
				`"outages":[{"target":"table","after":"2m","duration":"30m","ended":true,"refusedRequests":40,"rescheduled":3,"deadLettered":1,"parked":0}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("JSON:\n got %s\nwant %s", got, tt.want)
			}
			path := filepath.Join(t.TempDir(), "summary.json")
			if err := tt.s.WriteJSON(path); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var back, want any
			_ = json.Unmarshal(data, &back)
			_ = json.Unmarshal([]byte(tt.want), &want)
			if b, _ := json.Marshal(back); string(b) != string(mustJSON(t, want)) {
				t.Errorf("WriteJSON wrote %s, want %s", data, tt.want)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSortEntries(t *testing.T) {
	t.Parallel()
	got := []Entry{
		{MessageID: "o-2:1", Reason: "TTLExpiredException"},
		{MessageID: "o-1:9", Reason: "MaxDeliveryCountExceeded", Removed: true},
		{MessageID: "o-2:1", Reason: "MaxDeliveryCountExceeded"},
		{MessageID: "o-1:10", Reason: "MaxDeliveryCountExceeded"},
	}
	sortEntries(got)
	want := []string{"o-1:10 MaxDeliveryCountExceeded", "o-1:9 MaxDeliveryCountExceeded", "o-2:1 MaxDeliveryCountExceeded", "o-2:1 TTLExpiredException"}
	for i, e := range got {
		if s := e.MessageID + " " + e.Reason; s != want[i] {
			t.Errorf("entry %d: got %s, want %s", i, s, want[i])
		}
	}
}

// TestSummarySortsAndUsesTheGetOrderRoute: the summary reads orders
// through the GetOrder function's own route, and lists parked messages by
// messageId.
func TestSummarySortsAndUsesTheGetOrderRoute(t *testing.T) {
	t.Parallel()
	files := appFiles(1)
	files["functions/GetOrder/function.json"] = `{"bindings":[{"type":"httpTrigger","direction":"in","name":"req","authLevel":"function",
	  "methods":["get"],"route":"v2/order/{orderId}/status"},{"type":"http","direction":"out","name":"res"}]}`
	h, up := testHost(t, files, nil)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			reply(w, http.StatusOK, "Applied")
		case r.URL.Path == "/api/v2/order/o-1/status":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(OrderRow{Status: "Created", LastSequence: 1})
		default:
			http.NotFound(w, r)
		}
	})
	ctx := testCtx(t)
	if err := h.Send(ctx, statusLine("o-1", "o-1:1", "Created", 1)); err != nil {
		t.Fatal(err)
	}
	// What the handler parks, as it does, in an order other than the ids'.
	for _, id := range []string{"o-9:bad", "o-1:bad", "o-5:bad"} {
		msg := statusLine(id[:3], id+":parked", "Created", 1).Message()
		msg.ApplicationProperties = map[string]any{parking.PropOriginalMessageID: id, "DeadLetterReason": "InvalidPayload"}
		if err := h.rec.Send(ctx, h.PoisonQueue(), msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := h.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Orders["o-1"] != (OrderRow{Status: "Created", LastSequence: 1}) {
		t.Errorf("orders: got %v, want o-1 read through /api/v2/order/o-1/status", s.Orders)
	}
	var ids []string
	for _, p := range s.Parked {
		ids = append(ids, p.MessageID)
	}
	if len(ids) != 3 || ids[0] != "o-1:bad" || ids[1] != "o-5:bad" || ids[2] != "o-9:bad" {
		t.Errorf("parked: got %q, want sorted by messageId", ids)
	}
}

func TestOrderPath(t *testing.T) {
	t.Parallel()
	files := appFiles(1)
	h, err := New(Options{AppRoot: writeApp(t, files), Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.orderPath("o 1"); got != "/api/orders/o%201" {
		t.Errorf("orderPath: got %q, want /api/orders/o%%201", got)
	}
	delete(files, "functions/GetOrder/function.json")
	if h, err = New(Options{AppRoot: writeApp(t, files), Env: []string{}}); err != nil {
		t.Fatal(err)
	}
	if got := h.orderPath("o-1"); got != "/api/orders/o-1" {
		t.Errorf("orderPath without a GetOrder function: got %q, want /api/orders/o-1", got)
	}
}

// TestSummaryAccountsForEveryMessage: every message sent to the workload
// queue, by the workload or through the loopback broker, is accounted for
// once: completed by result, dead-lettered, dropped by duplicate
// detection, cancelled, or still waiting.
func TestSummaryAccountsForEveryMessage(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(2), nil)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		body := new(strings.Builder)
		_, _ = io.Copy(body, r.Body)
		switch {
		case r.Method != http.MethodPost:
			http.NotFound(w, r)
		case strings.Contains(body.String(), "o-2"):
			reply(w, http.StatusInternalServerError, "") // abandoned until dead-lettered
		default:
			reply(w, http.StatusOK, "Applied")
		}
	})
	ctx := testCtx(t)
	later := statusLine("o-3", "o-3:1", "Created", 1)
	later.ScheduleAfter = time.Hour // still scheduled at the end
	for _, l := range []ScenarioLine{
		statusLine("o-1", "o-1:1", "Created", 1),
		statusLine("o-1", "o-1:1", "Created", 1), // dropped as a duplicate
		statusLine("o-2", "o-2:1", "Created", 1),
		later,
	} {
		if err := h.Send(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	// Through the loopback broker, as the handler or the CLI sends.
	if err := h.rec.Send(ctx, h.Queue(), statusLine("o-5", "o-5:1", "Created", 1).Message()); err != nil {
		t.Fatal(err)
	}
	seq, err := h.rec.Schedule(ctx, h.Queue(), statusLine("o-4", "o-4:payment-timeout", "Created", 1).Message(), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.rec.CancelScheduled(ctx, h.Queue(), seq); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "o-1:1 and o-5:1 completed, o-2:1 dead-lettered", func() bool {
		st := h.broker.Stats(h.Queue())
		return st.DeadLettered == 1 && st.Active+st.Locked == 0 && h.stats.inFlight.Load() == 0
	})
	s, err := h.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Accounting{Sent: 4, SentByHandler: 2, Completed: map[string]int{"Applied": 2}, DeadLettered: 1,
		DroppedAsDuplicates: 1, CancelledScheduled: 1, Waiting: 1}
	if !reflect.DeepEqual(s.Accounting, want) {
		t.Errorf("accounting:\n got %+v\nwant %+v", s.Accounting, want)
	}
	for _, v := range s.Violations {
		if strings.HasPrefix(v, "accounting:") {
			t.Errorf("violation %q, want every message accounted for", v)
		}
	}
	var table strings.Builder
	if err := s.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"accounting of the 6 messages sent", "completed Applied", "dropped as duplicates",
		"scheduled, then cancelled", "still waiting", "all 6 accounted for"} {
		if !strings.Contains(table.String(), line) {
			t.Errorf("summary table lacks %q:\n%s", line, table.String())
		}
	}
}

// TestAccountingReportsAMismatch: a message the host lost track of is a
// violation, never silently absorbed.
func TestAccountingReportsAMismatch(t *testing.T) {
	t.Parallel()
	a := Accounting{Sent: 3, Completed: map[string]int{"Applied": 1}, Waiting: 1, Unaccounted: 1}
	if got, want := a.violation(), "accounting: 3 messages sent, 2 accounted for (+1 unaccounted)"; got != want {
		t.Errorf("violation = %q, want %q", got, want)
	}
	if got := (Accounting{Sent: 1, Waiting: 1}).violation(); got != "" {
		t.Errorf("violation with everything accounted for = %q, want none", got)
	}
}

// An outage's line counts its refused requests in words that agree with
// the number.
func TestWriteOutagesCountsRefusedRequests(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		refused int
		want    string
	}{
		{0, ": 0 requests refused |"},
		{1, ": 1 request refused |"},
		{10, ": 10 requests refused |"},
	} {
		var b strings.Builder
		writeOutages(&b, []OutageSummary{{Target: OutageTable, After: "1m", Duration: "10m", Ended: true, Refused: tt.refused}})
		if !strings.Contains(b.String(), tt.want) {
			t.Errorf("%d refused: %q, want it to say %q", tt.refused, b.String(), tt.want)
		}
	}
}
