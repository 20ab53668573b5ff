package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
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

// sampleLine matches a series line of the Prometheus text format (name,
// labels, value), labelPair each of its labels.
var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?`)
)

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
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || labelPair.ReplaceAllString(m[2], "") != "" {
			return nil, fmt.Errorf("bench: metric line %q: not name{labels} value", line)
		}
		s := Sample{Name: m[1], Labels: map[string]string{}}
		for _, kv := range labelPair.FindAllStringSubmatch(m[2], -1) {
			v, err := strconv.Unquote(`"` + kv[2] + `"`)
			if err != nil {
				return nil, fmt.Errorf("bench: metric line %q: label %s: %w", line, kv[1], err)
			}
			s.Labels[kv[1]] = v
		}
		var err error
		if s.Value, err = strconv.ParseFloat(m[3], 64); err != nil {
			return nil, fmt.Errorf("bench: metric line %q: %w", line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// has reports whether s is a series of name whose labels include match.
func (s Sample) has(name string, match map[string]string) bool {
	for k, v := range match {
		if s.Labels[k] != v {
			return false
		}
	}
	return s.Name == name
}

// Sum adds the values of the series name whose labels include match.
func (sc Scrape) Sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range sc {
		if s.has(name, match) {
			total += s.Value
		}
	}
	return total
}

// Quantile estimates the q-quantile of the histogram name (labels including
// match) as Prometheus's histogram_quantile does; NaN without observations.
func (sc Scrape) Quantile(name string, q float64, match map[string]string) float64 {
	byLE := map[float64]float64{}
	for _, s := range sc {
		if le, err := strconv.ParseFloat(s.Labels["le"], 64); err == nil && s.has(name+"_bucket", match) {
			byLE[le] += s.Value
		}
	}
	les := slices.Sorted(maps.Keys(byLE))
	if len(les) == 0 || byLE[les[len(les)-1]] == 0 {
		return math.NaN()
	}
	rank := q * byLE[les[len(les)-1]]
	lower, below := 0.0, 0.0
	for _, le := range les {
		if n := byLE[le]; n >= rank {
			if math.IsInf(le, 1) {
				return lower // beyond the last finite bound
			}
			if n == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		lower, below = le, byLE[le]
	}
	return lower
}

// scrapeHandler reads GET /api/metrics of OrderStatus's oldest running
// instance, not through the front (the HTTP group's registry counts no message).
func scrapeHandler(ctx context.Context, h *devhost.Host) (Scrape, error) {
	running := h.RunningIn("")
	if len(running) == 0 {
		return nil, errors.New("bench: no instance of OrderStatus is running")
	}
	base, err := h.InstanceURL(ctx, running[0])
	if err != nil {
		return nil, err
	}
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
