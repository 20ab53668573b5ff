//go:build !linux

package azurite

import "syscall"

// sysProcAttr puts Azurite in its own process group (a Ctrl-C reaches only
// its owner, which stops it in order). Only Linux has a parent-death
// signal: elsewhere Azurite outlives an owner killed by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
