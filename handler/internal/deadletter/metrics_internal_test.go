package deadletter

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// A reason another tool chose must not become a series of its own: the
// sweeper's gauges and counter label it "other", the depths of all such
// reasons add up and their oldest age is the largest.
func TestMetricsBoundTheReasonLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.stats([]Stat{
		{Source: "dlq", Reason: broker.ReasonMaxDeliveryCountExceeded, Depth: 2, OldestAgeSeconds: 30},
		{Source: "dlq", Reason: "VendorToolA", Depth: 3, OldestAgeSeconds: 100},
		{Source: "dlq", Reason: "VendorToolB", Depth: 4, OldestAgeSeconds: 50},
	})
	m.action(ActionReplay, "VendorToolA")
	m.action(ActionReplay, "VendorToolB")

	if got := testutil.CollectAndCount(m.Depth); got != 2 {
		t.Errorf("depth series = %d, want 2 (the known reason and other)", got)
	}
	if got := testutil.ToFloat64(m.Depth.WithLabelValues("dlq", "other")); got != 7 {
		t.Errorf("depth{reason=other} = %v, want 7", got)
	}
	if got := testutil.ToFloat64(m.OldestAge.WithLabelValues("dlq", "other")); got != 100 {
		t.Errorf("oldest_age{reason=other} = %v, want 100", got)
	}
	if got := testutil.ToFloat64(m.Depth.WithLabelValues("dlq", broker.ReasonMaxDeliveryCountExceeded)); got != 2 {
		t.Errorf("depth{reason=MaxDeliveryCountExceeded} = %v, want 2", got)
	}
	if got := testutil.CollectAndCount(m.Actions); got != 1 {
		t.Errorf("action series = %d, want 1", got)
	}
	if got := testutil.ToFloat64(m.Actions.WithLabelValues(string(ActionReplay), "other")); got != 2 {
		t.Errorf("actions{reason=other} = %v, want 2", got)
	}
}
