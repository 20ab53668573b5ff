// Package scenario reads the development host's workloads and generates its
// built-in demo. A workload is a list of messages for the order-status queue
// (a Line each), sent in order.
//
// The file format is JSON Lines, one message per line:
//
//		{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1",
//		 "body":{"orderId":"o-1","status":"Created","sequence":1},
//		 "scheduleAfter":"30m","sendAfter":"12m","applicationProperties":{"k":"v"}}
//
//	  - sessionId and messageId are required (the queue requires sessions,
//	    and a scenario's author needs the id to find a message in the
//	    summary);
//	  - body is any JSON value: a string is sent as is (so "{bad json" is a
//	    bad body), anything else as its JSON text with content type
//	    application/json; a missing body sends an empty one;
//	  - scheduleAfter (optional Go duration) schedules the message that long
//	    after it is sent;
//	  - sendAfter (optional Go duration, an extension) holds the line until
//	    that much time has passed since the first line was sent, on the
//	    development host's clock: a producer's late replay, after the
//	    duplicate detection window, is sendAfter "11m";
//	  - applicationProperties values are strings, numbers or booleans.
//
// Blank lines are skipped. Field names match without regard to case, and
// unknown fields are errors (a misspelt "sesionId" would otherwise send a
// message without a session).
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
	"strings"
	"time"

	"orderstatus/handler/internal/broker"
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
	// Pos is "file:line" for a line read from a file, "" otherwise.
	Pos string
}

// Message returns the broker message the line sends.
func (l Line) Message() broker.Message {
	return broker.Message{
		MessageID:             l.MessageID,
		SessionID:             l.SessionID,
		Subject:               l.Subject,
		ContentType:           l.ContentType,
		Body:                  bytes.Clone(l.Body),
		ApplicationProperties: maps.Clone(l.ApplicationProperties),
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

// ReadFile parses the workload in file path.
func ReadFile(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a workload from r; name is used in error positions. The
// first bad line stops it with a *LineError.
func Parse(r io.Reader, name string) ([]Line, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), MaxLineBytes)
	var lines []Line
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		pos := fmt.Sprintf("%s:%d", name, n)
		l, err := parseLine(text)
		if err != nil {
			return nil, &LineError{Pos: pos, Err: err}
		}
		l.Pos = pos
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{Pos: fmt.Sprintf("%s:%d", name, len(lines)+1), Err: fmt.Errorf("line longer than %d bytes", MaxLineBytes)}
		}
		return nil, fmt.Errorf("scenario: read %s: %w", name, err)
	}
	return lines, nil
}

type rawLine struct {
	Subject               *string                    `json:"subject"`
	SessionID             *string                    `json:"sessionId"`
	MessageID             *string                    `json:"messageId"`
	Body                  json.RawMessage            `json:"body"`
	ScheduleAfter         *string                    `json:"scheduleAfter"`
	SendAfter             *string                    `json:"sendAfter"`
	ApplicationProperties map[string]json.RawMessage `json:"applicationProperties"`
}

func parseLine(text []byte) (Line, error) {
	if text[0] != '{' {
		return Line{}, errors.New("want one JSON object per line")
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var raw rawLine
	if err := dec.Decode(&raw); err != nil {
		return Line{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return Line{}, errors.New("data after the JSON object")
	}
	var l Line
	for _, f := range []struct {
		key      string
		src      *string
		dst      *string
		required bool
	}{
		{"subject", raw.Subject, &l.Subject, false},
		{"sessionId", raw.SessionID, &l.SessionID, true},
		{"messageId", raw.MessageID, &l.MessageID, true},
	} {
		if f.src == nil || *f.src == "" {
			if f.required {
				return Line{}, fmt.Errorf("%s is missing or empty", f.key)
			}
			continue
		}
		*f.dst = *f.src
	}
	switch body := bytes.TrimSpace(raw.Body); {
	case len(body) == 0:
	case body[0] == '"':
		var s string
		if err := json.Unmarshal(body, &s); err != nil {
			return Line{}, fmt.Errorf("body: %v", err)
		}
		l.Body = []byte(s)
	default:
		l.Body = bytes.Clone(body)
		l.ContentType = "application/json"
	}
	for _, d := range []struct {
		key string
		src *string
		dst *time.Duration
	}{{"scheduleAfter", raw.ScheduleAfter, &l.ScheduleAfter}, {"sendAfter", raw.SendAfter, &l.SendAfter}} {
		if d.src == nil {
			continue
		}
		v, err := time.ParseDuration(*d.src)
		if err != nil || v < 0 {
			return Line{}, fmt.Errorf("%s %q: want a Go duration such as 30m or 1h30m, at least 0", d.key, *d.src)
		}
		*d.dst = v
	}
	if len(raw.ApplicationProperties) > 0 {
		l.ApplicationProperties = make(map[string]any, len(raw.ApplicationProperties))
		for k, v := range raw.ApplicationProperties {
			val, err := propertyValue(v)
			if err != nil {
				return Line{}, fmt.Errorf("applicationProperties.%s: %v", k, err)
			}
			l.ApplicationProperties[k] = val
		}
	}
	return l, nil
}

// propertyValue converts a JSON scalar to a Service Bus property value:
// string, bool, int64 for integers, float64 otherwise.
func propertyValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case string, bool:
		return v, nil
	case json.Number:
		if i, err := v.Int64(); err == nil && !strings.ContainsAny(v.String(), ".eE") {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", v)
		}
		return f, nil
	default:
		return nil, errors.New("want a string, number or boolean")
	}
}
