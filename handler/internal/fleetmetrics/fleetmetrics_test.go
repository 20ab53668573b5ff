package fleetmetrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// line is one report line as KQL reads it.
type line struct {
	Msg        string   `json:"msg"`
	InstanceID string   `json:"instance_id"`
	IntervalS  float64  `json:"interval_s"`
	Part       int      `json:"part"`
	Parts      int      `json:"parts"`
	Series     []Series `json:"series"`
}

func readLines(t *testing.T, out *bytes.Buffer) []line {
	t.Helper()
	var ls []line
	for _, s := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if s == "" {
			continue
		}
		if len(s) > 32768 {
			t.Errorf("a line of %d characters: Application Insights keeps 32,768", len(s))
		}
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if l.Msg == Msg {
			ls = append(ls, l)
		}
	}
	out.Reset()
	return ls
}

// instruments is a registry with the shapes the handler has.
type instruments struct {
	reg      *prometheus.Registry
	messages *prometheus.CounterVec
	lag      *prometheus.HistogramVec
	info     prometheus.Gauge
}

func newInstruments() instruments {
	in := instruments{
		reg:      prometheus.NewRegistry(),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orderstatus_messages_total", Help: "h"}, []string{"subject", "result"}),
		lag:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "orderstatus_lag_seconds", Help: "h", Buckets: []float64{1, 10}}, []string{"kind"}),
		info:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderstatus_build_info", Help: "h"}),
	}
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "go_something_total", Help: "h"})
	other.Add(7)
	in.info.Set(1)
	in.reg.MustRegister(in.messages, in.lag, in.info, other)
	return in
}

func TestFlushReportsIncreasesOnly(t *testing.T) {
	in := newInstruments()
	var out bytes.Buffer
	clk := &fakeNow{t: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
	r := New(in.reg, slog.New(slog.NewJSONHandler(&out, nil)).With("instance_id", "i-1"), &Options{Now: clk.now})

	in.messages.WithLabelValues("OrderStatusChanged", "Applied").Add(3)
	in.lag.WithLabelValues("enqueued_to_settled").Observe(0.5)
	in.lag.WithLabelValues("enqueued_to_settled").Observe(5)
	clk.Advance(time.Minute)
	r.Flush()
	ls := readLines(t, &out)
	if len(ls) != 1 {
		t.Fatalf("%d lines, want 1", len(ls))
	}
	l := ls[0]
	if l.InstanceID != "i-1" || l.IntervalS < 60 || l.IntervalS > 61 {
		t.Errorf("instance %q interval %v s, want i-1 and 60 s", l.InstanceID, l.IntervalS)
	}
	want := []Series{
		{Name: "orderstatus_lag_seconds", Labels: map[string]string{"kind": "enqueued_to_settled"}, Count: 2, Sum: 5.5,
			Buckets: map[string]uint64{"1": 1, "10": 2, "+Inf": 2}},
		{Name: "orderstatus_messages_total", Labels: map[string]string{"subject": "OrderStatusChanged", "result": "Applied"}, Value: 3},
	}
	if got, w := fmt.Sprint(l.Series), fmt.Sprint(want); got != w {
		t.Errorf("series\n got %s\nwant %s (no gauge, no go_ family)", got, w)
	}

	// The next line holds only what changed since.
	in.messages.WithLabelValues("OrderStatusChanged", "Applied").Add(2)
	in.messages.WithLabelValues("OrderStatusChanged", "Stale").Inc()
	r.Flush()
	ls = readLines(t, &out)
	if len(ls) != 1 {
		t.Fatalf("%d lines, want 1", len(ls))
	}
	want = []Series{
		{Name: "orderstatus_messages_total", Labels: map[string]string{"subject": "OrderStatusChanged", "result": "Applied"}, Value: 2},
		{Name: "orderstatus_messages_total", Labels: map[string]string{"subject": "OrderStatusChanged", "result": "Stale"}, Value: 1},
	}
	if got, w := fmt.Sprint(ls[0].Series), fmt.Sprint(want); got != w {
		t.Errorf("second line\n got %s\nwant %s", got, w)
	}

	// Nothing changed: no line.
	r.Flush()
	if ls := readLines(t, &out); len(ls) != 0 {
		t.Errorf("%d lines with nothing changed, want none: %+v", len(ls), ls)
	}
}

// TestLinesOfAllInstancesSumToTheFleet: what KQL does, sum the increases
// of every line of every instance, gives the fleet's totals, whenever the
// lines were written.
func TestLinesOfAllInstancesSumToTheFleet(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	fleet := map[string]float64{}
	var reporters []*Reporter
	var ins []instruments
	for i := range 3 {
		in := newInstruments()
		ins = append(ins, in)
		reporters = append(reporters, New(in.reg, log.With("instance_id", fmt.Sprintf("i-%d", i)), nil))
	}
	results := []string{"Applied", "Duplicate", "Stale", "Parked", "Failed"}
	for round := range 7 {
		for i, in := range ins {
			n := float64((round*3 + i*5) % 4)
			r := results[(round+i)%len(results)]
			in.messages.WithLabelValues("OrderStatusChanged", r).Add(n)
			fleet[r] += n
			if (round+i)%2 == 0 {
				reporters[i].Flush()
			}
		}
	}
	for _, r := range reporters {
		r.Flush() // at shutdown
	}
	sum := map[string]float64{}
	for _, l := range readLines(t, &out) {
		for _, s := range l.Series {
			if s.Name == "orderstatus_messages_total" {
				sum[s.Labels["result"]] += s.Value
			}
		}
	}
	for _, r := range results {
		if sum[r] != fleet[r] {
			t.Errorf("%s: lines sum to %v, the fleet counted %v", r, sum[r], fleet[r])
		}
	}
}

func TestLongReportsAreSplit(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "orderstatus_x_total", Help: "h"}, []string{"operation"})
	reg.MustRegister(c)
	const n = 2000
	for i := range n {
		c.WithLabelValues(fmt.Sprintf("operation-with-a-long-name-%04d", i)).Inc()
	}
	var out bytes.Buffer
	New(reg, slog.New(slog.NewJSONHandler(&out, nil)), nil).Flush()
	ls := readLines(t, &out)
	if len(ls) < 2 {
		t.Fatalf("%d lines for %d series, want several", len(ls), n)
	}
	total := 0
	for i, l := range ls {
		if l.Part != i+1 || l.Parts != len(ls) {
			t.Errorf("line %d: part %d of %d, want %d of %d", i, l.Part, l.Parts, i+1, len(ls))
		}
		b, _ := json.Marshal(l.Series)
		if len(b) > MaxLineBytes+1024 {
			t.Errorf("part %d: %d bytes of series, want about %d at most", l.Part, len(b), MaxLineBytes)
		}
		total += len(l.Series)
	}
	if total != n {
		t.Errorf("%d series over the parts, want %d", total, n)
	}
}

func TestRunReportsEveryInterval(t *testing.T) {
	in := newInstruments()
	var out syncBuffer
	r := New(in.reg, slog.New(slog.NewJSONHandler(&out, nil)), &Options{Interval: 5 * time.Millisecond})
	ctx, cancel := contextWithCancel(t)
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	in.messages.WithLabelValues("OrderStatusChanged", "Applied").Inc()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), Msg) {
		if time.Now().After(deadline) {
			t.Fatal("no report after the interval passed")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

// fakeNow is a clock the test moves.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock on by d.
func (c *fakeNow) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }
