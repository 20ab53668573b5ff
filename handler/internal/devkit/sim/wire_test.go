package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

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
