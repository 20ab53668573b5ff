package deadletters

import (
	"os"
	"syscall"
)

// isatty reports whether f is a console: only a console has a console
// mode (NUL, a pipe or a file has none).
func isatty(f *os.File) bool {
	var mode uint32
	return syscall.GetConsoleMode(syscall.Handle(f.Fd()), &mode) == nil
}
