package devhost

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// Accounting says where every message sent to the workload queue went:
//
//	Sent + SentByHandler = sum(Completed) + DeadLettered + DroppedAsDuplicates
//	                       + CancelledScheduled + ExpiredDropped + Waiting
//
// Unaccounted, the difference, is 0 unless the development host has a bug.
type Accounting struct {
	// Sent is the number of workload messages the host sent, duplicates included.
	Sent int `json:"sent"`
	// SentByHandler is the number the handler or the CLI sent through the loopback broker.
	SentByHandler int `json:"sentByHandlerOrCli"`
	// Completed counts the messages completed, by the handler's result.
	Completed map[string]int `json:"completed"`
	// DeadLettered counts the messages moved to the dead-letter subqueue.
	DeadLettered int `json:"deadLettered"`
	// DroppedAsDuplicates counts the messages the broker's duplicate detection dropped.
	DroppedAsDuplicates int `json:"droppedAsDuplicates"`
	// CancelledScheduled counts scheduled messages cancelled before they were due.
	CancelledScheduled int `json:"cancelledScheduled"`
	// ExpiredDropped counts messages expired without dead-lettering (0 as deployed).
	ExpiredDropped int `json:"expiredDropped"`
	// Waiting counts the messages still in the queue: active, locked or scheduled.
	Waiting int `json:"waiting"`
	// Unaccounted is the messages sent minus those accounted for.
	Unaccounted int `json:"unaccounted"`
}

// account builds the workload queue's Accounting.
func account(sent, byHandler int, completions []Completion, queue string, totals membroker.QueueTotals, st membroker.QueueStats) Accounting {
	a := Accounting{
		Sent:                sent,
		SentByHandler:       byHandler,
		Completed:           map[string]int{},
		DeadLettered:        totals.DeadLettered,
		DroppedAsDuplicates: totals.DuplicatesDropped,
		CancelledScheduled:  totals.Cancelled,
		ExpiredDropped:      totals.ExpiredDropped,
		Waiting:             st.Active + st.Locked + st.Scheduled,
	}
	completed := 0
	for _, c := range completions {
		if c.Queue == queue {
			a.Completed[c.Result]++
			completed++
		}
	}
	a.Unaccounted = a.Sent + a.SentByHandler -
		(completed + a.DeadLettered + a.DroppedAsDuplicates + a.CancelledScheduled + a.ExpiredDropped + a.Waiting)
	return a
}

// violation describes a nonzero Unaccounted, or returns "".
func (a Accounting) violation() string {
	if a.Unaccounted == 0 {
		return ""
	}
	return fmt.Sprintf("accounting: %s sent, %d accounted for (%+d unaccounted)",
		wording.Count(a.Sent+a.SentByHandler, "message"), a.Sent+a.SentByHandler-a.Unaccounted, a.Unaccounted)
}

// writeTable writes the printed summary's accounting, keys padded to width.
func (a Accounting) writeTable(b *strings.Builder, width int) {
	total := a.Sent + a.SentByHandler
	fmt.Fprintf(b, "accounting of the %s sent\n", wording.Count(total, "message"))
	row := func(k string, n int) { fmt.Fprintf(b, "  %-*s %7d\n", width, k, n) }
	if a.SentByHandler > 0 {
		row("sent by the workload", a.Sent)
		row("sent by the handler or CLI", a.SentByHandler)
	}
	for _, k := range ordered(a.Completed, resultOrder) {
		row("completed "+k, a.Completed[k])
	}
	row("dead-lettered", a.DeadLettered)
	row("dropped as duplicates", a.DroppedAsDuplicates)
	if a.CancelledScheduled > 0 {
		row("scheduled, then cancelled", a.CancelledScheduled)
	}
	if a.ExpiredDropped > 0 {
		row("expired and dropped", a.ExpiredDropped)
	}
	row("still waiting", a.Waiting)
	if a.Unaccounted == 0 {
		fmt.Fprintf(b, "  all %d accounted for\n", total)
	} else {
		fmt.Fprintf(b, "  %d NOT accounted for (a development host bug)\n", a.Unaccounted)
	}
}

// accountingWidth is the widest key writeTable prints.
func (a Accounting) accountingWidth() int {
	w := len("scheduled, then cancelled")
	for k := range a.Completed {
		w = max(w, len("completed "+k))
	}
	return w
}

// ordered returns m's keys in first's order, then the others sorted.
func ordered(m map[string]int, first []string) []string {
	rank := func(k string) int {
		if i := slices.Index(first, k); i >= 0 {
			return i
		}
		return len(first)
	}
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	return keys
}

// resultOrder is the order results are listed in.
var resultOrder = []string{string(order.Applied), string(order.Duplicate), string(order.Stale), resultParked, ResultCompleted, ResultAbandoned, ResultLockLost}
