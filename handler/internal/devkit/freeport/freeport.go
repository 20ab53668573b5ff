// Package freeport picks a TCP port on 127.0.0.1 for a process that is yet
// to listen on it, as the Functions host picks the port it passes a custom
// handler in FUNCTIONS_CUSTOMHANDLER_PORT.
//
// A port picked that way is free only until someone else binds it, and the
// usual pick (bind port 0, read the port, close) returns a port in the
// kernel's ephemeral range, the same range connect(2) takes the local port
// of every outbound connection from (net.ipv4.ip_local_port_range on
// Linux). On a machine making many connections (the simulation runs
// several development hosts at once, each with handlers, a broker and
// Azurite talking over loopback), one of them can take the port between
// the pick and the child's bind, and the child fails with "address already
// in use". So Pick chooses below the ephemeral range, where the kernel
// never binds on its own, and checks the port with a bind of its own. Two
// pickers can still choose the same port at the same moment, and another
// program may bind there: a caller that starts a process on the port
// checks, when the process failed before answering, whether the port is
// now held by someone else (Taken) and picks again.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// span is how many ports below the ephemeral range Pick chooses from.
const span = 16384

// lowest is the lowest port Pick chooses: below it are the registered
// ports of well-known services.
const lowest = 1024

// tries bounds the random choices before Pick falls back to port 0.
const tries = 32

// rangeFile holds the kernel's ephemeral range on Linux.
var rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Pick returns a port on 127.0.0.1 that was free a moment ago, outside the
// kernel's ephemeral range when that range is known and leaves room below
// it; otherwise the kernel's choice (port 0).
func Pick() (int, error) {
	if lo, hi, ok := below(); ok {
		for range tries {
			port := lo + rand.IntN(hi-lo)
			if free(port) {
				return port, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("freeport: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Taken reports whether another socket holds port on 127.0.0.1 now: a
// bind of it fails with "address already in use".
func Taken(port int) bool { return errors.Is(bind(port), syscall.EADDRINUSE) }

func free(port int) bool { return bind(port) == nil }

// bind binds port on 127.0.0.1 and lets it go at once.
func bind(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// below returns the ports [lo, hi) under the ephemeral range, ok false
// when the range is unknown or starts too low to leave room.
func below() (lo, hi int, ok bool) {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, 0, false
	}
	return parseBelow(string(b))
}

// parseBelow reads the range file's "first last" and returns the ports
// under first that Pick may choose.
func parseBelow(s string) (lo, hi int, ok bool) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, false
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first <= lowest+1024 || first > 65535 {
		return 0, 0, false
	}
	return max(lowest, first-span), first, true
}
