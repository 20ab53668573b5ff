package metrics_test

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/circuit"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// buildInfoLabels returns the labels of the one orderstatus_build_info
// series gathered from reg.
func buildInfoLabels(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "orderstatus_build_info" {
			continue
		}
		if n := len(f.GetMetric()); n != 1 {
			t.Fatalf("orderstatus_build_info has %d series, want 1", n)
		}
		m := f.GetMetric()[0]
		if got := m.GetGauge().GetValue(); got != 1 {
			t.Errorf("orderstatus_build_info = %v, want 1", got)
		}
		labels := map[string]string{}
		for _, p := range m.GetLabel() {
			labels[p.GetName()] = p.GetValue()
		}
		return labels
	}
	t.Fatal("orderstatus_build_info not gathered")
	return nil
}

func TestBuildInfoCarriesVersionAndRevision(t *testing.T) {
	tests := []struct {
		name         string
		opts         *metrics.Options
		wantRevision string // "" means: not empty, whatever the toolchain stamped or "unknown"
	}{
		{"linker revision", &metrics.Options{Revision: "0123456789abcdef0123456789abcdef01234567"}, "0123456789abcdef0123456789abcdef01234567"},
		{"no revision given", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			metrics.New(reg, "v1.2.3", tt.opts)
			got := buildInfoLabels(t, reg)
			if got["version"] != "v1.2.3" {
				t.Errorf("version = %q, want v1.2.3", got["version"])
			}
			if got["goversion"] == "" || got["goversion"] == "unknown" {
				t.Errorf("goversion = %q, want the Go version", got["goversion"])
			}
			switch {
			case tt.wantRevision != "" && got["revision"] != tt.wantRevision:
				t.Errorf("revision = %q, want %q", got["revision"], tt.wantRevision)
			case got["revision"] == "":
				t.Errorf("revision is empty, want a revision or \"unknown\"")
			}
		})
	}
}

// series returns the values of family's series on reg by the value of
// label.
func series(t *testing.T, reg *prometheus.Registry, family, label string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			for _, p := range m.GetLabel() {
				if p.GetName() == label {
					got[p.GetValue()] = v
				}
			}
		}
	}
	return got
}

// TestCircuitStateIsOneSeriesPerState: orderstatus_circuit_state is a
// state set (OpenMetrics "StateSet"): one series per state, 1 for the
// current one and 0 for the others, closed from the start.
func TestCircuitStateIsOneSeriesPerState(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "v1", nil)
	tests := []struct {
		name string
		set  *circuit.State // nil: as registered
		want map[string]float64
	}{
		{"registered", nil, map[string]float64{"closed": 1, "open": 0, "half-open": 0}},
		{"open", ptr(circuit.Open), map[string]float64{"closed": 0, "open": 1, "half-open": 0}},
		{"half-open", ptr(circuit.HalfOpen), map[string]float64{"closed": 0, "open": 0, "half-open": 1}},
		{"open again", ptr(circuit.Open), map[string]float64{"closed": 0, "open": 1, "half-open": 0}},
		{"closed", ptr(circuit.Closed), map[string]float64{"closed": 1, "open": 0, "half-open": 0}},
	}
	for _, tt := range tests { // in order: each step from the one before
		if tt.set != nil {
			m.SetCircuitState(*tt.set)
		}
		if got := series(t, reg, "orderstatus_circuit_state", "state"); !maps.Equal(got, tt.want) {
			t.Errorf("%s: orderstatus_circuit_state by state = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestReasonLabelIsBounded: a reason label is one of the project's own
// reasons, else "other", whatever reason another tool dead-lettered with.
func TestReasonLabelIsBounded(t *testing.T) {
	tests := []struct {
		reason, want string
	}{
		{order.ReasonInvalidPayload, order.ReasonInvalidPayload},
		{order.ReasonUnknownSubject, order.ReasonUnknownSubject},
		{order.ReasonInvalidTransition, order.ReasonInvalidTransition},
		{order.ReasonRetryWindowExceeded, order.ReasonRetryWindowExceeded},
		{order.ReasonOrderNeverCreated, order.ReasonOrderNeverCreated},
		{broker.ReasonMaxDeliveryCountExceeded, broker.ReasonMaxDeliveryCountExceeded},
		{broker.ReasonTTLExpired, broker.ReasonTTLExpired},
		{"", metrics.ReasonOther},
		{"invalidpayload", metrics.ReasonOther},
		{"Session id is null", metrics.ReasonOther},
		{"HeaderSizeExceeded", metrics.ReasonOther},
		{"ProcessingFailed: order 4711 of tenant 9", metrics.ReasonOther},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			if got := metrics.Reason(tt.reason); got != tt.want {
				t.Errorf("Reason(%q) = %q, want %q", tt.reason, got, tt.want)
			}
		})
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "v1", nil)
	for _, r := range []string{order.ReasonInvalidPayload, "a", "b", "c"} {
		m.CountParked(r)
	}
	want := map[string]float64{order.ReasonInvalidPayload: 1, metrics.ReasonOther: 3}
	if got := series(t, reg, "orderstatus_parked_total", "reason"); !maps.Equal(got, want) {
		t.Errorf("orderstatus_parked_total by reason = %v, want %v", got, want)
	}
}
