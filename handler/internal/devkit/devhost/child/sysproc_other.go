//go:build !linux

package child

import "syscall"

// sysProcAttr puts the handler in its own process group (a Ctrl-C in the
// terminal reaches only the development host, which stops the handler in
// order). Only Linux has a parent-death signal: elsewhere the handler
// outlives a development host killed by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
