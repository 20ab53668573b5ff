package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestParseBelow(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi int
		ok     bool
	}{
		{"32768\t60999\n", 16384, 32768, true},
		{"10000 65535", 1024, 10000, true},
		{"1024 65535", 0, 0, false}, // no room below
		{"2048 65535", 0, 0, false},
		{"", 0, 0, false},
		{"x 60999", 0, 0, false},
		{"32768", 0, 0, false},
		{"70000 80000", 0, 0, false},
	} {
		lo, hi, ok := parseBelow(tc.in)
		if lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("parseBelow(%q) = %d, %d, %v; want %d, %d, %v", tc.in, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
}

// TestPickIsBelowTheEphemeralRange: on Linux the port is one connect(2)
// never takes on its own, and it can be bound.
func TestPickIsBelowTheEphemeralRange(t *testing.T) {
	lo, hi, ok := below()
	if !ok {
		t.Skipf("no ephemeral range with room below it in %s", rangeFile)
	}
	for range 20 {
		port, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if port < lo || port >= hi {
			t.Fatalf("Pick = %d, want in [%d, %d)", port, lo, hi)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("bind the picked port: %v", err)
		}
		l.Close()
	}
}

// TestPickWithoutTheRange falls back to the kernel's choice.
func TestPickWithoutTheRange(t *testing.T) {
	old := rangeFile
	rangeFile = t.TempDir() + "/missing"
	t.Cleanup(func() { rangeFile = old })
	port, err := Pick()
	if err != nil || port <= 0 {
		t.Fatalf("Pick = %d, %v; want a port", port, err)
	}
}

func TestTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if !Taken(port) {
		t.Errorf("Taken(%d) = false while a listener holds it", port)
	}
	l.Close()
	if Taken(port) {
		t.Errorf("Taken(%d) = true after the listener closed", port)
	}
}
