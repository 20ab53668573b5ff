//go:build !linux && !darwin && !windows

package deadletters

import "os"

// isatty cannot tell on this system: it says no, so a command that needs
// a confirmation asks for --yes instead of prompting.
func isatty(*os.File) bool { return false }
