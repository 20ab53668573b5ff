// Package freeport picks a TCP port on 127.0.0.1 for a process that is yet
// to listen on it, as the Functions host picks FUNCTIONS_CUSTOMHANDLER_PORT.
//
// Pick chooses below the kernel's ephemeral range (ip_local_port_range),
// where outbound connections never take the port between the pick and the
// child's bind. Another program may still bind it: a caller whose process
// failed before answering checks Taken and picks again.
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

// lowest is the lowest port Pick chooses, above the well-known ports.
const lowest = 1024

// tries bounds the random choices before Pick falls back to port 0.
const tries = 32

// rangeFile holds the kernel's ephemeral range on Linux.
var rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Pick returns a port on 127.0.0.1 that was free a moment ago, below the
// ephemeral range when known and roomy; otherwise the kernel's choice.
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

// Taken reports whether another socket holds port on 127.0.0.1 now.
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

// below returns the ports [lo, hi) under the ephemeral range; ok false if unknown or too low.
func below() (lo, hi int, ok bool) {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, 0, false
	}
	return parseBelow(string(b))
}

// parseBelow reads the range file's "first last" and returns Pick's ports under first.
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
