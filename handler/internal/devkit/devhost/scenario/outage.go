package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Outage targets: Table Storage, or the handler's own Service Bus calls
// (parking, rescheduling); the trigger keeps delivering.
const (
	OutageTable      = "table"
	OutageServiceBus = "servicebus"
)

// IsOutageTarget reports whether t is one of the outage targets.
func IsOutageTarget(t string) bool { return t == OutageTable || t == OutageServiceBus }

// Fields of an outage line, by their lower-case name.
const (
	fieldOutage   = "outage"
	fieldDuration = "duration"
)

// outageLine reads a line with an "outage" field, such as
//
//	{"outage":"table","sendAfter":"2m","duration":"30m"}
//
// duration is required and above 0; any other field is an error.
func (p *parser) outageLine(obj map[string]json.RawMessage) (Line, error) {
	var l Line
	hasDuration := false
	for k, raw := range obj {
		switch strings.ToLower(k) {
		case fieldOutage:
			if err := json.Unmarshal(raw, &l.Outage); err != nil || !IsOutageTarget(l.Outage) {
				return Line{}, fmt.Errorf("%s: want %q or %q, got %s", k, OutageTable, OutageServiceBus, snippet(raw))
			}
		case fieldSendAfter, fieldDuration:
			d, err := parseDuration(k, raw)
			if err != nil {
				return Line{}, err
			}
			if strings.EqualFold(k, fieldDuration) {
				l.Duration, hasDuration = d, true
			} else {
				l.SendAfter = d
			}
		default:
			return Line{}, fmt.Errorf("field %q on an outage line (it takes outage, sendAfter and duration only)", k)
		}
	}
	if !hasDuration || l.Duration <= 0 {
		return Line{}, errors.New("an outage line needs a duration above 0, such as \"duration\":\"30m\"")
	}
	return l, nil
}

// ParseOutages reads the value of `orderstatus-dev dev --outage`: comma-separated
// TARGET@AFTER+DURATION, such as table@2m+30m.
func ParseOutages(s string) ([]Line, error) {
	var out []Line
	for _, ev := range strings.Split(s, ",") {
		ev = strings.TrimSpace(ev)
		target, when, ok := strings.Cut(ev, "@")
		if !ok {
			return nil, fmt.Errorf("outage %q: want TARGET@AFTER+DURATION, such as table@2m+30m", ev)
		}
		if !IsOutageTarget(target) {
			return nil, fmt.Errorf("outage %q: target %q: want %s or %s", ev, target, OutageTable, OutageServiceBus)
		}
		after, dur, ok := strings.Cut(when, "+")
		if !ok {
			return nil, fmt.Errorf("outage %q: want TARGET@AFTER+DURATION, such as table@2m+30m", ev)
		}
		a, err := time.ParseDuration(after)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("outage %q: AFTER %q is not a Go duration of at least 0, such as 2m", ev, after)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("outage %q: DURATION %q is not a Go duration above 0, such as 30m", ev, dur)
		}
		out = append(out, Line{Outage: target, SendAfter: a, Duration: d, Pos: "--outage " + ev})
	}
	return out, nil
}
