package outbox

import (
	"errors"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names the relay registers on RelayOptions.Registerer.
const (
	// MetricRecords counts records worked, by result.
	MetricRecords = "outbox_relay_records_total"
	// MetricPassFailures counts passes that ended with an error.
	MetricPassFailures = "outbox_relay_pass_failures_total"
	// MetricOldestPending is the age in seconds of the oldest record the last
	// pass read (0: none), the alert signal of a relay down or failing.
	MetricOldestPending = "outbox_relay_oldest_pending_seconds"
	// MetricPurged counts sent records purged.
	MetricPurged = "outbox_relay_purged_total"
)

type relayMetrics struct {
	records  *prometheus.CounterVec
	failures prometheus.Counter
	oldest   prometheus.Gauge
	purged   prometheus.Counter
}

// newRelayMetrics registers the relay's collectors on reg (nil: none); relays
// sharing a registry share collectors.
func newRelayMetrics(reg prometheus.Registerer) *relayMetrics {
	m := &relayMetrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRecords,
			Help: "Outbox records the relay worked, by result (sent, scheduled, cancelled, parked)."}, []string{"result"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricPassFailures,
			Help: "Relay passes that ended with an error; their records are sent again by a later pass."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricOldestPending,
			Help: "Age in seconds of the oldest pending record the last pass read (0: none)."}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricPurged,
			Help: "Sent outbox records purged after the retention."}),
	}
	if reg == nil {
		return m
	}
	m.records = register(reg, m.records)
	m.failures = register(reg, m.failures)
	m.oldest = register(reg, m.oldest)
	m.purged = register(reg, m.purged)
	return m
}

// register registers c, or returns the one registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // a different collector under one of our names: a wiring bug
	}
	return c
}

func (m *relayMetrics) pass(res PassResult, err error, recs []Record, now time.Time) {
	m.records.WithLabelValues("sent").Add(float64(res.Sent))
	m.records.WithLabelValues("scheduled").Add(float64(res.Scheduled))
	m.records.WithLabelValues("cancelled").Add(float64(res.Cancelled))
	m.records.WithLabelValues("parked").Add(float64(res.Parked))
	if err != nil {
		m.failures.Inc()
	}
	switch {
	case len(recs) > 0:
		oldest := slices.MinFunc(recs, func(a, b Record) int { return a.CommittedAt.Compare(b.CommittedAt) })
		m.oldest.Set(max(0, now.Sub(oldest.CommittedAt).Seconds()))
	case err == nil:
		m.oldest.Set(0)
	}
}
