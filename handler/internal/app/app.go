// Package app is what every orderstatus binary shares: command dispatch, exit
// codes, `version`, and `serve`, the custom handler wired from its settings.
package app

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0
	ExitFailure = 1 // a runtime failure (a bad setting at start-up, a service that failed)
	ExitUsage   = 2 // a bad command, flag or input: one line on stderr says what
)

// Command is one subcommand. Run gets the arguments after its name, parses
// its own flags, answers its own --help and returns the exit code.
type Command struct {
	Name, Summary string
	Run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// Program is a binary; Default is the command run when none is named ("" requires one).
type Program struct {
	Name, About string
	Commands    []Command
	Default     string
}

// Main dispatches args (without the program name) under a context cancelled
// on SIGTERM or SIGINT; a second signal ends the process at once.
func (p Program) Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	context.AfterFunc(ctx, stop)
	return p.Run(ctx, args, stdout, stderr)
}

// Run is Main under ctx.
func (p Program) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := p.Default
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	switch name {
	case "":
		fmt.Fprintf(stderr, "%s: a command is required (%s --help lists them)\n", p.Name, p.Name)
		return ExitUsage
	case "help", "-h", "-help", "--help":
		p.usage(stdout)
		return ExitOK
	case "--version", "-version":
		name = "version"
	}
	for _, c := range p.Commands {
		if c.Name == name {
			return c.Run(ctx, args, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q (%s --help lists the commands)\n", p.Name, name, p.Name)
	return ExitUsage
}

func (p Program) usage(w io.Writer) {
	cmd := "<command>"
	if p.Default != "" {
		cmd = "[command]"
	}
	fmt.Fprintf(w, "usage: %s %s [flags]   (%s <command> --help for its flags)\n\n%s\n\ncommands:\n", p.Name, cmd, p.Name, p.About)
	for _, c := range p.Commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(w, `
Settings are environment variables (app settings); the Configuration table
of docs/configuration.md lists them all, and local.settings.json.template
has each with its default.

exit codes: %d success, %d failure (a bad setting, a service that failed), %d usage
(a bad command, flag or input; one line on stderr says what).
`, ExitOK, ExitFailure, ExitUsage)
}

// Build is what the linker stamps (-ldflags "-X main.version=... -X main.revision=...").
type Build struct {
	Version, revision string
}

// NewBuild returns the build info of the linker's values.
func NewBuild(version, revision string) Build { return Build{Version: version, revision: revision} }

// Revision is the VCS revision: the linker's, else the go command's, else "unknown".
func (b Build) Revision() string {
	if b.revision != "" {
		return b.revision
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// Version is the version command of program prog.
func Version(prog string, b Build) Command {
	return Command{"version", "print the version", func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		if len(args) > 0 {
			if IsHelp(args[0]) {
				fmt.Fprintf(stdout, "usage: %s version\n\nPrints the version and the source revision it was built from.\n\nexit codes: 0 printed, 2 an argument was given.\n", prog)
				return ExitOK
			}
			fmt.Fprintf(stderr, "%s version: unexpected argument %q (usage: %s version)\n", prog, args[0], prog)
			return ExitUsage
		}
		fmt.Fprintln(stdout, "orderstatus", prog, b.Version, b.Revision())
		return ExitOK
	}}
}

// IsHelp reports whether a is a request for help.
func IsHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }
