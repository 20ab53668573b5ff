package azurite

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAnotherServerOnThePortIsNotAzurite: when another process holds the
// port Azurite was to listen on (a race between FreePort and the bind), its
// answer must not pass for Azurite's.
func TestAnotherServerOnThePortIsNotAzurite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	// A stand-in that neither serves nor exits soon, as an Azurite that
	// could not bind would only later.
	bin := filepath.Join(t.TempDir(), "azurite-table")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nsleep 5\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := start(context.Background(), bin, port, nil, 700*time.Millisecond)
	if err == nil {
		s.Stop()
		t.Fatalf("start on a port another server holds succeeded (%s)", s.Addr)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Errorf("error %q does not name the port", err)
	}
}
