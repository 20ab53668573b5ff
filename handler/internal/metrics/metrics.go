// Package metrics defines the handler's Prometheus instruments on an injected
// registry. Labels are low-cardinality by contract: never an order or message
// id, and a value from outside only through a known set (Reason).
package metrics

import (
	"runtime/debug"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/circuit"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Metrics holds every instrument. Create it once with New and share it.
type Metrics struct {
	Messages        *prometheus.CounterVec   // subject, result
	Duration        *prometheus.HistogramVec // subject
	DeliveryCount   prometheus.Histogram
	StoreRoundTrips *prometheus.CounterVec // operation, outcome
	// MessageRoundTrips sums each settled message's store round trips, by subject and result.
	MessageRoundTrips *prometheus.CounterVec // subject, result
	StoreLatency      *prometheus.HistogramVec
	ETagConflicts     prometheus.Counter
	CacheHits         prometheus.Counter
	SequenceGaps      prometheus.Counter
	SkippedSequence   prometheus.Counter
	// Parked counts messages parked on the poison queue, by reason (use CountParked).
	Parked  *prometheus.CounterVec // reason
	Retries *prometheus.CounterVec // operation
	// Rescheduled counts messages scheduled again as a copy instead of answered 5xx, by reason.
	Rescheduled *prometheus.CounterVec // reason
	// CircuitState is the store breaker's state as a state set (use SetCircuitState).
	CircuitState *prometheus.GaugeVec // state
	// CircuitChanges counts the breaker's state changes, by the state entered.
	CircuitChanges *prometheus.CounterVec // state
	// TimeoutChecks counts the handler's own PaymentTimeoutChecks, by outcome.
	TimeoutChecks *prometheus.CounterVec // outcome
	// Lag is the read model's freshness, by kind (LagEnqueuedToSettled, LagOccurredToApplied).
	Lag       *prometheus.HistogramVec // kind
	BuildInfo *prometheus.GaugeVec
}

// The kinds of orderstatus_lag_seconds.
const (
	LagEnqueuedToSettled = "enqueued_to_settled"
	LagOccurredToApplied = "occurred_to_applied"
)

// LagBuckets are orderstatus_lag_seconds' bounds: a warm second, a cold start (~2 min), hours.
var LagBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600}

// Options tune NewWithOptions. The zero value (or nil) is usable.
type Options struct {
	// Revision is build_info's revision (main.revision); empty means vcs.revision, else "unknown".
	Revision string
}

// New registers the instruments and the Go and process collectors on reg; sets build_info.
func New(reg prometheus.Registerer, version string, opts *Options) *Metrics {
	if opts == nil {
		opts = &Options{}
	}
	m := &Metrics{
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_messages_total",
			Help: "Messages handled, by subject and result (Applied, Duplicate, Stale, Parked, Failed).",
		}, []string{"subject", "result"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "orderstatus_handler_duration_seconds",
			Help: "Time from request to answer for OrderStatus invocations; compare with the 60 s lock duration.",
			// Up to the lock duration, so the tail next to a lost lock is visible.
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60},
		}, []string{"subject"}),
		DeliveryCount: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orderstatus_delivery_count",
			Help:    "DeliveryCount of received messages; above 1 means redelivery.",
			Buckets: []float64{1, 2, 3, 4, 5},
		}),
		StoreRoundTrips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_store_round_trips_total",
			Help: "Table Storage calls, by operation (get, insert, replace) and outcome (ok, conflict, not_found, transient, error).",
		}, []string{"operation", "outcome"}),
		MessageRoundTrips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_message_round_trips_total",
			Help: "Table Storage calls spent on messages (all attempts of one call), by subject and the result the message settled as; divide by orderstatus_messages_total.",
		}, []string{"subject", "result"}),
		StoreLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orderstatus_store_request_duration_seconds",
			Help:    "Table Storage call latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 12),
		}, []string{"operation"}),
		ETagConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderstatus_etag_conflicts_total",
			Help: "Conditional writes that lost (409 on insert, 412 on replace) and were decided again.",
		}),
		CacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderstatus_cache_hits_total",
			Help: "Messages decided from the per-process cache with no storage read.",
		}),
		SequenceGaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderstatus_sequence_gaps_total",
			Help: "Applied updates whose sequence jumped by more than one.",
		}),
		SkippedSequence: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderstatus_sequence_numbers_skipped_total",
			Help: "Sequence numbers skipped over by gaps.",
		}),
		Parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_parked_total",
			Help: "Messages copied to the poison queue, by reason (the handler's own reasons; any other is \"other\").",
		}, []string{"reason"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_retries_total",
			Help: "In-call retries after transient failures, by operation (apply, park).",
		}, []string{"operation"}),
		Rescheduled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_rescheduled_total",
			Help: "Messages scheduled again as a copy (backoff) instead of answered 5xx, by reason (transient, circuit_open, order_not_found).",
		}, []string{"reason"}),
		CircuitState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderstatus_circuit_state",
			Help: "State of this instance's order-store circuit breaker, one series per state (closed, open, half-open: one probe under way): 1 for the current state, 0 for the others.",
		}, []string{"state"}),
		CircuitChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_circuit_changes_total",
			Help: "State changes of the order-store circuit breaker, by the state entered (closed, open, half-open).",
		}, []string{"state"}),
		TimeoutChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderstatus_timeout_checks_total",
			Help: "PaymentTimeoutChecks the handler scheduled itself on applying a Created, by outcome (scheduled, failed): the extra Service Bus operations per order.",
		}, []string{"outcome"}),
		Lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orderstatus_lag_seconds",
			Help:    "How old the read model is, per settled message: kind enqueued_to_settled (EnqueuedTimeUtc to the 200 answer, whole seconds from the host) and occurred_to_applied (occurredAt to the write, applied updates that carry it).",
			Buckets: LagBuckets,
		}, []string{"kind"}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderstatus_build_info",
			Help: "Always 1; labels carry the version, Go version and VCS revision.",
		}, []string{"version", "goversion", "revision"}),
	}
	reg.MustRegister(m.Messages, m.Duration, m.DeliveryCount, m.StoreRoundTrips, m.MessageRoundTrips, m.StoreLatency,
		m.ETagConflicts, m.CacheHits, m.SequenceGaps, m.SkippedSequence, m.Parked, m.Retries,
		m.Rescheduled, m.CircuitState, m.CircuitChanges, m.TimeoutChecks, m.Lag, m.BuildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	goVersion, revision := "unknown", opts.Revision
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && revision == "" {
				revision = s.Value
			}
		}
	}
	if revision == "" {
		revision = "unknown"
	}
	m.BuildInfo.WithLabelValues(version, goVersion, revision).Set(1)
	m.SetCircuitState(circuit.Closed) // a breaker starts closed; without one the store is never refused
	return m
}

// SetCircuitState sets s's series to 1 and the others to 0 (prometheus/OpenMetrics
// specification/OpenMetrics.md, "StateSet": "ENUMs MUST have exactly one Boolean which is true").
func (m *Metrics) SetCircuitState(s circuit.State) {
	for _, st := range circuit.States {
		v := 0.0
		if st == s {
			v = 1
		}
		m.CircuitState.WithLabelValues(st.String()).Set(v)
	}
}

// ReasonOther is the reason label of every reason not in KnownReasons.
const ReasonOther = "other"

// KnownReasons are order.Reasons and the two Service Bus reasons the sweeper acts on.
var KnownReasons = append(slices.Clone(order.Reasons), broker.ReasonMaxDeliveryCountExceeded, broker.ReasonTTLExpired)

// Reason is reason if in KnownReasons, else ReasonOther, to bound the series (Prometheus
// documentation, "Metric and label naming", prometheus/docs content/docs/practices/naming.md, Labels).
func Reason(reason string) string {
	if slices.Contains(KnownReasons, reason) {
		return reason
	}
	return ReasonOther
}

// CountParked counts one message parked with reason (through Reason).
func (m *Metrics) CountParked(reason string) {
	m.Parked.WithLabelValues(Reason(reason)).Inc()
}

// ObserveStore records one storage round trip (the store adapters' observer hook).
func (m *Metrics) ObserveStore(operation, outcome string, d time.Duration) {
	m.StoreRoundTrips.WithLabelValues(operation, outcome).Inc()
	m.StoreLatency.WithLabelValues(operation).Observe(d.Seconds())
}
