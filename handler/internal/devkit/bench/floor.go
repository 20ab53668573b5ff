package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// The limit through the host: the dev host exactly as in the runs of ours,
// with bin/handler replaced by floorhandler, which does only the storage
// floor's work; ours_vs_limit_through_host is what our handler costs over it.

// floorPackage is the minimal handler's package, relative to Root.
const floorPackage = "./handler/internal/devkit/bench/floorhandler"

// floorBinary builds floorhandler once per run (CGO off) into a temporary
// directory removed by Run.
func (b *runner) floorBinary(ctx context.Context) (string, error) {
	if b.floorBin != "" {
		return b.floorBin, nil
	}
	dir, err := os.MkdirTemp("", "orderstatus-floor-")
	if err != nil {
		return "", err
	}
	b.cleanup = append(b.cleanup, func() { os.RemoveAll(dir) })
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "floorhandler")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", bin, floorPackage)
	cmd.Dir = b.opts.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: building %s: %w\n%s", floorPackage, err, out)
	}
	b.floorBin = bin
	return bin, nil
}

// limitThroughHost runs the workload through the dev host with the
// minimal handler; the store is cs (Azurite, or the proxy with latency).
func (b *runner) limitThroughHost(ctx context.Context, cs, prefix string) error {
	bin, err := b.floorBinary(ctx)
	if err != nil {
		return err
	}
	c := oursConfig{store: cs, table: b.table(prefix + "floor"), sessions: b.opts.InFlight, timeScale: b.opts.TimeScale, handler: bin}
	if b.opts.ProfileDir != "" && prefix == "" && len(b.floorLocal) == 0 {
		c.handlerProfile = filepath.Join(b.opts.ProfileDir, "floorhandler")
	}
	r, err := b.runOurs(ctx, c, b.w)
	if err != nil {
		return err
	}
	name := prefix + "limit_through_host_msgs_per_s"
	b.samples[name] = append(b.samples[name], float64(b.w.Messages())/r.Elapsed.Seconds())
	if prefix == "" {
		b.floorLocal = append(b.floorLocal, r)
	}
	return nil
}

// floorRatios sets ours_vs_limit_through_host for prefix from the pairs'
// ratios of ours on today's policy over the limit run back to back with it
// (crossoverRatio; docs/performance.md); spreads gets the lowest and
// highest. For the local runs it also sets the minimal handler's CPU figures.
func (b *runner) floorRatios(prefix string, spreads map[string][2]float64) {
	ours, floor := b.samples[b.sameWorkName(prefix)], b.samples[prefix+"limit_through_host_msgs_per_s"]
	if n := min(len(ours), len(floor)); n > 0 {
		rs := make([]float64, n)
		for i := range n {
			rs[i] = ours[i] / floor[i]
		}
		name := prefix + "ours_vs_limit_through_host"
		est, first, second := crossoverRatio(rs)
		b.results[name] = est
		spreads[name] = [2]float64{slices.Min(rs), slices.Max(rs)}
		var each []string
		for _, r := range rs {
			each = append(each, fmt.Sprintf("%.2f", r))
		}
		b.notes = append(b.notes, fmt.Sprintf("%s by pair (ours on today's policy over the limit through the host, run back to back, ours first in pairs 1, 3, ...; two pairs a round): %s",
			name, strings.Join(each, ", ")))
		if second > 0 {
			b.notes = append(b.notes, fmt.Sprintf("%s by order: %.3f with ours first (median of %d pairs), %.3f with the minimal handler first (median of %d), %.3f combined (their geometric mean)",
				name, first, (n+1)/2, second, n/2, est))
		}
	}
	if prefix != "" || len(b.floorLocal) == 0 {
		return
	}
	cpu := b.cpuPerMessage(b.floorLocal)
	b.results["cpu_ms_per_msg_floorhandler"] = cpu["handler"]
	b.results["cpu_ms_per_msg_devhost_floor"] = cpu["devhost"]
	b.results["cpu_ms_per_msg_azurite_floor"] = cpu["azurite"]
}

// crossoverRatio estimates ours over the limit through the host from the
// pairs' ratios rs, ours first in the even pairs: first and second are the
// two groups' medians, est their geometric mean, free of a position effect
// (an AB/BA crossover). With a single pair, est = first and second = 0.
func crossoverRatio(rs []float64) (est, first, second float64) {
	var a, c []float64
	for i, r := range rs {
		if i%2 == 0 {
			a = append(a, r)
		} else {
			c = append(c, r)
		}
	}
	if len(a) == 0 {
		return 0, 0, 0
	}
	first = median(a)
	if len(c) == 0 {
		return first, first, 0
	}
	second = median(c)
	return math.Sqrt(first * second), first, second
}
