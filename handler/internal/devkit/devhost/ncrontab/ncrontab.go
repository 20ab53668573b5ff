// Package ncrontab parses the six-field NCRONTAB expressions of Azure
// Functions timer triggers, `{second} {minute} {hour} {day} {month}
// {day-of-week}`, as the NCrontab library the Functions host uses does, and
// computes their occurrences. Day and day-of-week (Sunday = 0) must both
// match, not either as in Vixie cron; month and day names are accepted.
package ncrontab

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrSyntax is wrapped by every error Parse returns.
var ErrSyntax = errors.New("ncrontab: invalid expression")

type fieldKind int

const (
	second fieldKind = iota
	minute
	hour
	day
	month
	weekday
)

type fieldSpec struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i
}

var specs = [6]fieldSpec{
	second:  {name: "second", min: 0, max: 59},
	minute:  {name: "minute", min: 0, max: 59},
	hour:    {name: "hour", min: 0, max: 23},
	day:     {name: "day", min: 1, max: 31},
	month:   {name: "month", min: 1, max: 12, names: []string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"}},
	weekday: {name: "day-of-week", min: 0, max: 6, names: []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}},
}

// Schedule is a parsed expression, immutable and safe for concurrent use.
type Schedule struct {
	expr   string
	fields [6]uint64 // bit v set: value v matches
}

// Parse parses a six-field expression; errors wrap ErrSyntax and name the field.
func Parse(expr string) (*Schedule, error) {
	parts := strings.Fields(expr)
	if len(parts) != 6 {
		return nil, fmt.Errorf("%w: %q has %d fields, want 6: {second} {minute} {hour} {day} {month} {day-of-week}", ErrSyntax, expr, len(parts))
	}
	s := &Schedule{expr: strings.Join(parts, " ")}
	for k, p := range parts {
		set, err := parseField(specs[k], p)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %s field %q: %v", ErrSyntax, expr, specs[k].name, p, err)
		}
		s.fields[k] = set
	}
	return s, nil
}

// String returns the expression with its fields separated by single spaces.
func (s *Schedule) String() string { return s.expr }

func parseField(spec fieldSpec, text string) (uint64, error) {
	var set uint64
	for _, item := range strings.Split(text, ",") {
		lo, hi, step := spec.min, spec.max, 1
		rangePart, stepPart, hasStep := strings.Cut(item, "/")
		if hasStep {
			n, err := strconv.Atoi(stepPart)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepPart)
			}
			step = n
		}
		switch {
		case rangePart == "*":
		case strings.Contains(rangePart, "-"):
			a, b, _ := strings.Cut(rangePart, "-")
			var err error
			if lo, err = parseValue(spec, a); err != nil {
				return 0, err
			}
			if hi, err = parseValue(spec, b); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %d-%d runs backwards", lo, hi)
			}
		default:
			v, err := parseValue(spec, rangePart)
			if err != nil {
				return 0, err
			}
			lo = v
			if !hasStep {
				hi = v
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << uint(v)
		}
	}
	return set, nil
}

func parseValue(spec fieldSpec, text string) (int, error) {
	if text == "" {
		return 0, errors.New("empty value")
	}
	if c := text[0]; c >= '0' && c <= '9' {
		v, err := strconv.Atoi(text)
		if err != nil || v < spec.min || v > spec.max {
			return 0, fmt.Errorf("%q is not a number from %d to %d", text, spec.min, spec.max)
		}
		return v, nil
	}
	if spec.names == nil {
		return 0, fmt.Errorf("%q is not a number from %d to %d", text, spec.min, spec.max)
	}
	lower := strings.ToLower(text)
	if len(lower) >= 3 {
		for i, n := range spec.names {
			if strings.HasPrefix(n, lower) {
				return spec.min + i, nil
			}
		}
	}
	return 0, fmt.Errorf("%q is not a %s name or number", text, spec.name)
}

func (s *Schedule) has(k fieldKind, v int) bool { return s.fields[k]&(1<<uint(v)) != 0 }

// searchYears bounds the search (a 29 February on a given weekday recurs within 28 years).
const searchYears = 30

// Next returns the first occurrence strictly after t, in t's location, with
// whole seconds; the zero Time if none within searchYears (30 February).
// It works on t's wall clock: the first field that does not match moves on
// by one and the finer fields restart, until every field matches.
func (s *Schedule) Next(t time.Time) time.Time {
	loc := t.Location()
	limit := t.Year() + searchYears
	t = t.Truncate(time.Second).Add(time.Second)
	year, mon, dd := t.Date()
	hh, mm, ss := t.Clock()
	for year <= limit {
		wall := time.Date(year, mon, dd, hh, mm, ss, 0, time.UTC) // carries an overflow
		year, mon, dd = wall.Date()
		hh, mm, ss = wall.Clock()
		switch {
		case !s.has(month, int(mon)):
			mon, dd, hh, mm, ss = mon+1, 1, 0, 0, 0
		case !s.has(day, dd) || !s.has(weekday, int(wall.Weekday())):
			dd, hh, mm, ss = dd+1, 0, 0, 0
		case !s.has(hour, hh):
			hh, mm, ss = hh+1, 0, 0
		case !s.has(minute, mm):
			mm, ss = mm+1, 0
		case !s.has(second, ss):
			ss++
		default:
			return time.Date(year, mon, dd, hh, mm, ss, 0, loc)
		}
	}
	return time.Time{}
}
