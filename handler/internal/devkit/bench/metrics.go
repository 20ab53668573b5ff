package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
)

// Sample is one series of a Prometheus text exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape is a parsed /api/metrics answer.
type Scrape []Sample

// ParseMetrics reads the Prometheus text format (client_golang's subset).
func ParseMetrics(r io.Reader) (Scrape, error) {
	var out Scrape
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
		s.Name = line[:i]
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return s, fmt.Errorf("bench: metric line %q: unclosed labels", line)
		}
		for _, kv := range splitLabels(line[i+1 : j]) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return s, fmt.Errorf("bench: metric line %q: label %q", line, kv)
			}
			uq, err := strconv.Unquote(v)
			if err != nil {
				return s, fmt.Errorf("bench: metric line %q: label %q: %w", line, kv, err)
			}
			s.Labels[k] = uq
		}
		rest = line[j+1:]
	} else if i >= 0 {
		s.Name, rest = line[:i], line[i:]
	} else {
		return s, fmt.Errorf("bench: metric line %q: no value", line)
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("bench: metric line %q: no value", line)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("bench: metric line %q: %w", line, err)
	}
	s.Value = v
	return s, nil
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, esc, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

// Sum adds the values of the series name whose labels include match.
func (sc Scrape) Sum(name string, match map[string]string) float64 {
	var total float64
next:
	for _, s := range sc {
		if s.Name != name {
			continue
		}
		for k, v := range match {
			if s.Labels[k] != v {
				continue next
			}
		}
		total += s.Value
	}
	return total
}

// Quantile estimates the q-quantile of the histogram name (labels including
// match) as Prometheus's histogram_quantile does; NaN without observations.
func (sc Scrape) Quantile(name string, q float64, match map[string]string) float64 {
	type bucket struct{ le, n float64 }
	byLE := map[float64]float64{}
next:
	for _, s := range sc {
		if s.Name != name+"_bucket" {
			continue
		}
		for k, v := range match {
			if s.Labels[k] != v {
				continue next
			}
		}
		le, err := strconv.ParseFloat(s.Labels["le"], 64)
		if err != nil {
			continue
		}
		byLE[le] += s.Value
	}
	var bs []bucket
	for le, n := range byLE {
		bs = append(bs, bucket{le, n})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].n
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.n >= rank {
			if math.IsInf(b.le, 1) {
				return lower // beyond the last finite bound
			}
			if b.n == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.n-below)
		}
		lower, below = b.le, b.n
	}
	return lower
}

// scrapeHandler reads the metrics of OrderStatus's oldest running
// instance, not through the front (the HTTP group's registry counts no message).
func scrapeHandler(ctx context.Context, h *devhost.Host) (Scrape, error) {
	running := h.RunningIn("")
	if len(running) == 0 {
		return Scrape{}, errors.New("bench: no instance of OrderStatus is running")
	}
	base, err := h.InstanceURL(ctx, running[0])
	if err != nil {
		return Scrape{}, err
	}
	return scrape(ctx, base)
}

// scrape reads GET <base>/api/metrics.
func scrape(ctx context.Context, base string) (Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: scrape %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: scrape %s: %s", base, resp.Status)
	}
	return ParseMetrics(resp.Body)
}
