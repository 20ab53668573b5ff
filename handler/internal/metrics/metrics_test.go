package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/internal/metrics"
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
			metrics.NewWithOptions(reg, "v1.2.3", tt.opts)
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
