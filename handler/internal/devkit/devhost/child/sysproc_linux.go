package child

import "syscall"

// sysProcAttr puts the handler in its own process group (a Ctrl-C in the
// terminal reaches only the development host, which stops the handler in
// order) and has the kernel kill it when the development host dies, even
// by SIGKILL. That signal fires when the thread that started the process
// exits, so the process must be started on a locked thread (supervise).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
