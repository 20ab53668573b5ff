package azurite

import "syscall"

// sysProcAttr puts Azurite in its own process group (a Ctrl-C reaches only
// its owner, which stops it in order) and has the kernel kill it when its
// owner dies, even by SIGKILL. The signal fires when the thread that
// started the process exits, so start must run on a locked thread.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
