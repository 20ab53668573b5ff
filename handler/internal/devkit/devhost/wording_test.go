package devhost

import (
	"os"
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
)

// TestCountsReadRight: the dev host's lines say a count of one in the
// singular and two in the plural (package wording), in the progress
// line's equation and in the invariant check's violations.
func TestCountsReadRight(t *testing.T) {
	t.Parallel()
	t.Run("progress equation", func(t *testing.T) {
		for _, tt := range []struct {
			dropped int
			want    string
		}{
			{1, "+ 1 dropped as a duplicate +"},
			{2, "+ 2 dropped as duplicates +"},
		} {
			got := queueEquation(membroker.QueueTotals{Sent: 3 + tt.dropped, Completed: 3, DuplicatesDropped: tt.dropped}, membroker.QueueStats{})
			if !strings.Contains(got, tt.want) {
				t.Errorf("equation with %d dropped: got %q, want it to contain %q", tt.dropped, got, tt.want)
			}
		}
	})
	t.Run("dead-lettered too early", func(t *testing.T) {
		for _, tt := range []struct {
			deliveries int32
			want       string
		}{
			{1, "after 1 delivery, want at least 5"},
			{2, "after 2 deliveries, want at least 5"},
		} {
			in := goodRun()
			in.SentIDs["o-4:1"] = true
			in.DeadLettered = []Entry{{MessageID: "o-4:1", SessionID: "o-4", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: tt.deliveries}}
			if got := strings.Join(Check(in), "\n"); !strings.Contains(got, tt.want) {
				t.Errorf("violations %q, want one containing %q", got, tt.want)
			}
		}
	})
	t.Run("row for an order of poison only", func(t *testing.T) {
		in := goodRun() // o-3 has one completed message, a bad body
		in.Orders["o-3"] = OrderRow{Status: "Created", LastSequence: 1}
		if got, want := strings.Join(Check(in), "\n"), "nothing in its 1 completed message writes a row"; !strings.Contains(got, want) {
			t.Errorf("violations %q, want one containing %q", got, want)
		}
		in = goodRun()
		second := in.Completions[len(in.Completions)-1]
		second.MessageID = "o-3:bad2"
		in.Completions = append(in.Completions, second)
		in.SentIDs[second.MessageID] = true
		in.Parked = append(in.Parked, Entry{MessageID: "o-3:bad2", Reason: "InvalidPayload", ParkedID: "o-3:bad2:parked"})
		in.Orders["o-3"] = OrderRow{Status: "Created", LastSequence: 1}
		if got, want := strings.Join(Check(in), "\n"), "nothing in its 2 completed messages writes a row"; !strings.Contains(got, want) {
			t.Errorf("violations %q, want one containing %q", got, want)
		}
	})
	t.Run("row behind its fold", func(t *testing.T) {
		in := goodRun() // o-2: Created, its timeout, a parked Paid: 3 completed
		in.Orders["o-2"] = OrderRow{Status: "Created", LastSequence: 1}
		if got, want := strings.Join(Check(in), "\n"), "fold of 3 completed messages"; !strings.Contains(got, want) {
			t.Errorf("violations %q, want one containing %q", got, want)
		}
		in = goodRun()
		in.Completions = append([]Completion{upd("o-7", 1, "Created", "Applied")}, in.Completions...)
		in.SentIDs["o-7:1"], in.Queried["o-7"] = true, true
		in.Orders["o-7"] = OrderRow{Status: "Paid", LastSequence: 2}
		if got, want := strings.Join(Check(in), "\n"), "fold of 1 completed message)"; !strings.Contains(got, want) {
			t.Errorf("violations %q, want one containing %q", got, want)
		}
	})
	t.Run("still running after Ctrl-C", func(t *testing.T) {
		self := ChildProcess{Name: "this test", PID: os.Getpid()} // alive: left running
		for _, tt := range []struct {
			left []ChildProcess
			want string
		}{
			{[]ChildProcess{self}, "(kill it by its pid)"},
			{[]ChildProcess{self, self}, "(kill them by their pids)"},
		} {
			if got := closingLine(tt.left, t.TempDir()); !strings.HasSuffix(got, tt.want) {
				t.Errorf("closing line %q, want it to end %q", got, tt.want)
			}
		}
	})
	t.Run("session slots", func(t *testing.T) {
		for _, tt := range []struct {
			n    int
			want string
		}{{1, "1 session slot on each"}, {2, "2 session slots on each"}} {
			if got := instancesLine([]string{"OrderStatus-1"}, tt.n, "OrderStatus"); !strings.Contains(got, tt.want) {
				t.Errorf("instances line %q, want it to contain %q", got, tt.want)
			}
		}
	})
}
