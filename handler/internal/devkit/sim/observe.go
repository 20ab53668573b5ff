package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// IsEntityWrite reports whether a request to the Table service writes an
// entity: a POST to a table (not /Tables) or a PUT, PATCH or MERGE of one.
func IsEntityWrite(method, path string) bool {
	switch method {
	case http.MethodPost:
		return !strings.HasSuffix(path, "/Tables") && !strings.HasSuffix(path, "/$batch")
	case http.MethodPut, http.MethodPatch, "MERGE":
		return strings.Contains(path, "(PartitionKey=")
	}
	return false
}

// ParseEntity reads an order row from an entity's JSON: PartitionKey,
// Status and LastSequence (an Edm.Int64 string or a plain number).
func ParseEntity(body []byte) (id string, r Row, err error) {
	var e map[string]json.RawMessage
	if err := json.Unmarshal(body, &e); err != nil {
		return "", Row{}, fmt.Errorf("entity is not a JSON object: %w", err)
	}
	var status string
	if err := json.Unmarshal(e["PartitionKey"], &id); err != nil || id == "" {
		return "", Row{}, fmt.Errorf("entity has no PartitionKey string")
	}
	if err := json.Unmarshal(e["Status"], &status); err != nil {
		return id, Row{}, fmt.Errorf("entity %s: Status is not a string", id)
	}
	r.Status = order.Status(status)
	raw, ok := e["LastSequence"]
	if !ok {
		return id, Row{}, fmt.Errorf("entity %s: no LastSequence", id)
	}
	var s string
	switch {
	case json.Unmarshal(raw, &s) == nil:
		var typ string
		_ = json.Unmarshal(e["LastSequence@odata.type"], &typ)
		if typ != "Edm.Int64" {
			return id, Row{}, fmt.Errorf("entity %s: LastSequence %q is a string without the Edm.Int64 annotation", id, s)
		}
		r.LastSequence, err = strconv.ParseInt(s, 10, 64)
	default:
		err = json.Unmarshal(raw, &r.LastSequence)
	}
	if err != nil {
		return id, Row{}, fmt.Errorf("entity %s: LastSequence %s: %v", id, raw, err)
	}
	return id, r, nil
}

// WireLog records the successful entity writes a fault proxy sees; safe for concurrent use.
type WireLog struct {
	mu     sync.Mutex
	writes []Write
	errs   []string
}

// Record records one answered request; it returns the write and true for a
// successful (2xx) entity write. An unreadable body is recorded in Errors.
func (l *WireLog) Record(method, path string, status int, body []byte, ifMatch, etag string) (Write, bool) {
	if status < 200 || status > 299 || !IsEntityWrite(method, path) {
		return Write{}, false
	}
	id, row, err := ParseEntity(body)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs = append(l.errs, fmt.Sprintf("%s %s answered %d: %v", method, path, status, err))
		return Write{}, false
	}
	w := Write{N: len(l.writes) + 1, Order: id, Row: row, Insert: method == http.MethodPost, IfMatch: ifMatch, ETag: etag}
	l.writes = append(l.writes, w)
	return w, true
}

// Writes returns the writes recorded so far.
func (l *WireLog) Writes() []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Write(nil), l.writes...)
}

// Errors returns the writes that could not be read.
func (l *WireLog) Errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
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

// ConcurrentCalls counts the pairs of answers to one message whose calls overlapped.
func ConcurrentCalls(answers []Answer) int {
	byID := map[string][]Answer{}
	for _, a := range answers {
		byID[a.MessageID] = append(byID[a.MessageID], a)
	}
	n := 0
	for _, as := range byID {
		sort.Slice(as, func(i, j int) bool { return as[i].Start < as[j].Start })
		for i := range as {
			for j := i + 1; j < len(as) && as[j].Start < as[i].End; j++ {
				n++
			}
		}
	}
	return n
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
