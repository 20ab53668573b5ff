//go:build !linux

package azurite

import "syscall"

// sysProcAttr puts Azurite in its own process group (no parent-death signal here).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
