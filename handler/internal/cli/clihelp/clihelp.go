// Package clihelp prints every command's --help flags in the style of the
// docs' flag tables: each flag on its own line as `  --name ARG`, then its
// meaning indented and wrapped, with a non-zero default. The rest of the
// help is each command's own; a style test in package main enforces it.
package clihelp

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Width is the most bytes a wrapped description line holds.
const Width = 72

// Flags writes fs's flags, sorted by name, in the help style.
func Flags(w io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + strings.ToUpper(arg)
		}
		fmt.Fprintf(&b, "  --%s%s\n", f.Name, arg)
		switch f.DefValue {
		case "", "0", "0s", "false":
		default:
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		for _, line := range Wrap(usage, Width) {
			fmt.Fprintf(&b, "        %s\n", line)
		}
	})
	io.WriteString(w, b.String())
}

// Wrap breaks text at spaces into lines of at most width bytes.
func Wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
