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

// The limit through the host: the dev host, its broker and host.json's
// settings exactly as in the runs of ours, with bin/handler replaced by
// floorhandler (package floorhandler), which does only the storage floor's
// work per invocation. ours_vs_limit_through_host is then what our
// handler costs over the least any custom handler can do behind the same
// host; ours_vs_limit also counts the host itself.

// floorPackage is the minimal handler's package, relative to Root.
const floorPackage = "./handler/internal/devkit/bench/floorhandler"

// floorBinary builds floorhandler once per run (CGO off, as bin/handler)
// into a temporary directory removed by Run.
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
// ratios of ours on today's policy (the same work, sameWork) over the
// limit through the host run back to back with it; spreads gets the
// lowest and highest pair's ratio. A pair's two runs meet the same load
// from elsewhere on the machine, so their ratio moves less than either's
// messages per second, which ranged from 1,333 to 1,921 within one
// seven-round run of today's policy (docs/performance.md). For the local
// runs it also sets the CPU per message of the minimal handler and of the
// dev host and Azurite serving it (to set beside cpu_ms_per_msg_*_before,
// ours on the same work).
//
// Each round runs ours, the limit, the limit again and ours (Run), so the
// samples alternate: pair 2k has ours first, pair 2k+1 the limit first.
// The order matters: a run's place in its pair moves its speed. Of the
// 57 local rounds in docs/performance.md's runs from 2026-12-01 21:00 to
// 12-02 05:29 UTC (one pair each, the order alternating from round to
// round), those with ours first had a median of 0.985 and those with the
// minimal handler first 0.92; a six-round run at 09:20 had it the other
// way round (0.93 and 1.01). So the figure is crossoverRatio's: each
// order's median, combined so that an effect of place cancels.
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
// pairs' ratios rs, ours run first in the even pairs (rs[0], rs[2], ...)
// and second in the odd ones: first and second are the medians of the two
// groups, and est their geometric mean. If a run's place in its pair
// scales its speed by some factor p, every even pair's ratio carries p
// (or 1/p) and every odd pair's the inverse, and est = sqrt(first *
// second) is free of it: the estimate of an AB/BA crossover. With a
// single pair, est = first and second = 0.
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
