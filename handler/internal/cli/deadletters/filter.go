package deadletters

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// filterFlags are the FILTER flags, as given; mcp names them as the MCP
// tools' arguments in errors.
type filterFlags struct {
	source, reason, group, order, since, until, text, state string
	mcp                                                     bool
}

// name is how an error names the flag: --order, or the argument order_id.
func (ff *filterFlags) name(flag string) string {
	switch {
	case ff == nil || !ff.mcp:
		return "--" + flag
	case flag == "order":
		return "order_id"
	}
	return flag
}

func addFilterFlags(fs *flag.FlagSet) *filterFlags {
	ff := &filterFlags{}
	fs.StringVar(&ff.source, "source", "", "only entries from this `source`: dlq, poison or poison-dlq")
	fs.StringVar(&ff.reason, "reason", "", "only entries with this dead-letter `reason` (e.g. MaxDeliveryCountExceeded)")
	fs.StringVar(&ff.group, "group", "", "only entries of this failure `group` (as groups prints it)")
	fs.StringVar(&ff.order, "order", "", "only entries of this order `id`")
	fs.StringVar(&ff.since, "since", "", "only entries stored at or after `T`: RFC 3339, or a duration meaning that long ago (2h, 7d)")
	fs.StringVar(&ff.until, "until", "", "only entries stored before `T`: RFC 3339, or a duration meaning that long ago")
	fs.StringVar(&ff.text, "text", "", "only entries whose MessageId, order id, description or body contains `S` (any case)")
	fs.StringVar(&ff.state, "state", "", "only entries in this `state`: open, left, replay-due, replayed, archived, discarded (several: a,b)")
	return ff
}

func (ff *filterFlags) given() bool { return *ff != filterFlags{mcp: ff.mcp} }

// filter is a checked FILTER; its relative times are resolved by at.
type filter struct {
	f           dlstore.Filter
	since, till when
	ff          *filterFlags
}

// when is a --since or --until: a time, or how long ago.
type when struct {
	at  time.Time
	ago time.Duration
	set bool
}

func (w when) resolve(now time.Time) time.Time {
	switch {
	case !w.set:
		return time.Time{}
	case w.at.IsZero():
		return now.Add(-w.ago)
	}
	return w.at
}

// check validates the flags (a usage error names the flag); states is the
// default without --state (nil: every state).
func (ff *filterFlags) check(states []dlstore.State) (filter, error) {
	out := filter{f: dlstore.Filter{Reason: ff.reason, Group: ff.group, OrderID: ff.order, Text: ff.text, States: states}, ff: ff}
	if ff.source != "" {
		src, ok := parseSource(ff.source)
		if !ok {
			return out, fmt.Errorf("%s %q: want dlq, poison or poison-dlq", ff.name("source"), ff.source)
		}
		out.f.Source = src
	}
	if ff.state != "" {
		out.f.States = nil
		for _, s := range strings.Split(ff.state, ",") {
			st, ok := dlstore.ParseState(strings.TrimSpace(s))
			if !ok {
				return out, fmt.Errorf("%s %q: want open, left, replay-due, replayed, archived or discarded", ff.name("state"), s)
			}
			out.f.States = append(out.f.States, st)
		}
	}
	var err error
	if out.since, err = parseWhen(ff.name("since"), ff.since); err != nil {
		return out, err
	}
	if out.till, err = parseWhen(ff.name("until"), ff.until); err != nil {
		return out, err
	}
	return out, nil
}

// at resolves the relative times against now and checks since precedes until.
func (f filter) at(now time.Time) (dlstore.Filter, error) {
	out := f.f
	out.Since, out.Until = f.since.resolve(now), f.till.resolve(now)
	if !out.Since.IsZero() && !out.Until.IsZero() && !out.Since.Before(out.Until) {
		return out, fmt.Errorf("%s %s is not before %s %s", f.ff.name("since"), stamp(out.Since), f.ff.name("until"), stamp(out.Until))
	}
	return out, nil
}

const day = 24 * time.Hour

// parseWhen reads RFC 3339 or a duration at least 0 (Go's, or "7d").
func parseWhen(flagName, v string) (when, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return when{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return when{at: t, set: true}, nil
	}
	d, err := time.ParseDuration(v)
	if days, ok := strings.CutSuffix(v, "d"); err != nil && ok {
		n, aerr := strconv.ParseInt(days, 10, 64)
		switch {
		case aerr == nil && n >= 0 && n <= int64(math.MaxInt64/day):
			d, err = time.Duration(n)*day, nil
		case aerr == nil && n > 0, errors.Is(aerr, strconv.ErrRange) && !strings.HasPrefix(days, "-"):
			return when{}, fmt.Errorf("%s %q: too long ago: at most %dd", flagName, v, int64(math.MaxInt64/day))
		}
	}
	if err != nil || d < 0 {
		return when{}, fmt.Errorf("%s %q: want RFC 3339 (2026-12-01T09:00:00Z) or a duration meaning that long ago (90m, 2h, 7d)", flagName, v)
	}
	return when{ago: d, set: true}, nil
}

func parseSource(s string) (dlstore.Source, bool) {
	for _, src := range dlstore.Sources {
		if string(src) == s {
			return src, true
		}
	}
	return "", false
}
