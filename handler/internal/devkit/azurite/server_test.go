package azurite_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// TestServerReportsDeath kills a running Azurite and expects Done and Err
// to say so, as the development host relies on them to fail a run whose
// store died.
func TestServerReportsDeath(t *testing.T) {
	s := testenv.StartAzurite(t)
	if err := s.Err(); err != nil {
		t.Fatalf("Err of a running server = %v, want nil", err)
	}
	if err := syscall.Kill(s.PID(), syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", s.PID(), err)
	}
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Done not closed after the process was killed")
	}
	if s.Err() == nil {
		t.Error("Err after SIGKILL = nil, want the exit status")
	}
}
