package deadletter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/internal/metrics"
)

// Metrics are the sweeper's instruments (reasons bounded by metrics.Reason); nil records nothing.
type Metrics struct {
	Depth     *prometheus.GaugeVec   // source, reason
	OldestAge *prometheus.GaugeVec   // source, reason
	Actions   *prometheus.CounterVec // action, reason
	Purged    prometheus.Counter
}

// NewMetrics registers the instruments on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderstatus_deadletter_depth",
			Help: "Dead letters not yet closed (open, left, replay-due in the store, or still in Service Bus) by source (dlq, poison, poison-dlq) and reason, at the last sweep.",
		}, []string{"source", "reason"}),
		OldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderstatus_deadletter_oldest_age_seconds",
			Help: "Age of the oldest dead letter not yet closed (since it reached the store) by source and reason, at the last sweep.",
		}, []string{"source", "reason"}),
		Actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_deadletter_actions_total",
			Help: "Dead-letter actions taken (stored, replayed, archived, discarded, left, resubmitted, restored) by reason.",
		}, []string{"action", "reason"}),
		Purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderstatus_deadletter_purged_total",
			Help: "Closed dead-letter entries removed by the retention (DEAD_LETTER_RETENTION).",
		}),
	}
	reg.MustRegister(m.Depth, m.OldestAge, m.Actions, m.Purged)
	return m
}

func (m *Metrics) action(a Action, reason string) {
	if m != nil {
		m.Actions.WithLabelValues(string(a), metrics.Reason(reason)).Inc()
	}
}

func (m *Metrics) stats(st []Stat) {
	if m == nil {
		return
	}
	type key struct{ source, reason string }
	depth := map[key]int{}
	oldest := map[key]int64{}
	for _, s := range st {
		k := key{string(s.Source), metrics.Reason(s.Reason)}
		depth[k] += s.Depth
		oldest[k] = max(oldest[k], s.OldestAgeSeconds)
	}
	m.Depth.Reset()
	m.OldestAge.Reset()
	for k, n := range depth {
		m.Depth.WithLabelValues(k.source, k.reason).Set(float64(n))
		m.OldestAge.WithLabelValues(k.source, k.reason).Set(float64(oldest[k]))
	}
}

func (m *Metrics) purged(n int) {
	if m != nil {
		m.Purged.Add(float64(n))
	}
}
