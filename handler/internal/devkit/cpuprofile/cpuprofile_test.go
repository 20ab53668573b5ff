package cpuprofile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStart: an empty prefix profiles nothing; a prefix writes
// <prefix>.<pid>.pprof, a profile pprof can read, once stopped; a prefix
// in a missing directory is an error naming the setting.
func TestStart(t *testing.T) {
	stop, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	stop()

	prefix := filepath.Join(t.TempDir(), "handler")
	stop, err = Start(prefix)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1e6; i++ {
		_ = fmt.Sprint(i)
	}
	stop()
	b, err := os.ReadFile(fmt.Sprintf("%s.%d.pprof", prefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	// A CPU profile is gzip-compressed protobuf.
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("not a gzip profile: % x", b[:min(len(b), 8)])
	}

	if _, err := Start(filepath.Join(t.TempDir(), "missing", "handler")); err == nil {
		t.Fatal("a prefix in a missing directory: no error")
	} else if want := Env; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}
