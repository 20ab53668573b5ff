//go:build !race

// The race detector makes sync.Pool drop items at random, so this test
// runs without it (go test without -race; BenchmarkSettledLine reports
// the same figure).

package logging

import (
	"io"
	"log/slog"
	"testing"
)

// TestSettledLineAllocatesNothing: once its buffer is pooled, a settled
// line on New's logger allocates nothing.
func TestSettledLineAllocatesNothing(t *testing.T) {
	log := New(io.Discard, io.Discard, slog.LevelInfo).With(KeyInstanceID, "instance-1")
	if n := testing.AllocsPerRun(1000, func() { settledLine(Begin(log, slog.LevelInfo, "message settled")) }); n != 0 {
		t.Errorf("a settled line allocates %.1f times, want 0", n)
	}
}
