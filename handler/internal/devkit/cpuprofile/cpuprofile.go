// Package cpuprofile writes a process's CPU profile when a setting asks for
// one, to profile the handlers the development host starts (make bench -profile-dir).
package cpuprofile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Env names a file prefix: when set, a handler writes its CPU profile to
// <prefix>.<pid>.pprof until it exits. Unset (in Azure), nothing is profiled.
const Env = "ORDERSTATUS_CPU_PROFILE"

// Start starts the CPU profile prefix asks for, if any, and returns the
// function that stops it and closes its file (a no-op for an empty prefix).
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
