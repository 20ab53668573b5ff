// Package cpuprofile writes a process's CPU profile when a setting asks for
// one: the bench's way of profiling the handlers the development host
// starts (make bench -profile-dir), which it cannot reach in-process.
package cpuprofile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Env names a file prefix: when set, a handler writes its CPU profile to
// <prefix>.<pid>.pprof until it exits (one file per process, as the
// development host may start several). Unset, the default and in Azure,
// nothing is profiled; the profile is never served over HTTP.
const Env = "ORDERSTATUS_CPU_PROFILE"

// Start starts the CPU profile prefix asks for (Env's value), if any, and
// returns the function that stops it and closes its file. An empty prefix
// profiles nothing; stop is then a no-op.
func Start(prefix string) (stop func(), err error) {
	if prefix == "" {
		return func() {}, nil
	}
	path := fmt.Sprintf("%s.%d.pprof", prefix, os.Getpid())
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Env, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %s: %w", Env, path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
