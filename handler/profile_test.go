package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestStartCPUProfile: unset writes nothing; a prefix gets one profile
// file per process; a prefix in a missing directory fails start-up.
func TestStartCPUProfile(t *testing.T) {
	stop, err := startCPUProfile("")
	if err != nil {
		t.Fatalf("startCPUProfile(\"\") = %v, want no error", err)
	}
	stop()

	prefix := filepath.Join(t.TempDir(), "handler")
	stop, err = startCPUProfile(prefix)
	if err != nil {
		t.Fatalf("startCPUProfile(%q) = %v", prefix, err)
	}
	stop()
	path := prefix + "." + strconv.Itoa(os.Getpid()) + ".pprof"
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("profile %s: %v (size %d), want a non-empty file", path, err, sizeOf(fi))
	}

	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "handler")); err == nil {
		t.Error("startCPUProfile in a missing directory = nil error, want one")
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}
