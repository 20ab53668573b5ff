package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Answer is one answer of the handler to an OrderStatus invocation, as logged.
type Answer struct {
	MessageID     string
	Order         string
	Subject       string
	DeliveryCount int
	Sequence      int64
	// Result is Applied, Duplicate, Stale, Parked or Failed; Reason a park's.
	Result, Reason string
	// Original is the MessageId a rescheduled copy stands for, else "".
	Original string
	// Start and End bound the call.
	Start, End int64 // Unix nanoseconds
	// RoundTrips, Conflicts, CacheHit and Instance are from the handler's log.
	RoundTrips, Conflicts int
	CacheHit              bool
	Instance              string
}

// ParseAnswers reads the handler's answers (lines with a message_id and a
// result) from its JSON logs, stdout and stderr, merged by end time.
func ParseAnswers(logs ...[]byte) []Answer {
	var out []Answer
	for _, log := range logs {
		out = append(out, parseAnswers(log)...)
	}
	if len(logs) > 1 {
		sort.SliceStable(out, func(i, j int) bool { return out[i].End < out[j].End })
	}
	return out
}

func parseAnswers(log []byte) []Answer {
	var out []Answer
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"result"`)) {
			continue
		}
		var rec struct {
			Time          time.Time `json:"time"`
			MessageID     *string   `json:"message_id"`
			Original      string    `json:"original_message_id"`
			OrderID       string    `json:"order_id"`
			Subject       string    `json:"subject"`
			DeliveryCount int       `json:"delivery_count"`
			Sequence      int64     `json:"sequence"`
			Result        string    `json:"result"`
			Reason        string    `json:"reason"`
			DurationMS    float64   `json:"duration_ms"`
			RoundTrips    int       `json:"round_trips"`
			Conflicts     int       `json:"etag_conflicts"`
			CacheHit      bool      `json:"cache_hit"`
			Instance      string    `json:"instance_id"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.MessageID == nil || rec.Result == "" {
			continue
		}
		end := rec.Time.UnixNano()
		out = append(out, Answer{
			MessageID: *rec.MessageID, Original: rec.Original, Order: rec.OrderID, Subject: rec.Subject, DeliveryCount: rec.DeliveryCount,
			Sequence: rec.Sequence, Result: rec.Result, Reason: rec.Reason,
			Start: end - int64(rec.DurationMS*float64(time.Millisecond)), End: end,
			RoundTrips: rec.RoundTrips, Conflicts: rec.Conflicts, CacheHit: rec.CacheHit, Instance: rec.Instance,
		})
	}
	return out
}

// Cost is what the handlers' caches cost in a run, from their answers.
type Cost struct {
	// Moves counts the answers given by another instance than the order's previous one.
	Moves int
	// Conflicts, StaleConflicts (from the cache) and StaleRoundTrips (2 each).
	Conflicts, StaleConflicts, StaleRoundTrips int
	// RoundTrips sums the round trips; Applied and Answers count answers.
	RoundTrips, Applied, Answers int
	// Elsewhere counts the messages answered by more than one instance.
	Elsewhere int
}

// CacheCost adds up what stale caches cost from the handlers' answers.
func CacheCost(answers []Answer) Cost {
	var c Cost
	sorted := slices.Clone(answers)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].End < sorted[j].End })
	last := map[string]string{} // order -> instance of its previous answer
	by := map[string]string{}   // message -> instance of its first answer
	elsewhere := map[string]bool{}
	for _, a := range sorted {
		if first, ok := by[a.MessageID]; !ok {
			by[a.MessageID] = a.Instance
		} else if first != a.Instance {
			elsewhere[a.MessageID] = true
		}
		c.Answers++
		c.RoundTrips += a.RoundTrips
		c.Conflicts += a.Conflicts
		if a.CacheHit {
			c.StaleConflicts += a.Conflicts
		}
		if a.Result == string(order.Applied) {
			c.Applied++
		}
		if a.Order != "" {
			if prev, ok := last[a.Order]; ok && prev != a.Instance {
				c.Moves++
			}
			last[a.Order] = a.Instance
		}
	}
	c.StaleRoundTrips = 2 * c.StaleConflicts
	c.Elsewhere = len(elsewhere)
	return c
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// Bytes returns a copy of what was written.
func (b *SyncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b.Bytes())
}

// String returns what was written.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
