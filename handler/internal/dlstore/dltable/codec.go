package dltable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Every row's data (entry, index summary, audit entry) is one binary record split across
// Edm.Binary columns (dataChunk): a string column holds at most 32K UTF-16 characters.

const (
	formatEntry   byte = 1 // an entry whole: summary, body and properties
	formatSummary byte = 2 // an entry without body and properties (the index)
	formatAudit   byte = 3 // an audit entry
)

const (
	propString byte = 's'
	propBool   byte = 'b'
	propInt64  byte = 'i'
	propFloat  byte = 'f'
	propTime   byte = 't'
)

var errCorrupt = errors.New("corrupt record")

type writer struct{ b []byte }

func (w *writer) byte(c byte)     { w.b = append(w.b, c) }
func (w *writer) bytes(p []byte)  { w.b = append(binary.AppendUvarint(w.b, uint64(len(p))), p...) }
func (w *writer) str(s string)    { w.b = append(binary.AppendUvarint(w.b, uint64(len(s))), s...) }
func (w *writer) int(v int64)     { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) float(f float64) { w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(f)) }
func (w *writer) time(t time.Time) {
	if t.IsZero() {
		w.byte(0)
		return
	}
	w.byte(1)
	w.int(t.Unix())
	w.b = binary.AppendUvarint(w.b, uint64(t.Nanosecond()))
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errCorrupt
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes() []byte {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.fail()
		return nil
	}
	p := r.b[k : k+int(n) : k+int(n)]
	r.b = r.b[k+int(n):]
	return p
}

func (r *reader) str() string { return string(r.bytes()) }

func (r *reader) int() int64 {
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) float() float64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return f
}

func (r *reader) time() time.Time {
	switch r.byte() {
	case 0:
		return time.Time{}
	case 1:
	default:
		r.fail()
		return time.Time{}
	}
	sec := r.int()
	ns, k := binary.Uvarint(r.b)
	if k <= 0 || ns >= 1e9 {
		r.fail()
		return time.Time{}
	}
	r.b = r.b[k:]
	return time.Unix(sec, int64(ns)).UTC()
}

// encodeEntry is e's record at version in format (formatEntry or
// formatSummary), refusing unknown property types.
func encodeEntry(e dlstore.Entry, version int64, format byte) ([]byte, error) {
	w := &writer{b: make([]byte, 0, 256+len(e.Body)+dlstore.PropertiesSize(e.Properties)+8*len(e.Properties))}
	w.byte(format)
	w.str(e.ID)
	w.str(string(e.Source))
	w.int(e.SequenceNumber)
	for _, s := range []string{e.MessageID, e.OrderID, e.SessionID, e.Subject, e.ContentType, e.CorrelationID, e.Reason, e.Description} {
		w.str(s)
	}
	w.int(int64(e.DeliveryCount))
	w.time(e.EnqueuedTime)
	w.time(e.StoredAt)
	w.str(e.Group)
	w.int(int64(e.ReplayCount))
	w.str(string(e.State))
	w.time(e.UpdatedAt)
	w.int(int64(e.Actions))
	w.str(e.ClaimedBy)
	w.time(e.ClaimedAt)
	w.str(e.NewMessageID)
	w.int(version)
	if format == formatSummary {
		return w.b, nil
	}
	w.bytes(e.Body)
	w.b = binary.AppendUvarint(w.b, uint64(len(e.Properties)))
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		w.str(k)
		switch v := e.Properties[k].(type) {
		case string:
			w.byte(propString)
			w.str(v)
		case bool:
			w.byte(propBool)
			if v {
				w.byte(1)
			} else {
				w.byte(0)
			}
		case int64:
			w.byte(propInt64)
			w.int(v)
		case float64:
			w.byte(propFloat)
			w.float(v)
		case time.Time:
			w.byte(propTime)
			w.time(v)
		default:
			return nil, fmt.Errorf("property %q is a %T: the store keeps string, bool, int64, float64 and time.Time", k, v)
		}
	}
	return w.b, nil
}

// decodeEntry reads a record of encodeEntry and its version.
func decodeEntry(b []byte) (dlstore.Entry, int64, error) {
	r := &reader{b: b}
	format := r.byte()
	if format != formatEntry && format != formatSummary {
		return dlstore.Entry{}, 0, fmt.Errorf("entry record of format %d: %w", format, errCorrupt)
	}
	var e dlstore.Entry
	e.ID = r.str()
	e.Source = dlstore.Source(r.str())
	e.SequenceNumber = r.int()
	for _, dst := range []*string{&e.MessageID, &e.OrderID, &e.SessionID, &e.Subject, &e.ContentType, &e.CorrelationID, &e.Reason, &e.Description} {
		*dst = r.str()
	}
	e.DeliveryCount = int32(r.int())
	e.EnqueuedTime = r.time()
	e.StoredAt = r.time()
	e.Group = r.str()
	e.ReplayCount = int(r.int())
	e.State = dlstore.State(r.str())
	e.UpdatedAt = r.time()
	e.Actions = int(r.int())
	e.ClaimedBy = r.str()
	e.ClaimedAt = r.time()
	e.NewMessageID = r.str()
	version := r.int()
	if format == formatEntry {
		if body := r.bytes(); len(body) > 0 {
			e.Body = append([]byte(nil), body...)
		}
		n, k := binary.Uvarint(r.b)
		if k <= 0 || n > uint64(len(r.b)) {
			r.fail()
		} else {
			r.b = r.b[k:]
		}
		if n > 0 && r.err == nil {
			e.Properties = make(map[string]any, n)
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			name := r.str()
			switch r.byte() {
			case propString:
				e.Properties[name] = r.str()
			case propBool:
				b := r.byte()
				if b > 1 {
					r.fail()
				}
				e.Properties[name] = b == 1
			case propInt64:
				e.Properties[name] = r.int()
			case propFloat:
				e.Properties[name] = r.float()
			case propTime:
				e.Properties[name] = r.time()
			default:
				r.fail()
			}
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return dlstore.Entry{}, 0, fmt.Errorf("entry record: %w", r.err)
	}
	return e, version, nil
}

func encodeAudit(a dlstore.AuditEntry) []byte {
	w := &writer{}
	w.byte(formatAudit)
	w.str(a.EntryID)
	w.str(a.OrderID)
	w.int(int64(a.N))
	w.time(a.At)
	for _, s := range []string{a.Action, string(a.From), string(a.To), a.Actor, string(a.Source)} {
		w.str(s)
	}
	w.int(a.SequenceNumber)
	for _, s := range []string{a.MessageID, a.Reason, a.NewMessageID, a.Detail} {
		w.str(s)
	}
	return w.b
}

func decodeAudit(b []byte) (dlstore.AuditEntry, error) {
	r := &reader{b: b}
	if f := r.byte(); f != formatAudit {
		return dlstore.AuditEntry{}, fmt.Errorf("audit record of format %d: %w", f, errCorrupt)
	}
	var a dlstore.AuditEntry
	a.EntryID = r.str()
	a.OrderID = r.str()
	a.N = int(r.int())
	a.At = r.time()
	var from, to, src string
	for _, dst := range []*string{&a.Action, &from, &to, &a.Actor, &src} {
		*dst = r.str()
	}
	a.From, a.To, a.Source = dlstore.State(from), dlstore.State(to), dlstore.Source(src)
	a.SequenceNumber = r.int()
	for _, dst := range []*string{&a.MessageID, &a.Reason, &a.NewMessageID, &a.Detail} {
		*dst = r.str()
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return dlstore.AuditEntry{}, fmt.Errorf("audit record: %w", r.err)
	}
	return a, nil
}
