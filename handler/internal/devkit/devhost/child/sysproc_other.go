//go:build !linux

package child

import "syscall"

// sysProcAttr puts the handler in its own process group; only Linux has a
// parent-death signal.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
