// Package scenario reads the development host's workloads and generates its
// built-in demo. A workload is a list of messages for the order-status queue
// (a Line each), sent in order.
//
// The file format is JSON Lines, one message per line:
//
//		{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1",
//		 "body":{"orderId":"o-1","status":"Created","sequence":1},
//		 "scheduleAfter":"30m","sendAfter":"12m","applicationProperties":{"k":"v"},
//		 "contentType":"application/json","correlationId":"c-1","timeToLive":"1h"}
//
//	  - sessionId is required (the queue requires sessions); at most 128
//	    characters, as is messageId;
//	  - messageId should be given (a scenario's author needs it to find a
//	    message in the summary); a line without one gets <file>:<line>,
//	    with a warning;
//	  - subject may be empty (the handler parks such a message as an
//	    unknown subject), with a warning;
//	  - body is any JSON value: a string is sent as is (so "{bad json" is a
//	    bad body), anything else as its JSON text with content type
//	    application/json; a missing body sends an empty one, with a
//	    warning;
//	  - contentType and correlationId (optional strings) set those message
//	    properties; contentType replaces the one body implies;
//	  - scheduleAfter (optional Go duration) schedules the message that long
//	    after it is sent;
//	  - sendAfter (optional Go duration, an extension) holds the line until
//	    that much time has passed since the first line was sent, on the
//	    development host's clock: a producer's late replay, after the
//	    duplicate detection window, is sendAfter "11m". Lines are sent in
//	    file order, so a line also waits for every line before it: one
//	    without sendAfter after a "5m" line goes at 5m too;
//	  - timeToLive (optional Go duration) is the message's time-to-live
//	    (the queue's default when longer or absent);
//	  - applicationProperties values are strings, numbers or booleans; a
//	    null value is left out, and an object or array is sent as its JSON
//	    text.
//
// A line with a "scale" field is a scale event instead of a message, such
// as {"scale":"add","sendAfter":"30s"} or {"scale":"kill","instance":2}
// (see ScaleAdd). A line with an "outage" field is an outage instead, such
// as {"outage":"table","sendAfter":"2m","duration":"30m"} (see
// OutageTable).
//
// An optional field that is null or "" counts as absent. Field names match
// without regard to case. An unknown field is a warning (once per name),
// not an error. Blank lines and a UTF-8 byte order mark are skipped. What
// cannot be sent is an error naming file:line: a line that is not one JSON
// object, a missing sessionId, a value of the wrong type, a bad duration,
// an id over 128 characters, or a message over the Service Bus limit of
// 256 KiB.
package scenario

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
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
	// ContentType is application/json when the body was a JSON value
	// other than a string.
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
	// Scale, when set, makes the line a scale event instead of a message:
	// one of ScaleAdd, ScaleRemove, ScaleKill, applied once SendAfter has
	// passed; Instance names the instance to remove or kill (an id or a
	// number; "" for the newest running one).
	Scale, Instance string
	// Outage, when set, makes the line an outage instead of a message:
	// OutageTable or OutageServiceBus becomes unreachable from the
	// handler once SendAfter has passed, for Duration on the host's
	// clock.
	Outage   string
	Duration time.Duration
}

// IsMessage reports whether the line sends a message (it is neither a
// scale event nor an outage).
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

// FromMessage returns the line that sends m (as built by package publish,
// the contract's encoder) at once.
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

// MaxLineBytes bounds one line (a Service Bus message is at most 256 KiB on
// the Standard tier; the JSON text of one may be larger).
const MaxLineBytes = 1 << 20

// MaxMessageBytes is the largest message a line may describe: the Service
// Bus Standard tier's limit, as the development host's broker measures it.
const MaxMessageBytes = membroker.DefaultMaxMessageSize

// Options tune ReadFile and Parse. The zero value (or nil) is usable.
type Options struct {
	// Warn receives each harmless problem as one line: an unknown field
	// (once per name), a generated MessageId, a missing subject or body
	// (sent anyway: a way to test poison). nil drops them.
	Warn func(msg string)
}

// ReadFile parses the workload in file path. An error opening or reading
// the file names it; a bad line is a *LineError.
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
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
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
		v, err := str(key)
		if err != nil || v == "" {
			return 0, err
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%s %q: want a Go duration such as 30m or 1h30m, at least 0", given[key], v)
		}
		return d, nil
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
			if l.ContentType == "" {
				l.ContentType = "application/json"
			}
		}
	}
	if l.ScheduleAfter, err = dur(fieldScheduleAfter); err != nil {
		return Line{}, err
	}
	if l.SendAfter, err = dur(fieldSendAfter); err != nil {
		return Line{}, err
	}
	if l.TimeToLive, err = dur(fieldTimeToLive); err != nil {
		return Line{}, err
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

// generatedID is the MessageId of a line without one: <file>:<line>, or
// line-<line> when the file name would make it too long.
func generatedID(name string, n int) string {
	id := fmt.Sprintf("%s:%d", filepath.Base(name), n)
	if utf8.RuneCountInString(id) > membroker.MaxIDLength {
		id = fmt.Sprintf("line-%d", n)
	}
	return id
}

// propertyValue converts a JSON value to a Service Bus property value:
// string, bool, int64 for integers, float64 for other numbers, and the
// compact JSON text of an object or array. ok is false for null.
func propertyValue(raw json.RawMessage) (v any, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case bytes.Equal(raw, []byte("null")):
		return nil, false, nil
	case raw[0] == '{' || raw[0] == '[':
		return string(compact(raw)), true, nil
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

// compact returns the JSON text raw without insignificant white space.
func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return bytes.Clone(raw) // cannot happen: raw was decoded
	}
	return b.Bytes()
}

// snippet shortens raw JSON for a message.
func snippet(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}
