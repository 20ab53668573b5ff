// Package deadletters is `handler deadletters`, the runbooks' dead-letter
// tool: list, stats, sweep [--dry-run], replay and discard, each a thin
// layer over package deadletter (the same policy code as the
// DeadLetterSweeper timer). It connects as package connect says: --namespace
// and --tables, else the app settings with the operator's Entra identity,
// else the development host of `make run` on this machine.
package deadletters

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/cli/clihelp"
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/connect"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
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
	// Stdin answers discard's question; IsTerminal says whether it is a
	// terminal (discard without --yes refuses when it is not).
	Stdin      io.Reader
	IsTerminal func() bool
}

// Main runs `handler deadletters` with the process's environment.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Run(ctx, args, stdout, stderr, Env{})
}

const groupHelp = `usage: handler deadletters <command> [flags]

The runbooks' dead-letter tool. Every command takes --namespace and --tables
(see below) and --help.

commands:
  list      [--source dlq|poison|poison-dlq] [--reason R] [--max N] [--json]
            peek only: message id, session id, reason, description, age, deliveries, replays
  stats     [--json]
            depth and oldest age per source and reason
  sweep     [--dry-run] [--json]
            run the dead-letter policy now (as the DeadLetterSweeper timer does);
            --dry-run says what it would do to each message and changes nothing
  replay    --source dlq|poison --message-id ID [--body FILE]
            send the message back to order-status with a new MessageId (--body: a
            corrected body, checked against the message contract first)
  discard   --source dlq|poison|poison-dlq --message-id ID [--yes]
            archive the message to the archive table, then remove it

sources: dlq = order-status/$DeadLetterQueue, poison = order-status-poison,
         poison-dlq = order-status-poison/$DeadLetterQueue

where it connects (first that applies):
  --namespace NS, --tables URL|CONNECTION-STRING
  ServiceBusConnection__fullyQualifiedNamespace and OrderStore__serviceUri with your
  Entra identity (az login, azd auth login, a managed identity)
  the development host of 'make run' on this machine (found under .run/)

policy settings (environment, as on the function app): DEAD_LETTER_REPLAY_COOLDOWN,
DEAD_LETTER_MAX_REPLAYS, DEAD_LETTER_SWEEP_MAX, DEAD_LETTER_SWEEP_RATE,
DEAD_LETTER_ARCHIVE_TABLE, DEAD_LETTER_AUDIT_TABLE, ORDER_STATUS_QUEUE, POISON_QUEUE

exit codes: 0 success, 1 failure (a service failed, no such message), 2 usage or bad
input (one line on stderr says what).
`

type command struct {
	name, args, summary string
	run                 func(c *cli, args []string) int
}

// commands is a function, not a variable: the commands' help refers back
// to the table.
func commands() []command {
	return []command{
		{"list", "[--source dlq|poison|poison-dlq] [--reason R] [--max N] [--json]", "Lists dead-lettered and parked messages without locking or changing them.", (*cli).list},
		{"stats", "[--json]", "Prints the depth and the oldest age of each source, by reason (peek only).", (*cli).stats},
		{"sweep", "[--dry-run] [--json]", "Runs the dead-letter policy now: replay after the cool-down, archive bad data, set aside what needs a human.\n--dry-run peeks only and says, per message, what the policy would do and why.", (*cli).sweep},
		{"replay", "--source dlq|poison --message-id ID [--body FILE]", "Sends the message back to order-status (same session, new MessageId <original>:replay:<n>),\nthen removes it (a parked copy is archived first). --body replaces the body with FILE's,\nchecked against the message contract before anything is sent.", (*cli).replay},
		{"discard", "--source dlq|poison|poison-dlq --message-id ID [--yes]", "Archives the message to the archive table, then removes it. Without --yes it asks on a\nterminal and refuses when not on one.", (*cli).discard},
	}
}

// cli is one invocation.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	env            Env
	name           string // "handler deadletters <command>"
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
		env.IsTerminal = stdinIsTerminal
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "handler deadletters: missing command (list, stats, sweep, replay, discard; see handler deadletters --help)")
		return exitUsage
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, groupHelp)
		return exitOK
	}
	for _, cmd := range commands() {
		if cmd.name == args[0] {
			c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, env: env, name: "handler deadletters " + cmd.name}
			return cmd.run(c, args[1:])
		}
	}
	fmt.Fprintf(stderr, "handler deadletters: unknown command %q (list, stats, sweep, replay, discard; see handler deadletters --help)\n", args[0])
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

// parse parses args; it returns an exit code >= 0 when the command is done
// (help printed, or a usage error reported).
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
		if c.name == "handler deadletters "+cmd.name {
			fmt.Fprintf(c.stdout, "usage: %s %s\n\n%s\n\nflags:\n", c.name, cmd.args, cmd.summary)
		}
	}
	clihelp.Flags(c.stdout, fs)
	fmt.Fprintln(c.stdout, "\nexit codes: 0 success, 1 failure, 2 usage or bad input.")
}

func (c *cli) usage(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "%s: %s (see %s --help)\n", c.name, fmt.Sprintf(format, args...), c.name)
	return exitUsage
}

func (c *cli) fail(err error) int {
	fmt.Fprintf(c.stderr, "%s: %s\n", c.name, oneLine(err.Error()))
	return exitFailure
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// sourceFlag validates a --source value; allowed lists the kinds the
// command takes.
func (c *cli) sourceFlag(v string, allowed ...deadletter.Kind) (deadletter.Kind, bool) {
	k, ok := deadletter.ParseKind(v)
	if !ok || !slices.Contains(allowed, k) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		c.usage("--source %q: want %s", v, strings.Join(names, " or "))
		return "", false
	}
	return k, true
}

// sweeper connects and builds the sweeper with the policy settings.
func (c *cli) sweeper() (*deadletter.Sweeper, func(), error) {
	dl, err := config.LoadDeadLetter(c.env.Getenv)
	if err != nil {
		return nil, nil, err
	}
	t, err := connect.ServiceBus(connect.Options{Namespace: c.namespace, Tables: c.tables, Getenv: c.env.Getenv, Dir: c.env.Dir})
	if err != nil {
		return nil, nil, err
	}
	closeBroker := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = t.Broker.Close(ctx)
	}
	svc, _, err := t.Tables()
	if err != nil {
		closeBroker()
		return nil, nil, err
	}
	s := deadletter.New(t.Broker, deadletter.NewTableStore(svc, dl.AuditTable, dl.ArchiveTable), deadletter.Options{
		Queues:        deadletter.Queues{Queue: t.Queue, PoisonQueue: t.PoisonQueue},
		Policy:        deadletter.Policy{Cooldown: dl.Cooldown, MaxReplays: dl.MaxReplays},
		MaxPerRun:     dl.SweepMax,
		RatePerSecond: dl.SweepRate,
	})
	return s, closeBroker, nil
}

// actor names the operator in audit rows.
func (c *cli) actor() string {
	name := c.env.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	return "cli:" + name
}

func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// listed is a message as list prints it.
type listed struct {
	Source            deadletter.Kind `json:"source"`
	SequenceNumber    int64           `json:"sequence_number"`
	MessageID         string          `json:"message_id"`
	OriginalMessageID string          `json:"original_message_id,omitempty"`
	SessionID         string          `json:"session_id"`
	Reason            string          `json:"reason"`
	Description       string          `json:"description"`
	EnqueuedTime      time.Time       `json:"enqueued_time"`
	AgeSeconds        int64           `json:"age_seconds"`
	DeliveryCount     int32           `json:"delivery_count"`
	ReplayCount       int             `json:"replay_count"`
	Deferred          bool            `json:"deferred"`
}

func (c *cli) list(args []string) int {
	fs := c.flags()
	source := fs.String("source", "", "list only this `source`: dlq, poison or poison-dlq (default: all three)")
	reason := fs.String("reason", "", "list only messages with this dead-letter `reason`")
	maxN := fs.Int("max", 50, "list at most `N` messages")
	asJSON := fs.Bool("json", false, "JSON Lines, one message per line")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	kinds := deadletter.Kinds
	if *source != "" {
		k, ok := c.sourceFlag(*source, deadletter.Kinds...)
		if !ok {
			return exitUsage
		}
		kinds = []deadletter.Kind{k}
	}
	if *maxN < 1 {
		return c.usage("--max %d: want at least 1", *maxN)
	}
	s, done, err := c.sweeper()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	msgs, now, err := s.Peek(c.ctx, kinds...)
	if err != nil {
		return c.fail(err)
	}
	var out []listed
	for _, k := range kinds {
		for _, m := range msgs[k] {
			if len(out) == *maxN {
				break
			}
			if *reason != "" && m.DeadLetterReason != *reason {
				continue
			}
			l := listed{Source: k, SequenceNumber: m.SequenceNumber, MessageID: m.MessageID, SessionID: m.SessionID,
				Reason: m.DeadLetterReason, Description: m.DeadLetterErrorDescription, EnqueuedTime: m.EnqueuedTime.UTC(),
				AgeSeconds: int64(max(now.Sub(m.EnqueuedTime), 0) / time.Second), DeliveryCount: m.DeliveryCount,
				ReplayCount: deadletter.ReplayCount(m), Deferred: m.Deferred}
			if id := deadletter.OriginalID(m); id != m.MessageID {
				l.OriginalMessageID = id
			}
			if l.SessionID == "" {
				if sid, ok := m.ApplicationProperties["OriginalSessionId"].(string); ok {
					l.SessionID = sid
				}
			}
			out = append(out, l)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		for _, l := range out {
			_ = enc.Encode(l)
		}
		return exitOK
	}
	if len(out) == 0 {
		fmt.Fprintln(c.stdout, "no messages")
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tSEQ\tMESSAGE ID\tSESSION\tREASON\tAGE\tDELIVERIES\tREPLAYS\tSET ASIDE\tDESCRIPTION")
	for _, l := range out {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", l.Source, l.SequenceNumber, l.MessageID, l.SessionID,
			orDash(l.Reason), age(l.AgeSeconds), l.DeliveryCount, l.ReplayCount, yesNo(l.Deferred), shorten(l.Description, 60))
	}
	_ = tw.Flush()
	return exitOK
}

func (c *cli) stats(args []string) int {
	fs := c.flags()
	asJSON := fs.Bool("json", false, "JSON Lines, one source and reason per line")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	s, done, err := c.sweeper()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	msgs, now, err := s.Peek(c.ctx, deadletter.Kinds...)
	if err != nil {
		return c.fail(err)
	}
	st := deadletter.Stats(msgs, now)
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		for _, x := range st {
			_ = enc.Encode(x)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tREASON\tDEPTH\tOLDEST AGE")
	for _, x := range st {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", x.Source, orDash(x.Reason), x.Depth, age(x.OldestAgeSeconds))
	}
	_ = tw.Flush()
	return exitOK
}

func (c *cli) sweep(args []string) int {
	fs := c.flags()
	dry := fs.Bool("dry-run", false, "peek only: say what the policy would do to each message, change nothing")
	asJSON := fs.Bool("json", false, "print the run's report as JSON")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	s, done, err := c.sweeper()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	start := time.Now()
	lastProgress := start
	acted := 0
	rep, err := s.Run(c.ctx, deadletter.RunOptions{DryRun: *dry, Actor: c.actor(), Progress: func(deadletter.Item) {
		acted++
		if now := time.Now(); now.Sub(lastProgress) >= 2*time.Second {
			lastProgress = now
			fmt.Fprintf(c.stderr, "sweeping: %d messages handled in %s\n", acted, now.Sub(start).Round(time.Second))
		}
	}})
	if *asJSON {
		_ = json.NewEncoder(c.stdout).Encode(rep)
	} else {
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		if len(rep.Items) > 0 {
			fmt.Fprintln(tw, "SOURCE\tSEQ\tMESSAGE ID\tREASON\tACTION\tWHY")
		}
		for _, it := range rep.Items {
			action := string(it.Action)
			if *dry {
				action = "would be " + action
			}
			if it.NewMessageID != "" {
				action += " as " + it.NewMessageID
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", it.Source, it.SequenceNumber, it.MessageID, orDash(it.Reason), action, it.Why)
		}
		_ = tw.Flush()
		verb := "swept"
		if *dry {
			verb = "dry run, nothing changed"
		}
		fmt.Fprintf(c.stdout, "%s: %s (run %s)\n", verb, counts(rep.Counts), rep.RunID)
		if rep.Stopped != "" {
			fmt.Fprintf(c.stdout, "stopped early: %s; run it again for the rest\n", rep.Stopped)
		}
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}

func (c *cli) replay(args []string) int {
	fs := c.flags()
	source := fs.String("source", "", "`source` of the message: dlq or poison (required)")
	id := fs.String("message-id", "", "the message's `id` as list shows it (for a parked copy, its own id or the original's; required)")
	bodyFile := fs.String("body", "", "`file` with a corrected body to send instead (checked against the message contract first)")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	if *source == "" {
		return c.usage("--source is required (dlq or poison)")
	}
	k, ok := c.sourceFlag(*source, deadletter.DLQ, deadletter.Poison)
	if !ok {
		return exitUsage
	}
	if *id == "" {
		return c.usage("--message-id is required")
	}
	var body []byte
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			return c.usage("--body: %v", err)
		}
		body = b
	}
	s, done, err := c.sweeper()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	newID, err := s.Replay(c.ctx, k, *id, body, c.actor())
	if errors.Is(err, deadletter.ErrInvalidBody) {
		return c.usage("%s", oneLine(err.Error()))
	}
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "replayed %s from %s to %s as %s\n", *id, k, s.Queues().Queue, newID)
	return exitOK
}

func (c *cli) discard(args []string) int {
	fs := c.flags()
	source := fs.String("source", "", "`source` of the message: dlq, poison or poison-dlq (required)")
	id := fs.String("message-id", "", "the message's `id` as list shows it (required)")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	if *source == "" {
		return c.usage("--source is required (dlq, poison or poison-dlq)")
	}
	k, ok := c.sourceFlag(*source, deadletter.Kinds...)
	if !ok {
		return exitUsage
	}
	if *id == "" {
		return c.usage("--message-id is required")
	}
	if !*yes {
		if !c.env.IsTerminal() {
			return c.usage("refusing to discard without --yes when not on a terminal")
		}
		fmt.Fprintf(c.stdout, "discard %s from %s (archived first)? [y/N] ", *id, k)
		var answer string
		_, _ = fmt.Fscanln(c.env.Stdin, &answer)
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(c.stdout, "not discarded")
			return exitFailure
		}
	}
	s, done, err := c.sweeper()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	if err := s.Discard(c.ctx, k, *id, c.actor()); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "discarded %s from %s (archived to the archive table first)\n", *id, k)
	return exitOK
}

func counts(m map[deadletter.Action]int) string {
	if len(m) == 0 {
		return "no messages"
	}
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", a, m[a]))
	}
	return strings.Join(parts, ", ")
}

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

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func shorten(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-3]) + "..."
	}
	return s
}
