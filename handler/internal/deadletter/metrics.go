package deadletter

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the sweeper's instruments. Labels are low-cardinality:
// source, reason (a dead-letter reason) and action. A nil *Metrics
// records nothing (the CLI).
type Metrics struct {
	Depth     *prometheus.GaugeVec   // source, reason
	OldestAge *prometheus.GaugeVec   // source, reason
	Actions   *prometheus.CounterVec // action, reason
}

// NewMetrics registers the instruments on reg (the handler's one
// registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderstatus_deadletter_depth",
			Help: "Messages on a dead-letter source (dlq, poison, poison-dlq) by reason, at the last sweep; deferred ones included.",
		}, []string{"source", "reason"}),
		OldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderstatus_deadletter_oldest_age_seconds",
			Help: "Age of the oldest message (since it was first enqueued) on a dead-letter source by reason, at the last sweep.",
		}, []string{"source", "reason"}),
		Actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_deadletter_actions_total",
			Help: "Dead-letter actions taken (seen, wait, replayed, archived, discarded, left, resubmitted) by reason.",
		}, []string{"action", "reason"}),
	}
	reg.MustRegister(m.Depth, m.OldestAge, m.Actions)
	return m
}

func (m *Metrics) action(a Action, reason string) {
	if m != nil {
		m.Actions.WithLabelValues(string(a), reason).Inc()
	}
}

func (m *Metrics) stats(st []Stat) {
	if m == nil {
		return
	}
	m.Depth.Reset()
	m.OldestAge.Reset()
	for _, s := range st {
		m.Depth.WithLabelValues(string(s.Source), s.Reason).Set(float64(s.Depth))
		m.OldestAge.WithLabelValues(string(s.Source), s.Reason).Set(float64(s.OldestAgeSeconds))
	}
}
