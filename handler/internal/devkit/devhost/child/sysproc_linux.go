package child

import "syscall"

// sysProcAttr puts the handler in its own process group and has the kernel kill
// it when its starting thread exits (Pdeathsig; see supervise).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
