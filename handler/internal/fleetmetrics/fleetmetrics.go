// Package fleetmetrics logs this process's Prometheus counters and histograms as
// "fleet_metrics" JSON lines Azure Monitor can sum across instances: each series'
// increase since the last report, every Interval and when it stops.
// docs/observability.md has the queries and the reasons.
package fleetmetrics

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Msg is the msg of every report line.
const Msg = "fleet_metrics"

// DefaultInterval is how often a process reports when Options leave it zero.
const DefaultInterval = time.Minute

// MaxLineBytes bounds a line's series JSON: Application Insights keeps 32,768 characters of a trace.
const MaxLineBytes = 16 << 10

// Series is one time series' increase over the interval: Value for a counter;
// Count, Sum and cumulative Buckets by upper bound ("+Inf" too) for a histogram.
type Series struct {
	Name    string            `json:"name"`
	Labels  map[string]string `json:"labels,omitempty"`
	Value   float64           `json:"value,omitempty"`
	Count   uint64            `json:"count,omitempty"`
	Sum     float64           `json:"sum,omitempty"`
	Buckets map[string]uint64 `json:"buckets,omitempty"`
}

// Options tune New. The zero value (or nil) is usable.
type Options struct {
	Interval time.Duration
	// Now measures interval_s (default time.Now).
	Now func() time.Time
	// Prefix selects the families reported by name (default "orderstatus_").
	Prefix string
}

// Reporter writes the report lines. Its methods are safe for concurrent use.
type Reporter struct {
	g    prometheus.Gatherer
	log  *slog.Logger
	opts Options

	mu     sync.Mutex
	last   map[string]Series // series key -> cumulative values at the last report
	lastAt time.Time
}

// New returns a Reporter of what g gathers, writing to log (with the instance id).
func New(g prometheus.Gatherer, log *slog.Logger, opts *Options) *Reporter {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Prefix == "" {
		o.Prefix = "orderstatus_"
	}
	return &Reporter{g: g, log: log, opts: o, last: map[string]Series{}, lastAt: o.Now()}
}

// Run reports every Interval until ctx ends; call Flush after the last answer.
func (r *Reporter) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Flush()
		}
	}
}

// Flush logs each series' increase since the previous report: no line when
// nothing changed, several past MaxLineBytes; after a gather error, next time.
func (r *Reporter) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	cur, err := r.gather()
	if err != nil {
		r.log.Warn("fleet metrics not gathered; the increase is reported next time", slog.String("error", err.Error()))
		return
	}
	var delta []Series
	for k, c := range cur {
		if d, ok := increase(c, r.last[k]); ok {
			delta = append(delta, d)
		}
	}
	r.last = cur
	interval := now.Sub(r.lastAt)
	r.lastAt = now
	if len(delta) == 0 {
		return
	}
	slices.SortFunc(delta, func(a, b Series) int { return strings.Compare(key(a), key(b)) })
	parts := split(delta)
	for i, p := range parts {
		attrs := []any{slog.Float64("interval_s", math.Round(interval.Seconds()*1000)/1000)}
		if len(parts) > 1 {
			attrs = append(attrs, slog.Int("part", i+1), slog.Int("parts", len(parts)))
		}
		attrs = append(attrs, slog.Any("series", p))
		r.log.Info(Msg, attrs...)
	}
}

func (r *Reporter) gather() (map[string]Series, error) {
	mfs, err := r.g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]Series{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, r.opts.Prefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := Series{Name: name}
			if len(m.GetLabel()) > 0 {
				s.Labels = map[string]string{}
				for _, l := range m.GetLabel() {
					s.Labels[l.GetName()] = l.GetValue()
				}
			}
			switch {
			case m.GetCounter() != nil:
				s.Value = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				s.Count, s.Sum = h.GetSampleCount(), h.GetSampleSum()
				s.Buckets = map[string]uint64{"+Inf": h.GetSampleCount()}
				for _, b := range h.GetBucket() {
					s.Buckets[strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)] = b.GetCumulativeCount()
				}
			default:
				continue // gauges (build_info, depths) are states, not sums
			}
			out[key(s)] = s
		}
	}
	return out, nil
}

// increase is cur minus prev; ok is false when nothing changed.
func increase(cur, prev Series) (Series, bool) {
	d := Series{Name: cur.Name, Labels: cur.Labels}
	if cur.Buckets == nil {
		d.Value = cur.Value - prev.Value
		return d, d.Value > 0
	}
	d.Count, d.Sum = cur.Count-prev.Count, cur.Sum-prev.Sum
	if d.Count == 0 {
		return d, false
	}
	d.Buckets = make(map[string]uint64, len(cur.Buckets))
	for le, n := range cur.Buckets {
		d.Buckets[le] = n - prev.Buckets[le]
	}
	return d, true
}

// key identifies a series: its name and labels in label-name order.
func key(s Series) string {
	var b strings.Builder
	b.WriteString(s.Name)
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		b.WriteString("\x00" + k + "=" + s.Labels[k])
	}
	return b.String()
}

// split cuts series into parts whose JSON stays under MaxLineBytes (an oversized series alone).
func split(series []Series) [][]Series {
	var parts [][]Series
	var cur []Series
	size := 0
	for _, s := range series {
		b, _ := json.Marshal(s)
		if len(cur) > 0 && size+len(b)+1 > MaxLineBytes {
			parts = append(parts, cur)
			cur, size = nil, 0
		}
		cur = append(cur, s)
		size += len(b) + 1
	}
	if len(cur) > 0 {
		parts = append(parts, cur)
	}
	return parts
}
