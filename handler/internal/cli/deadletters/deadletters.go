// Package deadletters is `orderstatus deadletters`, the runbooks' dead-letter
// tool: thin commands over package deadletter (the DeadLetterSweeper's policy
// and actions, through package dlops), connecting as package connect says;
// mcp serves the same as MCP tools. Only replay and sweep need Service Bus.
// Its contract with scripts: --help everywhere; --json prints JSON Lines;
// exit 0 success, 1 a failure or nothing found, 2 a usage error or bad input,
// with one line on stderr; every refusal comes before the first write and any
// question.
package deadletters

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"golang.org/x/term"

	"github.com/orderstatus/orderstatus/handler/internal/cli/clihelp"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// Env tunes Main for tests; the zero value is the process's.
type Env struct {
	Getenv func(string) string
	Dir    string
	// Stdin answers confirmations; IsTerminal says if it is a terminal.
	Stdin      io.Reader
	IsTerminal func() bool
	// StderrIsTerminal says if stderr, where progress bars go, is a terminal.
	StderrIsTerminal func() bool
	// Connect, when set, replaces package connect's connection (tests).
	Connect func(ctx context.Context) (*Backend, error)
	// OpenStore, when set, replaces the Table Storage store (tests).
	OpenStore func(svc *aztables.ServiceClient, table string) (dlstore.Store, error)
}

// Main runs `orderstatus deadletters` with the process's environment.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Run(ctx, args, stdout, stderr, Env{})
}

const groupHelp = `usage: orderstatus deadletters <command> [flags]

The runbooks' dead-letter tool, on the dead-letter store: every dead-lettered
and parked message is drained into it by the DeadLetterSweeper timer (every
5 minutes) or by 'sweep'. Every command takes --help, --namespace and
--tables (see below), and all but mcp take --json (JSON Lines).

commands:
  stats     depth, oldest age, in queue and left, per source and reason
  groups    [FILTER]  failure groups: reason and description fingerprint, count,
            orders affected, first and last seen, what the policy does with them
  find      --order ID  everything about one order in time order: its row in the
            order table, its dead letters in every state, every audit entry
  list      [FILTER] [--max N]  the entries (default: those not closed)
  replay    (--id ID [EDITS] | FILTER) [--dry-run] [--yes]
            send back to order-status as <original>:replay:<n>; EDITS change the
            message first, checked against the message contract: --set-property
            K=V, --remove-property K (each again for more), --subject S, --body
            FILE (- for stdin); --dry-run shows the message as it would be sent
  discard   (--id ID | FILTER) [--dry-run] [--yes]   close it for good (kept until
            the retention, then purged)
  archive   (--id ID | FILTER) [--dry-run] [--yes]   set it aside; restore reopens it
  restore   --id ID   an archived or left entry back to open
  sweep     [--dry-run]  run the dead-letter policy now, as the timer does; --dry-run
            says what it would do to each message and entry and writes nothing
  mcp       [--allow-write]  the same tools for an assistant: an MCP server on
            stdin and stdout (docs/mcp.md); read-only unless --allow-write

stats, groups, find and list only read; replay, discard, archive and restore act on one entry (--id)
or on every entry a FILTER selects when the command starts; sweep does what the timer does.
Only replay and sweep (not their --dry-run) need Service Bus; every other command works on the
Table Storage account alone, and says on stderr what it could not read from Service Bus.

FILTER: --source dlq|poison|poison-dlq, --reason R, --group G, --order ID,
        --since T, --until T (RFC 3339, or a duration meaning that long ago: 2h, 7d),
        --text S (in the MessageId, order id, description or body),
        --state open|left|replay-due|replayed|archived|discarded (several: a,b)
A filter selects what list with the same filter shows when the command starts: the
entries listed then are the set, and entries stored later are not touched. More than
one entry (and discard of any) needs --yes or y on a terminal; off a terminal (stdin a
pipe, a file, /dev/null) a missing --yes exits 2 before anything changes.

sources: dlq = order-status/$DeadLetterQueue, poison = order-status-poison,
         poison-dlq = order-status-poison/$DeadLetterQueue

where it connects (first that applies):
  --namespace NS, --tables URL|CONNECTION-STRING
  ServiceBusConnection__fullyQualifiedNamespace and OrderStore__serviceUri with your
  Entra identity (az login, azd auth login, a managed identity)
  the development host of 'make run' on this machine (found under .run/)

settings (environment, as on the function app): DEAD_LETTER_REPLAY_COOLDOWN,
DEAD_LETTER_MAX_REPLAYS, DEAD_LETTER_SWEEP_RATE, DEAD_LETTER_RETENTION,
DEAD_LETTER_TABLE, OrderStore__tableName, ORDER_STATUS_QUEUE, POISON_QUEUE

exit codes: 0 success, 1 failure or nothing found (a service failed, nothing
matches, a part could not be read), 2 usage or bad input (an --id that names no
entry, said before any question; one line on stderr says what).
`

type command struct {
	name, args, summary string
	run                 func(c *cli, args []string) int
}

// commands is a function: the commands' help refers back to it.
func commands() []command {
	return []command{
		{"stats", "[--json]", "Prints the depth, the oldest age, how many are still in Service Bus (in queue) and how many\nare left for a human, per source and reason: the store's entries that are not closed and\nthe messages not yet drained. A part that cannot be read is named on stderr (exit 1);\nthe rest is still reported.", (*cli).stats},
		{"groups", "[FILTER] [--json]", "Prints the failure groups (source, reason and a fingerprint of the description with its\nids, numbers and times masked) of the entries not closed (or those FILTER selects):\ncount, orders affected, first and last seen, and what the policy does with them.\nAct on a group with --group G.", (*cli).groups},
		{"find", "--order ID [--json]", "Prints everything about one order: its row in the order table (status, last sequence),\nthen its dead-letter entries in every state and every audit entry in time order.\nExit 1 when nothing at all is known of the order.", (*cli).find},
		{"list", "[FILTER] [--max N] [--json]", "Lists the entries FILTER selects (default: those not closed; --state archived shows\nwhat is kept), oldest first. Messages still in Service Bus show once a sweep stored them\n(stats counts them as in queue).", (*cli).list},
		{"replay", "(--id ID [--set-property K=V]... [--remove-property K]... [--subject S] [--body FILE|-] | FILTER) [--dry-run] [--yes] [--json]", "Sends entries back to order-status (their session, MessageId <original>:replay:<n>)\nand records each as replayed (a parked one as resubmitted). With a filter it prints the\ncount and a sample first (the open and left entries it selects unless --state says\notherwise), and asks for more than one. With --id, edits change the message first: each is\nchecked against the message contract before anything is sent, and the audit entry says what\nchanged; --dry-run shows the message as it would be sent. Needs Service Bus (not --dry-run).", (*cli).replay},
		{"discard", "(--id ID | FILTER) [--dry-run] [--yes] [--json]", "Closes entries as discarded: kept, with their audit entries, until DEAD_LETTER_RETENTION,\nthen purged. A filter takes the open and left entries it selects unless --state says\notherwise (--state archived: archived ones). Asks first on a terminal; off one, needs --yes.", (*cli).discard},
		{"archive", "(--id ID | FILTER) [--dry-run] [--yes] [--json]", "Sets entries aside as archived: off every queue, kept until DEAD_LETTER_RETENTION;\nrestore --id reopens one. A filter takes the open and left entries it selects unless\n--state says otherwise.", (*cli).archive},
		{"restore", "--id ID [--json]", "Reopens an archived (or left) entry: back to open, to be corrected and replayed.", (*cli).restore},
		{"mcp", "[--allow-write] [--namespace NS] [--tables URL]", mcpSummary, (*cli).mcp},
		{"sweep", "[--dry-run] [--json]", "Runs the dead-letter policy now, as the DeadLetterSweeper timer does: drains every source\ninto the store, replays after the cool-down, archives bad data, leaves the rest for a human,\npurges what the retention lets go. --dry-run reads only, writes nothing (no table is created\neither) and says, per message and entry, what the sweep would do and why; a part it cannot\nread is named on stderr (exit 1) and the rest still reported. Needs Service Bus (not --dry-run).", (*cli).sweep},
	}
}

func commandNames() string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// cli is one invocation.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	env            Env
	name           string // "orderstatus deadletters <command>"
	namespace      string
	tables         string
}

// Run is Main with an explicit environment.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Stdin == nil {
		env.Stdin = os.Stdin
	}
	if env.IsTerminal == nil {
		env.IsTerminal = func() bool { return isTerminal(os.Stdin) }
	}
	if env.StderrIsTerminal == nil {
		env.StderrIsTerminal = func() bool { return isTerminal(os.Stderr) }
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "orderstatus deadletters: missing command (%s; see orderstatus deadletters --help)\n", commandNames())
		return exitUsage
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, groupHelp)
		return exitOK
	}
	for _, cmd := range commands() {
		if cmd.name == args[0] {
			c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, env: env, name: "orderstatus deadletters " + cmd.name}
			return cmd.run(c, args[1:])
		}
	}
	fmt.Fprintf(stderr, "orderstatus deadletters: unknown command %q (%s; see orderstatus deadletters --help)\n", args[0], commandNames())
	return exitUsage
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }

// flags returns the command's flag set with the connection flags.
func (c *cli) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.namespace, "namespace", "", "Service Bus `namespace` (<name>.servicebus.windows.net); default: "+config.EnvServiceBusNamespace+", else make run")
	fs.StringVar(&c.tables, "tables", "", "Table Storage `account`: https://<account>.table.core.windows.net or a connection string; default: "+config.EnvStoreServiceURI+", else make run")
	return fs
}

// parse parses args; an exit code >= 0 means done (help, or a usage error).
func (c *cli) parse(fs *flag.FlagSet, args []string) int {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		c.help(fs)
		return exitOK
	}
	if err != nil {
		return c.usage("%v", err)
	}
	if fs.NArg() > 0 {
		return c.usage("unexpected argument %q", fs.Arg(0))
	}
	return -1
}

func (c *cli) help(fs *flag.FlagSet) {
	for _, cmd := range commands() {
		if c.name == "orderstatus deadletters "+cmd.name {
			fmt.Fprintf(c.stdout, "usage: %s %s\n\n%s\n\nflags:\n", c.name, cmd.args, cmd.summary)
		}
	}
	clihelp.Flags(c.stdout, fs)
	fmt.Fprintln(c.stdout, "\nexit codes: 0 success, 1 failure or nothing found, 2 usage or bad input.")
}

func (c *cli) usage(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "%s: %s (see %s --help)\n", c.name, oneLine(fmt.Sprintf(format, args...)), c.name)
	return exitUsage
}

func (c *cli) fail(err error) int {
	fmt.Fprintf(c.stderr, "%s: %s\n", c.name, oneLine(err.Error()))
	return exitFailure
}

// noSuchID reports an --id naming no entry: exit 2, before any change.
func (c *cli) noSuchID(err error) int {
	fmt.Fprintf(c.stderr, "%s: %s (orderstatus deadletters list shows the ids)\n", c.name, oneLine(err.Error()))
	return exitUsage
}

// notFound reports that nothing matched: exit 1, one line.
func (c *cli) notFound(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "%s: %s\n", c.name, oneLine(fmt.Sprintf(format, args...)))
	return exitFailure
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// actor names the operator in audit entries.
func (c *cli) actor() string { return "cli:" + c.user() }

// user is the operator's login name.
func (c *cli) user() string {
	name := c.env.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	return name
}

// isTerminal reports whether f is a terminal (/dev/null is not).
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

func age(sec int64) string {
	if sec <= 0 {
		return "0s"
	}
	return (time.Duration(sec) * time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shorten(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-3]) + "..."
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func sortedActions(m map[deadletter.Action]int) []deadletter.Action {
	return slices.Sorted(maps.Keys(m))
}

func joinComma(parts []string) string { return strings.Join(parts, ", ") }
