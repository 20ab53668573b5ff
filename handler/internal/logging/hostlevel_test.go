package logging

import "log/slog"

// HostLevel is the level the Functions host gives a custom handler's line
// (WorkerProcess.ParseErrorMessageAndLog; see the package comment).
func HostLevel(line string, stderr bool) slog.Level {
	switch {
	case !stderr:
		return slog.LevelInfo
	case containsWarn([]byte(line)):
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}
