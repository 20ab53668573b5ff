package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

func TestIsEntityWrite(t *testing.T) {
	tests := []struct {
		method, path string
		want         bool
	}{
		{"POST", "/devstoreaccount1/sim1", true},
		{"POST", "/devstoreaccount1/Tables", false},
		{"POST", "/devstoreaccount1/$batch", false},
		{"PUT", "/devstoreaccount1/sim1(PartitionKey='o-1',RowKey='status')", true},
		{"PATCH", "/devstoreaccount1/sim1(PartitionKey='o-1',RowKey='status')", true},
		{"MERGE", "/devstoreaccount1/sim1(PartitionKey='o-1',RowKey='status')", true},
		{"PUT", "/devstoreaccount1/sim1", false},
		{"GET", "/devstoreaccount1/sim1(PartitionKey='o-1',RowKey='status')", false},
		{"DELETE", "/devstoreaccount1/Tables('sim1')", false},
	}
	for _, tt := range tests {
		if got := IsEntityWrite(tt.method, tt.path); got != tt.want {
			t.Errorf("IsEntityWrite(%s, %s) = %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestParseEntity(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantID  string
		want    Row
		wantErr string
	}{
		{"Edm.Int64 as written", `{"PartitionKey":"o-1","RowKey":"status","Status":"Paid","LastSequence":"2","LastSequence@odata.type":"Edm.Int64"}`,
			"o-1", Row{order.Paid, 2}, ""},
		{"plain number", `{"PartitionKey":"o-2","Status":"Created","LastSequence":1}`, "o-2", Row{order.Created, 1}, ""},
		{"string without annotation", `{"PartitionKey":"o-1","Status":"Paid","LastSequence":"2"}`, "", Row{}, "without the Edm.Int64 annotation"},
		{"no LastSequence", `{"PartitionKey":"o-1","Status":"Paid"}`, "", Row{}, "no LastSequence"},
		{"no PartitionKey", `{"Status":"Paid","LastSequence":1}`, "", Row{}, "no PartitionKey"},
		{"status not a string", `{"PartitionKey":"o-1","Status":3,"LastSequence":1}`, "", Row{}, "Status is not a string"},
		{"not JSON", `{"PartitionKey":`, "", Row{}, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, got, err := ParseEntity([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || id != tt.wantID || got != tt.want {
				t.Errorf("got %q %v %v, want %q %v", id, got, err, tt.wantID, tt.want)
			}
		})
	}
}

func TestWireLogRecordsSuccessfulEntityWritesOnly(t *testing.T) {
	var l WireLog
	body := []byte(`{"PartitionKey":"o-1","Status":"Created","LastSequence":"1","LastSequence@odata.type":"Edm.Int64"}`)
	steps := []struct {
		method, path string
		status       int
		body         []byte
		want         bool
	}{
		{"POST", "/a/Tables", 201, []byte(`{"TableName":"sim1"}`), false},
		{"POST", "/a/sim1", 409, body, false},
		{"GET", "/a/sim1(PartitionKey='o-1',RowKey='status')", 200, nil, false},
		{"POST", "/a/sim1", 201, body, true},
		{"PUT", "/a/sim1(PartitionKey='o-1',RowKey='status')", 412, body, false},
		{"PUT", "/a/sim1(PartitionKey='o-1',RowKey='status')", 204, []byte(`{"PartitionKey":"o-1","Status":"Paid","LastSequence":2}`), true},
		{"PUT", "/a/sim1(PartitionKey='o-1',RowKey='status')", 204, []byte(`not json`), false},
	}
	for i, s := range steps {
		if _, ok := l.Record(s.method, s.path, s.status, s.body, "if", "etag"); ok != s.want {
			t.Errorf("step %d (%s %s %d): recorded %v, want %v", i, s.method, s.path, s.status, ok, s.want)
		}
	}
	got := l.Writes()
	want := []Write{
		{N: 1, Order: "o-1", Row: Row{order.Created, 1}, Insert: true, IfMatch: "if", ETag: "etag"},
		{N: 2, Order: "o-1", Row: Row{order.Paid, 2}, IfMatch: "if", ETag: "etag"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("writes = %+v, want %+v", got, want)
	}
	if errs := l.Errors(); len(errs) != 1 || !strings.Contains(errs[0], "not a JSON object") {
		t.Errorf("errors = %q, want the unreadable write", errs)
	}
}

func TestParseAnswers(t *testing.T) {
	log := strings.Join([]string{
		`{"time":"2026-11-29T10:00:01Z","level":"INFO","msg":"handler listening","addr":"127.0.0.1:1"}`,
		`{"time":"2026-11-29T10:00:02Z","level":"INFO","msg":"message settled","order_id":"o-1","message_id":"o-1:1","delivery_count":1,"sequence":1,"subject":"OrderStatusChanged","result":"Applied","duration_ms":500,"round_trips":3,"etag_conflicts":1,"cache_hit":true,"instance_id":"instance-2"}`,
		`{"time":"2026-11-29T10:00:03Z","level":"WARN","msg":"transient failure, retrying","order_id":"o-1","message_id":"o-1:2","attempt":1}`,
		`{"time":"2026-11-29T10:00:04Z","level":"WARN","msg":"message parked on the poison queue","order_id":"o-1","message_id":"o-1:poison:bad-json","delivery_count":2,"sequence":0,"subject":"OrderStatusChanged","result":"Parked","duration_ms":1,"reason":"InvalidPayload"}`,
		`not json with "result"`,
		`{"time":"2026-11-29T10:00:05Z","level":"ERROR","msg":"message failed, host will abandon it","order_id":"o-2","message_id":"o-2:payment-timeout","delivery_count":1,"sequence":0,"subject":"PaymentTimeoutCheck","result":"Failed","duration_ms":1000}`,
	}, "\n")
	got := ParseAnswers([]byte(log))
	at := func(s string) int64 { tm, _ := time.Parse(time.RFC3339, s); return tm.UnixNano() }
	want := []Answer{
		{MessageID: "o-1:1", Order: "o-1", Subject: order.SubjectStatusChanged, DeliveryCount: 1, Sequence: 1, Result: "Applied",
			Start: at("2026-11-29T10:00:02Z") - int64(500*time.Millisecond), End: at("2026-11-29T10:00:02Z"),
			RoundTrips: 3, Conflicts: 1, CacheHit: true, Instance: "instance-2"},
		{MessageID: "o-1:poison:bad-json", Order: "o-1", Subject: order.SubjectStatusChanged, DeliveryCount: 2, Result: "Parked", Reason: "InvalidPayload",
			Start: at("2026-11-29T10:00:04Z") - int64(time.Millisecond), End: at("2026-11-29T10:00:04Z")},
		{MessageID: "o-2:payment-timeout", Order: "o-2", Subject: order.SubjectPaymentTimeout, DeliveryCount: 1, Result: "Failed",
			Start: at("2026-11-29T10:00:05Z") - int64(time.Second), End: at("2026-11-29T10:00:05Z")},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d answers %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("answer %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// The handler writes warnings and failures to stderr only: the same
	// lines split by stream give the same answers, in time order.
	var stdout, stderr []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"level":"INFO"`) {
			stdout = append(stdout, l)
		} else {
			stderr = append(stderr, l)
		}
	}
	split := ParseAnswers([]byte(strings.Join(stderr, "\n")), []byte(strings.Join(stdout, "\n")))
	if !slices.Equal(split, got) {
		t.Errorf("answers of stderr and stdout = %+v, want %+v", split, got)
	}
}

func TestConcurrentCalls(t *testing.T) {
	a := func(id string, start, end int64) Answer { return Answer{MessageID: id, Start: start, End: end} }
	tests := []struct {
		name    string
		answers []Answer
		want    int
	}{
		{"none", nil, 0},
		{"one after the other", []Answer{a("m", 0, 10), a("m", 10, 20)}, 0},
		{"overlapping", []Answer{a("m", 0, 10), a("m", 5, 20)}, 1},
		{"different messages overlap", []Answer{a("m", 0, 10), a("n", 5, 20)}, 0},
		{"three at once", []Answer{a("m", 0, 100), a("m", 10, 20), a("m", 30, 40)}, 2},
	}
	for _, tt := range tests {
		if got := ConcurrentCalls(tt.answers); got != tt.want {
			t.Errorf("%s: ConcurrentCalls = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestTail(t *testing.T) {
	out := []byte("a\nbb\nccccc\n")
	if got, want := Tail(out, 2, 3), "bb\nccc..."; got != want {
		t.Errorf("Tail = %q, want %q", got, want)
	}
	if got := Tail(nil, 5, 10); got != "" {
		t.Errorf("Tail(nil) = %q, want empty", got)
	}
}

// TestCacheCost: session moves, stale-cache conflicts (only those of calls
// that began from the cache), and messages answered on another instance.
func TestCacheCost(t *testing.T) {
	answers := []Answer{
		{MessageID: "o-1:1", Order: "o-1", Result: "Applied", RoundTrips: 2, Instance: "instance-1", End: 1},
		{MessageID: "o-1:2", Order: "o-1", Result: "Applied", RoundTrips: 1, CacheHit: true, Instance: "instance-1", End: 2},
		{MessageID: "o-1:3", Order: "o-1", Result: "Applied", RoundTrips: 2, Instance: "instance-2", End: 3},
		{MessageID: "o-1:4", Order: "o-1", Result: "Applied", RoundTrips: 3, Conflicts: 1, CacheHit: true, Instance: "instance-1", End: 5},
		{MessageID: "o-1:4", Order: "o-1", Result: "Duplicate", RoundTrips: 0, CacheHit: true, Instance: "instance-2", End: 6},
		{MessageID: "o-2:1", Order: "o-2", Result: "Applied", RoundTrips: 4, Conflicts: 1, Instance: "instance-2", End: 4},
	}
	got := CacheCost(answers)
	want := Cost{Moves: 3, Conflicts: 2, StaleConflicts: 1, StaleRoundTrips: 2, RoundTrips: 12, Applied: 5, Answers: 6, Elsewhere: 1}
	if got != want {
		t.Errorf("CacheCost = %+v, want %+v", got, want)
	}
}
