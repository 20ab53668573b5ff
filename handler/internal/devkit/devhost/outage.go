package devhost

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// Outage targets (see Options.OutageTargets and StartOutage).
const (
	OutageTable      = scenario.OutageTable
	OutageServiceBus = scenario.OutageServiceBus
)

// JumpOutageEnd is a fast-forward to an outage's end (see Options.OnFastForward).
const JumpOutageEnd = "to the end of an outage"

// OutageSummary is one outage of a run and what it cost, on the host's clock.
type OutageSummary struct {
	// Target is OutageTable or OutageServiceBus.
	Target string `json:"target"`
	// After is its start since Play began, Duration its length (Go durations).
	After    string `json:"after"`
	Duration string `json:"duration"`
	// Ended is false when the summary was taken before its end.
	Ended bool `json:"ended"`
	// Refused counts the handler processes' requests to the target refused.
	Refused int `json:"refusedRequests"`
	// Rescheduled counts the copies the handler scheduled to retry (RetryAttempt).
	Rescheduled int `json:"rescheduled"`
	// DeadLettered counts the messages the triggered queues dead-lettered.
	DeadLettered int `json:"deadLettered"`
	// Parked counts the copies the handler sent to the poison queue.
	Parked int `json:"parked"`
	// Start and End are its bounds on the host's clock.
	Start, End time.Time `json:"-"`
}

// outageCounts are the counters an outage's summary is the difference of.
type outageCounts struct{ refused, rescheduled, deadLettered, parked int }

// outage is one outage under way or over.
type outage struct {
	target     string
	start, end time.Time
	after      time.Duration // since Play began
	from, to   outageCounts  // at its start; at its end, once ended
	ended      bool
}

// outages is the host's outage schedule and the fault proxies that refuse
// every request to a target while one of its outages is under way.
type outages struct {
	clock   clock.Clock
	proxies map[string]*faultproxy.Proxy
	// ended gets a token each time an outage ends, so WaitIdle looks again.
	ended chan struct{}

	mu   sync.Mutex
	list []*outage
}

func newOutages(c clock.Clock) *outages {
	return &outages{clock: c, proxies: map[string]*faultproxy.Proxy{}, ended: make(chan struct{}, 1)}
}

// rule refuses while an outage of target is under way.
func (o *outages) rule(target string) faultproxy.Rule {
	return func(*http.Request) faultproxy.Mode {
		if slices.Contains(o.downAt(o.clock.Now()), target) {
			return faultproxy.Refuse
		}
		return faultproxy.Pass
	}
}

// nextEnd returns the earliest end, after now, of an outage under way.
func (o *outages) nextEnd(now time.Time) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var next time.Time
	for _, x := range o.list {
		if x.end.After(now) && (next.IsZero() || x.end.Before(next)) {
			next = x.end
		}
	}
	return next, !next.IsZero()
}

// downAt returns the targets down at now, sorted, each once.
func (o *outages) downAt(now time.Time) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, x := range o.list {
		if !now.Before(x.start) && now.Before(x.end) && !slices.Contains(out, x.target) {
			out = append(out, x.target)
		}
	}
	slices.Sort(out)
	return out
}

func (o *outages) anyUnended() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.ContainsFunc(o.list, func(x *outage) bool { return !x.ended })
}

func (o *outages) close() {
	for _, p := range o.proxies {
		_ = p.Close()
	}
}

// startProxies starts a fault proxy in front of each target and returns the
// settings that point the handler processes at them.
func (h *Host) startProxies(storeConn, brokerURL string) (map[string]string, error) {
	set := map[string]string{}
	for _, target := range h.opts.OutageTargets {
		if _, done := h.outages.proxies[target]; done {
			continue
		}
		upstream := brokerURL // OutageServiceBus; New checked the targets
		if target == OutageTable {
			u, err := tableEndpoint(storeConn)
			if err != nil {
				return nil, fmt.Errorf("devhost: outage table: %w", err)
			}
			upstream = u.Scheme + "://" + u.Host
		}
		// Between outages the proxy is a plain path.
		p, err := faultproxy.StartWith(upstream, &faultproxy.Options{FollowClient: true})
		if err != nil {
			return nil, fmt.Errorf("devhost: outage %s: %w", target, err)
		}
		p.SetRule(h.outages.rule(target))
		h.outages.proxies[target] = p
		if target == OutageTable {
			set[SettingStoreConnection] = replaceTableEndpoint(storeConn, p.Addr)
		} else {
			set[SettingDevBrokerURL] = p.URL()
		}
	}
	return set, nil
}

// tableEndpoint returns a connection string's TableEndpoint, if Azurite on loopback.
func tableEndpoint(conn string) (*url.URL, error) {
	for _, part := range strings.Split(conn, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "TableEndpoint") {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the store's TableEndpoint: %w", err)
		}
		if ip := net.ParseIP(u.Hostname()); u.Scheme != "http" || (u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return nil, fmt.Errorf("the store's TableEndpoint %s is not Azurite on loopback (http://127.0.0.1:port)", u.Redacted())
		}
		return u, nil
	}
	return nil, fmt.Errorf("the store is not named by a connection string with a TableEndpoint (%s, as for Azurite)", SettingStoreConnection)
}

// replaceTableEndpoint returns conn with its TableEndpoint's host:port set to addr.
func replaceTableEndpoint(conn, addr string) string {
	parts := strings.Split(conn, ";")
	for i, part := range parts {
		k, v, ok := strings.Cut(part, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "TableEndpoint") {
			if u, err := url.Parse(strings.TrimSpace(v)); err == nil {
				u.Host = addr
				parts[i] = k + "=" + u.String()
			}
		}
	}
	return strings.Join(parts, ";")
}

// outageCounts reads the counters an outage's summary is made of.
func (h *Host) outageCounts(target string) outageCounts {
	var c outageCounts
	c.rescheduled, c.parked, _ = h.rec.counts("")
	if p := h.outages.proxies[target]; p != nil {
		c.refused = int(p.Count(faultproxy.Refuse))
	}
	for _, q := range h.triggered {
		c.deadLettered += h.broker.Totals(q).DeadLettered
	}
	return c
}

// StartOutage makes target (in Options.OutageTargets) unreachable from the
// handler processes for d on the host's clock: every request they make to it
// is refused (faultproxy.Refuse). WaitIdle waits for its end.
func (h *Host) StartOutage(target string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("devhost: outage %s for %s: want a duration above 0", target, d)
	}
	if _, ok := h.outages.proxies[target]; !ok {
		return fmt.Errorf("devhost: outage %s: the host was not started with it in OutageTargets", target)
	}
	now := h.clock.Now()
	x := &outage{target: target, start: now, end: now.Add(d), from: h.outageCounts(target)}
	h.playMu.Lock()
	if !h.playStart.IsZero() {
		x.after = now.Sub(h.playStart)
	}
	h.playMu.Unlock()
	h.outages.mu.Lock()
	h.outages.list = append(h.outages.list, x)
	h.outages.mu.Unlock()
	go h.endOutage(x)
	return nil
}

// endOutage records x's end once the host's clock reaches it.
func (h *Host) endOutage(x *outage) {
	t := h.clock.NewTimer(x.end.Sub(h.clock.Now()))
	defer t.Stop()
	select {
	case <-t.C():
	case <-h.acceptCtx.Done():
		return
	}
	to := h.outageCounts(x.target)
	h.outages.mu.Lock()
	x.to, x.ended = to, true
	h.outages.mu.Unlock()
	select {
	case h.outages.ended <- struct{}{}:
	default:
	}
}

// Outages returns every outage so far, in start order, with what each cost.
func (h *Host) Outages() []OutageSummary {
	h.outages.mu.Lock()
	list := slices.Clone(h.outages.list)
	h.outages.mu.Unlock()
	out := []OutageSummary{}
	for _, x := range list {
		h.outages.mu.Lock()
		to, ended := x.to, x.ended
		h.outages.mu.Unlock()
		if !ended {
			to = h.outageCounts(x.target)
		}
		out = append(out, OutageSummary{
			Target: x.target, After: wording.Duration(x.after), Duration: wording.Duration(x.end.Sub(x.start)), Ended: ended,
			Refused: to.refused - x.from.refused, Rescheduled: to.rescheduled - x.from.rescheduled,
			DeadLettered: to.deadLettered - x.from.deadLettered, Parked: to.parked - x.from.parked,
			Start: x.start, End: x.end,
		})
	}
	return out
}

// OutageTargets returns the targets of lines' outage lines, sorted, each once.
func OutageTargets(lines []ScenarioLine) []string {
	var out []string
	for _, l := range lines {
		if l.Outage != "" {
			out = append(out, l.Outage)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
