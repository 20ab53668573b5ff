package orderfn

import (
	"context"
	"log/slog"

	"github.com/orderstatus/orderstatus/handler/internal/circuit"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
)

// NewBreaker returns the store's breaker, its state changes logged, counted
// (orderstatus_circuit_state, orderstatus_circuit_changes_total), passed to o.OnChange.
func NewBreaker(m *metrics.Metrics, log *slog.Logger, o circuit.Options) *circuit.Breaker {
	next := o.OnChange
	o.OnChange = func(from, to circuit.State) {
		m.SetCircuitState(to)
		m.CircuitChanges.WithLabelValues(to.String()).Inc()
		level, text := slog.LevelInfo, "circuit breaker "+to.String()
		switch {
		case to == circuit.Open && from == circuit.Closed:
			level, text = slog.LevelWarn, "circuit breaker open: the order store keeps failing; messages are rescheduled without calling it, one probe at a time"
		case to == circuit.Closed:
			text = "circuit breaker closed: the order store answers again"
		}
		log.Log(context.Background(), level, text, "circuit_from", from.String(), "circuit_to", to.String())
		if next != nil {
			next(from, to)
		}
	}
	return circuit.New(o)
}
