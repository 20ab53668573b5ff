// Command bench is `make bench` (package bench): progress on stderr, the
// figures on stdout; exit 1 when a phase fails, 2 on a bad flag.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/bench"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	opts.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A bound against a hang, well above the run's time on a loaded machine.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	start, loadBefore := time.Now(), loadAverage()
	r, err := bench.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "bench: finished in %s at %s\n", bench.Elapsed(time.Since(start)), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(stdout, "machine: %s, %d CPUs, %s; load average %s before, %s after\n",
		cpuModel(), runtime.NumCPU(), runtime.Version(), loadBefore, loadAverage())
	r.Print(stdout, opts)
	return 0
}

// parseFlags reads the command line over bench.Defaults; the error is one line.
func parseFlags(args []string) (bench.Options, error) {
	opts := bench.Defaults()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&opts.Root, "root", opts.Root, "the repository (host.json, functions/, bin/handler)")
	fs.IntVar(&opts.Orders, "orders", opts.Orders, "orders in the workload (four status changes each)")
	fs.IntVar(&opts.Repeats, "repeats", opts.Repeats, "runs of each side-by-side design (the median is reported)")
	fs.IntVar(&opts.ColdStarts, "cold-starts", opts.ColdStarts, "handler starts for the cold start percentiles")
	fs.IntVar(&opts.RSSOrders, "rss-orders", opts.RSSOrders, "distinct orders sent before rss_after_100k_orders_mb")
	fs.IntVar(&opts.SlotRounds, "slot-rounds", opts.SlotRounds, "sessions per slot in the session-slot table")
	fs.StringVar(&opts.LogLevel, "log-level", opts.LogLevel, "the handler's LOG_LEVEL")
	fs.StringVar(&opts.ProfileDir, "profile-dir", "", "write CPU profiles of the first local runs there (dev host, handler, minimal handler)")
	only := fs.String("only", "", "run only these groups of phases, comma-separated: "+strings.Join(bench.Groups, ", "))
	if err := fs.Parse(args); err != nil {
		return opts, fmt.Errorf("bench: %v (flags: -root, -orders, -repeats, -cold-starts, -rss-orders, -slot-rounds, -log-level, -profile-dir, -only)", err)
	}
	if *only != "" {
		for _, g := range strings.Split(*only, ",") {
			if g = strings.TrimSpace(g); !slices.Contains(bench.Groups, g) {
				return opts, fmt.Errorf("bench: -only %s: group %q: want some of %s", *only, g, strings.Join(bench.Groups, ", "))
			}
			opts.Only = append(opts.Only, g)
		}
	}
	if fs.NArg() > 0 || opts.Orders < 1 || opts.Repeats < 1 || opts.ColdStarts < 1 || opts.RSSOrders < 1 || opts.SlotRounds < 1 {
		return opts, fmt.Errorf("bench: -orders, -repeats, -cold-starts, -rss-orders and -slot-rounds must be at least 1, and no arguments are taken")
	}
	return opts, nil
}

// cpuModel is the first "model name" of /proc/cpuinfo ("unknown CPU" elsewhere).
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// loadAverage is the one-minute load average ("?" when unknown).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
