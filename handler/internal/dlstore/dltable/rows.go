package dltable

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// The rows of the one table: an order's entries and history share a partition (one
// transaction per change); everything not closed is one partition, as small as the backlog.
//
//	PartitionKey       RowKey                  Kind     what
//	o~<order id>       e~<entry id>            entry    the entry whole (h~<SHA-256> for an order id that is no key)
//	o~<order id>       e~<entry id>~a~000001   audit    its audit entries, numbered from 1
//	index~notclosed    <entry id>              index    the summary of every entry that is not closed
//	index~ids          <entry id>              locator  the PartitionKey of the entry, for Get by id
const (
	partitionIndex   = "index~notclosed"
	partitionLocator = "index~ids"

	kindEntry   = "entry"
	kindAudit   = "audit"
	kindIndex   = "index"
	kindLocator = "locator"
)

// Columns. Data chunks are D00, D01, ... with their count in DN.
const (
	colKind      = "Kind"
	colState     = "State"
	colSource    = "Source"
	colReason    = "Reason"
	colGroup     = "Group"
	colStoredAt  = "StoredAt"
	colUpdatedAt = "UpdatedAt"
	colVersion   = "Version"
	colPartition = "EntryPartition"
	colChunks    = "DN"
)

// dataChunk is the size of one Edm.Binary column, below Table Storage's 64 KiB
// per property ("Understanding the Table service data model", Property types).
const dataChunk = 60 << 10

// maxFilterColumn bounds filter columns; a longer value is filtered on the client.
const maxFilterColumn = 1024

// maxEntity is Table Storage's limit on one entity (1 MiB, counted as size does).
const maxEntity = 1 << 20

// orderKey is orderID's PartitionKey: o~<order id>, or h~<hex SHA-256 of it> if no legal key.
func orderKey(orderID string) string {
	if legalKey(orderID) {
		return "o~" + orderID
	}
	sum := sha256.Sum256([]byte(orderID))
	return "h~" + hex.EncodeToString(sum[:])
}

// legalKey reports whether s may be in a key: 1 to 256 bytes of UTF-8 without / \ # ? or
// controls ("Understanding the Table service data model", Characters disallowed in key fields).
func legalKey(s string) bool {
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == '/' || r == '\\' || r == '#' || r == '?' || r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return false
		}
	}
	return true
}

func entryRowKey(id string) string { return "e~" + id }

func auditRowKey(id string, n int) string { return fmt.Sprintf("e~%s~a~%06d", id, n) }

// auditRange is the RowKey range of id's audit rows: (from, to).
func auditRange(id string) (string, string) { return "e~" + id + "~a~", "e~" + id + "~b" }

// row is an entity as written: the keys, the filter columns and the data.
type row map[string]any

func newRow(pk, rk, kind string, data []byte) row {
	r := row{"PartitionKey": pk, "RowKey": rk, colKind: kind}
	n := 0
	for i := 0; i < len(data) || i == 0; i += dataChunk {
		col := fmt.Sprintf("D%02d", n)
		r[col] = data[i:min(i+dataChunk, len(data))]
		r[col+"@odata.type"] = "Edm.Binary"
		n++
	}
	r[colChunks] = n
	return r
}

func (r row) str(col, v string) {
	if v != "" && len(v) <= maxFilterColumn {
		r[col] = v
	}
}

func (r row) time(col string, t time.Time) {
	if t.Year() >= 1601 && t.Year() <= 9999 {
		r[col] = formatTime(t)
		r[col+"@odata.type"] = "Edm.DateTime"
	}
}

func (r row) int64(col string, v int64) {
	r[col] = strconv.FormatInt(v, 10)
	r[col+"@odata.type"] = "Edm.Int64"
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.0000000Z") }

// size is as Table Storage counts it ("Understanding the Table service data model", Entity size).
func (r row) size() int {
	n := 4
	for k, v := range r {
		if strings.HasSuffix(k, "@odata.type") {
			continue
		}
		if k == "PartitionKey" || k == "RowKey" {
			n += 2 * utf16Len(v.(string))
			continue
		}
		n += 8 + 2*utf16Len(k)
		switch v := v.(type) {
		case []byte:
			n += 4 + len(v)
		case string:
			n += 4 + 2*utf16Len(v)
		default:
			n += 8
		}
	}
	return n
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

func (r row) json() []byte {
	b, err := json.Marshal(map[string]any(r))
	if err != nil {
		panic(fmt.Sprintf("dltable: marshal a row of strings, numbers and bytes: %v", err)) // cannot happen
	}
	return b
}

func entryRow(e dlstore.Entry, version int64) (row, error) {
	data, err := encodeEntry(e, version, formatEntry)
	if err != nil {
		return nil, err
	}
	r := newRow(orderKey(e.OrderID), entryRowKey(e.ID), kindEntry, data)
	r.filterColumns(e, version)
	return r, nil
}

// indexRow is the index row of e at version: its summary.
func indexRow(e dlstore.Entry, version int64) row {
	data, _ := encodeEntry(e, version, formatSummary) // a summary has no properties to refuse
	r := newRow(partitionIndex, e.ID, kindIndex, data)
	r.filterColumns(e, version)
	return r
}

func (r row) filterColumns(e dlstore.Entry, version int64) {
	r.str(colState, string(e.State))
	r.str(colSource, string(e.Source))
	r.str(colReason, e.Reason)
	r.str(colGroup, e.Group)
	r.time(colStoredAt, e.StoredAt)
	r.time(colUpdatedAt, e.UpdatedAt)
	r.int64(colVersion, version)
}

func auditRow(a dlstore.AuditEntry) row {
	r := newRow(orderKey(a.OrderID), auditRowKey(a.EntryID, a.N), kindAudit, encodeAudit(a))
	r.time("At", a.At)
	return r
}

// locatorRow points from e's id to its partition.
func locatorRow(e dlstore.Entry) row {
	return row{"PartitionKey": partitionLocator, "RowKey": e.ID, colKind: kindLocator, colPartition: orderKey(e.OrderID)}
}

// stored is an entity as read: its columns, ETag and the service's Timestamp.
type stored struct {
	cols      map[string]json.RawMessage
	etag      string
	timestamp time.Time
}

func parseStored(b []byte, etag string) (stored, error) {
	var s stored
	if err := json.Unmarshal(b, &s.cols); err != nil {
		return stored{}, fmt.Errorf("entity: %w", err)
	}
	s.etag = etag
	if s.etag == "" {
		_ = json.Unmarshal(s.cols["odata.etag"], &s.etag)
	}
	var ts string
	if json.Unmarshal(s.cols["Timestamp"], &ts) == nil {
		s.timestamp, _ = time.Parse(time.RFC3339Nano, ts)
	}
	return s, nil
}

func (s stored) string(col string) string {
	var v string
	_ = json.Unmarshal(s.cols[col], &v)
	return v
}

func (s stored) data() ([]byte, error) {
	var n int
	if err := json.Unmarshal(s.cols[colChunks], &n); err != nil || n < 1 || n > 100 {
		return nil, fmt.Errorf("entity %s: %d data chunks: %w", s.string("RowKey"), n, errCorrupt)
	}
	var out []byte
	for i := range n {
		var chunk []byte
		if err := json.Unmarshal(s.cols[fmt.Sprintf("D%02d", i)], &chunk); err != nil {
			return nil, fmt.Errorf("entity %s: chunk %d: %w", s.string("RowKey"), i, errCorrupt)
		}
		out = append(out, chunk...)
	}
	return out, nil
}

// entry decodes an entry or index row, with its ETag for an entry row.
func (s stored) entry() (dlstore.Entry, int64, error) {
	data, err := s.data()
	if err != nil {
		return dlstore.Entry{}, 0, err
	}
	e, version, err := decodeEntry(data)
	if err != nil {
		return dlstore.Entry{}, 0, err
	}
	if s.string(colKind) == kindEntry {
		e.ETag = s.etag
	}
	return e, version, nil
}

func (s stored) audit() (dlstore.AuditEntry, error) {
	data, err := s.data()
	if err != nil {
		return dlstore.AuditEntry{}, err
	}
	return decodeAudit(data)
}

func odataString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// odataTime is t as an OData datetime literal, or "" outside Table Storage's dates.
func odataTime(t time.Time) string {
	if t.Year() < 1601 || t.Year() > 9999 {
		return ""
	}
	return "datetime'" + formatTime(t) + "'"
}
