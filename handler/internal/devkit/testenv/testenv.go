// Package testenv gives tests the real services they run against and the
// built handler binary. With CI set or ORDERSTATUS_REQUIRE_AZURITE=1 (as
// `make test` sets it) a test that needs Azurite fails instead of skipping.
package testenv

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
)

var (
	mu     sync.Mutex
	shared *azurite.Server
)

func required() bool {
	return os.Getenv("CI") != "" || os.Getenv("ORDERSTATUS_REQUIRE_AZURITE") == "1"
}

// Azurite returns a connection string for an Azurite Table service shared by
// the tests of the binary, started on first use; use distinct table names.
// Without Azurite the test is skipped, or fails when Azurite is required.
func Azurite(t testing.TB) string {
	t.Helper()
	if cs := os.Getenv("ORDERSTATUS_TEST_AZURITE"); cs != "" {
		return cs
	}
	mu.Lock()
	defer mu.Unlock()
	if shared == nil {
		shared = start(t)
	}
	return shared.ConnectionString()
}

// StartAzurite starts a private Azurite for one test and stops it at cleanup.
func StartAzurite(t testing.TB) *azurite.Server {
	t.Helper()
	s := start(t)
	t.Cleanup(s.Stop)
	return s
}

// start starts an Azurite, or skips or fails t without one.
func start(t testing.TB) *azurite.Server {
	t.Helper()
	s, err := azurite.Start(context.Background(), azurite.Options{})
	if err != nil {
		if required() {
			t.Fatalf("Azurite is required here but could not start: %v", err)
		}
		t.Skipf("Azurite not available (%v); run 'make test' to include it", err)
	}
	return s
}

// Handler returns the absolute path of the built bin/orderstatus-dev, given
// the repository root relative to the test's package; without it the test
// is skipped, or fails when the real services are required.
func Handler(t testing.TB, repoRoot string) string { return Binary(t, repoRoot, "orderstatus-dev") }

// Tools is Handler for bin/orderstatus, the operators' tool.
func Tools(t testing.TB, repoRoot string) string { return Binary(t, repoRoot, "orderstatus") }

// Binary is Handler for bin/<name>.
func Binary(t testing.TB, repoRoot, name string) string {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "bin", name)
	if _, err := os.Stat(path); err != nil {
		if required() {
			t.Fatalf("bin/%s is required here: %v (make test builds it)", name, err)
		}
		t.Skipf("bin/%s not built (%v); 'make test' builds it", name, err)
	}
	return path
}

// Main runs m and stops the shared Azurite afterwards; call it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	if shared != nil {
		shared.Stop()
	}
	mu.Unlock()
	return code
}
