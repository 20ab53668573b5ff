package azurite

import "syscall"

// sysProcAttr puts Azurite in its own process group and has the kernel
// kill it when its owner dies, even by SIGKILL (start locks its thread).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
