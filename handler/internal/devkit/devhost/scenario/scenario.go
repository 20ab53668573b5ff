// Package scenario reads the development host's workloads and generates its
// built-in demo. A workload is a JSON Lines file, one message for the
// order-status queue per line (a Line each), sent in order:
//
//	{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1",
//	 "body":{"orderId":"o-1","status":"Created","sequence":1},"sendAfter":"12m"}
//
// sessionId is required; scheduleAfter, sendAfter and timeToLive are Go
// durations. A line with a "scale" or "outage" field is a scale event or an
// outage instead (see ScaleAdd, OutageTable). Field names match without
// regard to case; harmless problems are warnings, and what cannot be sent is
// an error naming file:line. docs/dev-host.md describes the format.
package scenario

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
)

// Line is one message of a workload.
type Line struct {
	Subject   string
	SessionID string
	MessageID string
	// ContentType is application/json for a non-string JSON body.
	ContentType string
	Body        []byte
	// ScheduleAfter > 0 schedules the message that long after sending.
	ScheduleAfter time.Duration
	// SendAfter holds the line until that long after the workload started.
	SendAfter time.Duration
	// ApplicationProperties values are string, int64, float64 or bool.
	ApplicationProperties map[string]any
	// CorrelationID is the message's correlation id.
	CorrelationID string
	// TimeToLive > 0 is the message's time-to-live.
	TimeToLive time.Duration
	// Pos is "file:line" for a line read from a file, "" otherwise.
	Pos string
	// Scale, when set, makes the line a scale event (ScaleAdd, ScaleRemove,
	// ScaleKill) on Instance (an id or a number; "": the newest running one).
	Scale, Instance string
	// Outage, when set, makes the line an outage of that target for Duration.
	Outage   string
	Duration time.Duration
}

// IsMessage reports whether the line sends a message (not a scale event or outage).
func (l Line) IsMessage() bool { return l.Scale == "" && l.Outage == "" }

// Message returns the broker message the line sends.
func (l Line) Message() broker.Message {
	return broker.Message{
		MessageID:             l.MessageID,
		SessionID:             l.SessionID,
		Subject:               l.Subject,
		ContentType:           l.ContentType,
		CorrelationID:         l.CorrelationID,
		Body:                  bytes.Clone(l.Body),
		ApplicationProperties: maps.Clone(l.ApplicationProperties),
		TimeToLive:            l.TimeToLive,
	}
}

// FromMessage returns the line that sends m at once.
func FromMessage(m broker.Message) Line {
	return Line{
		Subject:               m.Subject,
		SessionID:             m.SessionID,
		MessageID:             m.MessageID,
		ContentType:           m.ContentType,
		CorrelationID:         m.CorrelationID,
		Body:                  bytes.Clone(m.Body),
		ApplicationProperties: maps.Clone(m.ApplicationProperties),
		TimeToLive:            m.TimeToLive,
	}
}

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("scenario: bad line")

// LineError is a parse error at one line.
type LineError struct {
	Pos string // "file:line"
	Err error
}

func (e *LineError) Error() string { return e.Pos + ": " + e.Err.Error() }

// Unwrap returns ErrSyntax joined with the cause.
func (e *LineError) Unwrap() []error { return []error{ErrSyntax, e.Err} }

// MaxLineBytes bounds one line (a message's JSON text may exceed the message).
const MaxLineBytes = 1 << 20

// MaxMessageBytes is the largest message a line may describe (Service Bus Standard tier).
const MaxMessageBytes = membroker.DefaultMaxMessageSize

// Options tune ReadFile and Parse. The zero value (or nil) is usable.
type Options struct {
	// Warn receives each harmless problem as one line; nil drops them.
	Warn func(msg string)
}

// ReadFile parses the workload in file path; a bad line is a *LineError.
func ReadFile(path string, opts *Options) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	defer f.Close()
	return Parse(f, path, opts)
}

// Parse reads a workload from r; name is used in positions and in the
// MessageIds it generates. The first bad line stops it with a *LineError.
func Parse(r io.Reader, name string, opts *Options) ([]Line, error) {
	p := parser{name: name, warned: map[string]bool{}}
	if opts != nil {
		p.warn = opts.Warn
	}
	if p.warn == nil {
		p.warn = func(string) {}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), MaxLineBytes)
	var lines []Line
	n := 0
	for sc.Scan() {
		n++
		text := sc.Bytes()
		if n == 1 {
			text = bytes.TrimPrefix(text, []byte("\uFEFF"))
		}
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		pos := fmt.Sprintf("%s:%d", name, n)
		l, err := p.line(text, n)
		if err != nil {
			return nil, &LineError{Pos: pos, Err: err}
		}
		l.Pos = pos
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{Pos: fmt.Sprintf("%s:%d", name, n+1), Err: fmt.Errorf("line longer than %d bytes", MaxLineBytes)}
		}
		return nil, fmt.Errorf("scenario: read %s: %w", name, err)
	}
	return lines, nil
}

// The fields of a line, by their lower-case name.
const (
	fieldSubject       = "subject"
	fieldSessionID     = "sessionid"
	fieldMessageID     = "messageid"
	fieldBody          = "body"
	fieldContentType   = "contenttype"
	fieldCorrelationID = "correlationid"
	fieldScheduleAfter = "scheduleafter"
	fieldSendAfter     = "sendafter"
	fieldTimeToLive    = "timetolive"
	fieldProperties    = "applicationproperties"
)

var knownFields = map[string]bool{
	fieldSubject: true, fieldSessionID: true, fieldMessageID: true, fieldBody: true, fieldContentType: true,
	fieldCorrelationID: true, fieldScheduleAfter: true, fieldSendAfter: true, fieldTimeToLive: true, fieldProperties: true,
}

// parser holds what Parse remembers across lines.
type parser struct {
	name   string
	warn   func(string)
	warned map[string]bool // unknown field names warned about
}

func (p *parser) line(text []byte, n int) (Line, error) {
	if text[0] != '{' {
		return Line{}, errors.New("want one JSON object per line")
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return Line{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Line{}, errors.New("data after the JSON object")
	}
	for k := range obj {
		if strings.EqualFold(k, fieldScale) {
			return p.scaleLine(obj)
		}
		if strings.EqualFold(k, fieldOutage) {
			return p.outageLine(obj)
		}
	}
	fields := map[string]json.RawMessage{} // by lower-case name; null left out
	given := map[string]string{}           // lower-case name -> name as written
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		lk := strings.ToLower(k)
		if !knownFields[lk] {
			if !p.warned[k] {
				p.warned[k] = true
				p.warn(fmt.Sprintf("%s:%d: unknown field %q ignored (reported once)", p.name, n, k))
			}
			continue
		}
		if prev, dup := given[lk]; dup {
			return Line{}, fmt.Errorf("%q and %q name the same field", prev, k)
		}
		given[lk] = k
		if v := bytes.TrimSpace(obj[k]); !bytes.Equal(v, []byte("null")) {
			fields[lk] = v
		}
	}
	str := func(key string) (string, error) {
		raw, ok := fields[key]
		if !ok {
			return "", nil
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", fmt.Errorf("%s: want a string, got %s", given[key], snippet(raw))
		}
		return v, nil
	}
	dur := func(key string) (time.Duration, error) {
		if v, err := str(key); err != nil || v == "" {
			return 0, err
		}
		return parseDuration(given[key], fields[key])
	}

	var l Line
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{
		{fieldSubject, &l.Subject}, {fieldSessionID, &l.SessionID}, {fieldMessageID, &l.MessageID},
		{fieldContentType, &l.ContentType}, {fieldCorrelationID, &l.CorrelationID},
	} {
		if *f.dst, err = str(f.key); err != nil {
			return Line{}, err
		}
	}
	if l.SessionID == "" {
		return Line{}, errors.New("sessionId is missing or empty (the queue requires sessions)")
	}
	if l.MessageID == "" {
		l.MessageID = generatedID(p.name, n)
		p.warn(fmt.Sprintf("%s:%d: no messageId; sending it as %q", p.name, n, l.MessageID))
	}
	// Legitimate ways to test poison, but easy to do by mistake.
	if l.Subject == "" {
		p.warn(fmt.Sprintf("%s:%d: no subject; sending it without one (the handler parks it as UnknownSubject)", p.name, n))
	}
	if _, ok := fields[fieldBody]; !ok {
		p.warn(fmt.Sprintf("%s:%d: no body; sending an empty one (the handler parks it as InvalidPayload)", p.name, n))
	}
	for _, id := range []struct{ name, v string }{{"sessionId", l.SessionID}, {"messageId", l.MessageID}} {
		if c := utf8.RuneCountInString(id.v); c > membroker.MaxIDLength {
			return Line{}, fmt.Errorf("%s has %d characters, Service Bus allows %d", id.name, c, membroker.MaxIDLength)
		}
	}

	if body, ok := fields[fieldBody]; ok {
		if body[0] == '"' {
			var s string
			if err := json.Unmarshal(body, &s); err != nil {
				return Line{}, fmt.Errorf("body: %v", err)
			}
			l.Body = []byte(s)
		} else {
			l.Body = bytes.Clone(body)
			l.ContentType = cmp.Or(l.ContentType, "application/json")
		}
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{fieldScheduleAfter, &l.ScheduleAfter}, {fieldSendAfter, &l.SendAfter}, {fieldTimeToLive, &l.TimeToLive}} {
		if *f.dst, err = dur(f.key); err != nil {
			return Line{}, err
		}
	}
	if raw, ok := fields[fieldProperties]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(raw, &props); err != nil {
			return Line{}, fmt.Errorf("%s: want an object, got %s", given[fieldProperties], snippet(raw))
		}
		for k, v := range props {
			val, ok, err := propertyValue(v)
			if err != nil {
				return Line{}, fmt.Errorf("%s.%s: %v", given[fieldProperties], k, err)
			}
			if !ok {
				continue // null: left out
			}
			if l.ApplicationProperties == nil {
				l.ApplicationProperties = make(map[string]any, len(props))
			}
			l.ApplicationProperties[k] = val
		}
	}
	if size := membroker.MessageSize(l.Message()); size > MaxMessageBytes {
		return Line{}, fmt.Errorf("the message has %d bytes, over the Service Bus limit of %d", size, MaxMessageBytes)
	}
	return l, nil
}

// parseDuration reads field k's JSON value raw: a Go duration string, at least 0.
func parseDuration(k string, raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s: want a string, got %s", k, snippet(raw))
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a Go duration such as 30s or 1h30m, at least 0", k, s)
	}
	return d, nil
}

// generatedID is the MessageId of a line without one: <file>:<line>, or line-<line>.
func generatedID(name string, n int) string {
	id := fmt.Sprintf("%s:%d", filepath.Base(name), n)
	if utf8.RuneCountInString(id) > membroker.MaxIDLength {
		id = fmt.Sprintf("line-%d", n)
	}
	return id
}

// propertyValue converts a JSON value to a Service Bus property value (ok is
// false for null).
func propertyValue(raw json.RawMessage) (v any, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case bytes.Equal(raw, []byte("null")):
		return nil, false, nil
	case raw[0] == '{' || raw[0] == '[':
		var b bytes.Buffer
		_ = json.Compact(&b, raw) // raw was decoded: it compacts
		return b.String(), true, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false, err
	}
	switch v := v.(type) {
	case string, bool:
		return v, true, nil
	case json.Number:
		if i, err := v.Int64(); err == nil && !strings.ContainsAny(v.String(), ".eE") {
			return i, true, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, false, fmt.Errorf("number %s out of range", v)
		}
		return f, true, nil
	}
	return nil, false, fmt.Errorf("unexpected value %s", snippet(raw))
}

// snippet shortens raw JSON for a message.
func snippet(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}
