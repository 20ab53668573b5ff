// Package publish is `orderstatus publish`: the producers' operations over
// handler/publish, an outbox's relay and commit, and wait. It refuses bad
// input before sending and connects as package connect says.
package publish

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokerpub"
	"github.com/orderstatus/orderstatus/handler/internal/cli/clihelp"
	"github.com/orderstatus/orderstatus/handler/internal/connect"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
	"github.com/orderstatus/orderstatus/handler/publish"
)

// Exit codes.
const (
	ExitOK      = 0 // done (a cancel that found nothing to cancel included: the line says so)
	ExitFailure = 1 // connecting or sending failed
	ExitUsage   = 2 // a bad subcommand, flag or input line: one line on stderr, nothing sent
)

const usage = `usage: orderstatus publish <command> [flags]   (orderstatus publish <command> --help for its flags)

Publishes the order-status contract's messages to the order-status queue, as
the producers (Checkout, Payments, the warehouse, the carrier) do.

commands:
  status          an OrderStatusChanged: --order ID --status S --sequence N [--occurred-at T],
                  or many from a JSON Lines file: --from FILE (sent in Service Bus batches)
  timeout         schedule the PaymentTimeoutCheck of the order's Created:
                  --order ID [--created N] [--after 30m]; prints its sequence number (keep it to cancel)
  cancel-timeout  cancel a scheduled timeout: --sequence N
  relay           relay a producer's transactional outbox: --table T [--once]
  commit          commit messages into a producer's outbox (what outbox.Table.Commit does):
                  --table T --order ID [--status S --sequence N] [--schedule-timeout] [--cancel-timeout]
  wait            wait until GetOrder shows an order at a sequence or a status:
                  --order ID (--sequence N | --status S) [--timeout 30s]; sends nothing

Where it sends (every command but wait): --namespace NS, else the app setting
ServiceBusConnection__fullyQualifiedNamespace, both with your Entra identity
(az login; the Azure Service Bus Data Sender role on the queue is enough), else
the development host running on this machine (make run). relay and commit also
take --tables (the producer's Table Storage account), else OrderStore__serviceUri
or OrderStore__connectionString, else make run's Azurite.

exit codes: 0 done (also when cancel-timeout finds nothing to cancel: the line
says why), 1 connecting or sending failed (wait: the order did not get there in
time), 2 bad input (one line on stderr; nothing is sent).
`

// env is what Main takes from the process, replaceable in tests.
type env struct {
	dir    string              // where the search for a development host starts
	getenv func(string) string // the environment
	now    func() time.Time    // --occurred-at's default
	stdin  io.Reader           // --from -
}

// Main is the `orderstatus publish` command; args follow "publish".
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, stdout, stderr, env{dir: ".", getenv: os.Getenv, now: time.Now, stdin: os.Stdin})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, e env) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "orderstatus publish: a command is required: status, timeout, cancel-timeout, relay, commit or wait (orderstatus publish --help)")
		return ExitUsage
	}
	cmd, args := args[0], args[1:]
	if cmd == "-h" || cmd == "-help" || cmd == "--help" || cmd == "help" {
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	f, ok := map[string]func(context.Context, []string, io.Writer, io.Writer, env) int{"status": runStatus, "timeout": runTimeout,
		"cancel-timeout": runCancel, "relay": runRelay, "commit": runCommit, "wait": runWait}[cmd]
	if !ok {
		fmt.Fprintf(stderr, "orderstatus publish: unknown command %q: want status, timeout, cancel-timeout, relay, commit or wait (orderstatus publish --help)\n", cmd)
		return ExitUsage
	}
	return f(ctx, args, stdout, stderr, e)
}

// command is one subcommand's flag set and its usage line.
type command struct {
	name, usage, about string
	fs                 *flag.FlagSet
	namespace          string
	stdout, stderr     io.Writer
	waitOpts           waitOptions
	exitCodes          string // the help's last paragraph
}

func newCommand(name, usageLine, about string, stdout, stderr io.Writer) *command {
	c := newLocalCommand(name, usageLine, about, stdout, stderr)
	c.fs.StringVar(&c.namespace, "namespace", "", "Service Bus `namespace` (<name>.servicebus.windows.net); default: ServiceBusConnection__fullyQualifiedNamespace, else the running development host")
	return c
}

// newLocalCommand is newCommand without --namespace, for no Service Bus.
func newLocalCommand(name, usageLine, about string, stdout, stderr io.Writer) *command {
	c := &command{name: "orderstatus publish " + name, usage: usageLine, about: about, stdout: stdout, stderr: stderr,
		exitCodes: "exit codes: 0 sent, 1 connecting or sending failed, 2 bad input (one line on stderr;\nnothing is sent).\n"}
	c.fs = flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.fs.SetOutput(io.Discard)
	return c
}

// parse parses args; it returns an exit code >= 0 to return at once.
func (c *command) parse(args []string) int {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(c.stdout, "%s\n\n%s\n\nflags:\n", c.usage, c.about)
			clihelp.Flags(c.stdout, c.fs)
			fmt.Fprint(c.stdout, "\n"+c.exitCodes)
			return ExitOK
		}
		return c.bad("%v", err)
	}
	if c.fs.NArg() > 0 {
		return c.bad("unexpected argument %q", c.fs.Arg(0))
	}
	if c.namespace != "" {
		if _, err := connect.Namespace(c.namespace); err != nil {
			return c.bad("--namespace: %v", err)
		}
	}
	return -1
}

// bad prints one usage line and returns ExitUsage.
func (c *command) bad(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "%s: %s (%s)\n", c.name, fmt.Sprintf(format, args...), c.usage)
	return ExitUsage
}

func (c *command) fail(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return ExitFailure
}

// target resolves where to send (tables: --tables, for the outbox) and
// returns it and its closer.
func (c *command) target(e env, tables string) (*connect.Target, func(), error) {
	t, err := connect.ServiceBus(connect.Options{Namespace: c.namespace, Tables: tables, Getenv: e.getenv, Dir: e.dir})
	if err != nil {
		return nil, nil, err
	}
	return t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = t.Broker.Close(ctx)
	}, nil
}

// connect resolves the target and returns a publisher on it and its closer.
func (c *command) connect(e env) (*publish.Publisher, *connect.Target, func(), error) {
	t, closeFn, err := c.target(e, "")
	if err != nil {
		return nil, nil, nil, err
	}
	return publish.New(brokerpub.Sender(t.Broker), &publish.Options{Queue: t.Queue}), t, closeFn, nil
}

// set returns the names of the flags given.
func (c *command) set() map[string]bool {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// Bounds of what a flag or line may say, beyond the contract.
const (
	maxAfter = 14 * 24 * time.Hour // the queue's messages live 7 days; a timeout beyond that is a mistake
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer, e env) int {
	c := newCommand("status",
		"usage: orderstatus publish status --order ID --status S --sequence N [--occurred-at T] | --from FILE [--wait] [--namespace NS]",
		`Sends an OrderStatusChanged: SessionId = the order id, MessageId = <order>:<sequence>,
Subject OrderStatusChanged, content type application/json, the body in the
contract's camelCase JSON. With --from, sends every line of a JSON Lines file
({"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"};
occurredAt optional), in Service Bus batches, each order's changes in sequence
order; a bad line stops it before anything is sent.

Sent is not applied: the handler applies a message moments later. With
--wait it polls GetOrder until each order shows the sequence sent (or a
later one), for at most --wait-timeout, and exits 1 naming the orders that
do not (queued still, or parked). Against the development host it asks its
HTTP front; against Azure pass --get-order-url.`, stdout, stderr)
	c.exitCodes = "exit codes: 0 sent (with --wait: and applied), 1 connecting or sending failed, or\n--wait's orders not applied in time, 2 bad input (one line on stderr; nothing is\nsent).\n"
	var orderID, status, occurred, from string
	var seq int64
	w := &c.waitOpts
	c.fs.StringVar(&orderID, "order", "", "order `id` (the session): at most 128 characters, none of / \\ # ? or control characters")
	c.fs.StringVar(&status, "status", "", "`status`: "+contract.StatusNames()+" (any case)")
	c.fs.Int64Var(&seq, "sequence", 0, "the order's sequence `number` of this change, from 1 (the order owner's counter)")
	c.fs.StringVar(&occurred, "occurred-at", "", "when it happened: RFC 3339 (`time`, e.g. 2026-11-29T10:00:00Z) or a duration ago (\"31m ago\"); default now")
	c.fs.StringVar(&from, "from", "", "JSON Lines `file` of status changes instead of the flags above (- for standard input)")
	c.fs.BoolVar(&w.on, "wait", false, "after sending, wait until GetOrder shows each order at the sequence sent or later; exit 1 if one does not within --wait-timeout")
	c.fs.DurationVar(&w.timeout, "wait-timeout", defaultWaitTimeout, "how long --wait waits, at most 1h (a Go `duration`)")
	c.fs.StringVar(&w.url, "get-order-url", "", "GetOrder's `URL` for --wait, with {orderId} where the id goes, e.g. https://<app>.azurewebsites.net/api/orders/{orderId}?code=<function key>; default: the development host's front")
	if code := c.parse(args); code >= 0 {
		return code
	}
	set := c.set()
	if !w.on && (set["wait-timeout"] || set["get-order-url"]) {
		return c.bad("--wait-timeout and --get-order-url go with --wait")
	}
	if w.on {
		if err := checkWaitTimeout("wait-timeout", w.timeout); err != nil {
			return c.bad("%v", err)
		}
	}
	if w.url != "" {
		if err := checkGetOrderURL(w.url); err != nil {
			return c.bad("%v", err)
		}
	}

	if from != "" {
		for _, f := range []string{"order", "status", "sequence", "occurred-at"} {
			if set[f] {
				return c.bad("--from and --%s exclude each other", f)
			}
		}
		return statusFromFile(ctx, c, from, e)
	}
	for _, f := range []string{"order", "status", "sequence"} {
		if !set[f] {
			return c.bad("--%s is required", f)
		}
	}
	ch, err := change(orderID, status, seq, occurred, set["occurred-at"], e.now)
	if err != nil {
		return c.bad("%v", err)
	}
	m, _ := publish.StatusMessage(ch) // valid: change checked it
	p, t, closeFn, err := c.connect(e)
	if err != nil {
		return c.fail(err)
	}
	defer closeFn()
	poll, code := c.waiter(t)
	if code >= 0 {
		return code
	}
	if err := p.Status(ctx, ch); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(stdout, "sent %s %s (order %s %s, sequence %d) to %s on %s\n",
		m.Subject, m.MessageID, ch.OrderID, ch.Status, ch.Sequence, p.Queue(), t.Describe)
	if poll != nil {
		return waitAndReport(ctx, c, poll, []contract.StatusChanged{ch})
	}
	return ExitOK
}

// waitOptions are status's --wait flags.
type waitOptions struct {
	on      bool
	timeout time.Duration
	url     string
}

// waiter returns --wait's poller, or exit code >= 0 without a GetOrder.
func (c *command) waiter(t *connect.Target) (*waiter, int) {
	if !c.waitOpts.on {
		return nil, -1
	}
	addr := ""
	if t.DevHost != nil {
		addr = t.DevHost.HTTPAddr
	}
	tmpl, err := getOrderURL(c.waitOpts.url, addr)
	if err != nil {
		return nil, c.bad("%v", err)
	}
	return newWaiter(tmpl, c.waitOpts.timeout), -1
}

// change builds and validates a status change from flag values.
func change(orderID, status string, seq int64, occurred string, occurredSet bool, now func() time.Time) (contract.StatusChanged, error) {
	st, ok := contract.ParseStatus(status)
	if !ok {
		return contract.StatusChanged{}, fmt.Errorf("--status %q: want one of %s", status, contract.StatusNames())
	}
	ch := contract.StatusChanged{OrderID: orderID, Status: st, Sequence: seq, OccurredAt: now().UTC()}
	if occurredSet {
		t, err := occurredAt(occurred, ch.OccurredAt)
		if err != nil {
			return ch, err
		}
		ch.OccurredAt = t
	}
	if err := ch.Validate(); err != nil {
		return ch, flagError(err)
	}
	return ch, nil
}

// occurredAt parses --occurred-at: RFC 3339, or a duration "ago".
func occurredAt(v string, now time.Time) (time.Time, error) {
	if d, ok := strings.CutSuffix(v, " ago"); ok {
		if ago, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && ago >= 0 {
			return now.Add(-ago), nil
		}
	} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--occurred-at %q: want an RFC 3339 time such as 2026-11-29T10:00:00Z, or a duration ago such as \"31m ago\"", v)
}

// flagError names the flag a contract error is about.
func flagError(err error) error {
	msg := err.Error()
	for prefix, flag := range map[string]string{"orderId": "--order", "status": "--status", "sequence": "--sequence", "occurredAt": "--occurred-at"} {
		if strings.HasPrefix(msg, prefix+" ") {
			return fmt.Errorf("%s: %s", flag, msg)
		}
	}
	return err
}

// fileLine is one line of a --from file: the contract's body.
type fileLine struct {
	OrderID    *string          `json:"orderId"`
	Status     *string          `json:"status"`
	Sequence   *json.RawMessage `json:"sequence"`
	OccurredAt *string          `json:"occurredAt"`
}

// readChanges parses JSON Lines of status changes; errors name the line.
func readChanges(r io.Reader, name string, now func() time.Time) ([]contract.StatusChanged, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var out []contract.StatusChanged
	seen := map[string]int{} // MessageId -> line
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) == 0 {
			continue
		}
		ch, err := parseLine(line, now)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		id := contract.StatusMessageID(ch.OrderID, ch.Sequence)
		if first, dup := seen[id]; dup {
			return nil, fmt.Errorf("%s:%d: order %s sequence %d is on line %d already (one change per sequence)", name, n, ch.OrderID, ch.Sequence, first)
		}
		seen[id] = n
		out = append(out, ch)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no status changes in it", name)
	}
	return out, nil
}

func parseLine(line []byte, now func() time.Time) (contract.StatusChanged, error) {
	var l fileLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return contract.StatusChanged{}, fmt.Errorf("not a status change object: %v", err)
	}
	if dec.More() {
		return contract.StatusChanged{}, errors.New("more than one JSON value on the line")
	}
	switch {
	case l.OrderID == nil:
		return contract.StatusChanged{}, errors.New("orderId is missing")
	case l.Status == nil:
		return contract.StatusChanged{}, errors.New("status is missing")
	case l.Sequence == nil:
		return contract.StatusChanged{}, errors.New("sequence is missing")
	}
	st, ok := contract.ParseStatus(*l.Status)
	if !ok {
		return contract.StatusChanged{}, fmt.Errorf("status %q is not one of %s", *l.Status, contract.StatusNames())
	}
	seq, err := strconv.ParseInt(string(*l.Sequence), 10, 64)
	if err != nil {
		return contract.StatusChanged{}, fmt.Errorf("sequence %s is not an integer", *l.Sequence)
	}
	ch := contract.StatusChanged{OrderID: *l.OrderID, Status: st, Sequence: seq, OccurredAt: now().UTC()}
	if l.OccurredAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *l.OccurredAt)
		if err != nil {
			return ch, fmt.Errorf("occurredAt %q is not an RFC 3339 time", *l.OccurredAt)
		}
		ch.OccurredAt = t
	}
	if _, err := publish.StatusMessage(ch); err != nil {
		return ch, err
	}
	return ch, nil
}

func statusFromFile(ctx context.Context, c *command, from string, e env) int {
	r := e.stdin
	name := "standard input"
	if from != "-" {
		f, err := os.Open(from)
		if err != nil {
			return c.bad("--from: %v", err)
		}
		defer f.Close()
		r, name = f, from
	}
	changes, err := readChanges(r, name, e.now)
	if err != nil {
		return c.bad("%v", err)
	}
	p, t, closeFn, err := c.connect(e)
	if err != nil {
		return c.fail(err)
	}
	defer closeFn()
	w, code := c.waiter(t)
	if code >= 0 {
		return code
	}
	fmt.Fprintf(c.stdout, "sending %s from %s to %s on %s\n", changesN(len(changes)), name, p.Queue(), t.Describe)
	n, err := p.Statuses(ctx, changes, func(sent, total int) {
		fmt.Fprintf(c.stdout, "  sent %d/%d\n", sent, total)
	})
	if err != nil {
		var ie *publish.IndexError
		if errors.As(err, &ie) {
			return c.bad("%v", err)
		}
		return c.fail(fmt.Errorf("%w (%d of %d sent before the failure; sending the file again is safe: duplicates are dropped)", err, n, len(changes)))
	}
	fmt.Fprintf(c.stdout, "sent %s\n", changesN(n))
	if w != nil {
		return waitAndReport(ctx, c, w, changes)
	}
	return ExitOK
}

func changesN(n int) string { return wording.Count(n, "status change") }

func runTimeout(ctx context.Context, args []string, stdout, stderr io.Writer, e env) int {
	c := newCommand("timeout", "usage: orderstatus publish timeout --order ID [--created N] [--after 30m] [--namespace NS]",
		`Schedules the PaymentTimeoutCheck of the order's Created of sequence --created
(MessageId <order>:payment-timeout-<N>) --after from now on the broker's clock;
it cancels the order only if it is still Created at that sequence. Prints the
sequence number alone on standard output (cancel-timeout takes it). The handler
schedules the same check when it applies that Created: if the queue saw that
MessageId within its duplicate detection window, this copy is dropped, the
handler's check stands and cancel-timeout finds nothing to cancel.`, stdout, stderr)
	var orderID string
	after := contract.PaymentTimeout
	created := int64(1)
	c.fs.StringVar(&orderID, "order", "", "order `id` (the session)")
	c.fs.Int64Var(&created, "created", 1, "the `sequence` of the order's Created the check belongs to")
	c.fs.DurationVar(&after, "after", contract.PaymentTimeout, "when the check arrives, from now (a Go `duration`, e.g. 30m)")
	if code := c.parse(args); code >= 0 {
		return code
	}
	set := c.set()
	if !set["order"] {
		return c.bad("--order is required")
	}
	if created < 1 {
		return c.bad("--created %d: want at least 1", created)
	}
	if after <= 0 || after > maxAfter {
		return c.bad("--after %s: want a duration above 0 and at most %s", after, maxAfter)
	}
	if _, err := publish.TimeoutMessageFor(orderID, created); err != nil {
		return c.bad("%v", flagError(err))
	}
	p, t, closeFn, err := c.connect(e)
	if err != nil {
		return c.fail(err)
	}
	defer closeFn()
	s, err := p.ScheduleTimeoutFor(ctx, orderID, created, after)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(stdout, s.SequenceNumber)
	clock := "on the broker's clock"
	if t.DevHost != nil && t.DevHost.TimeScale > 1 {
		clock = fmt.Sprintf("on the broker's clock, which runs %g times faster than your watch here: due in %s by it",
			t.DevHost.TimeScale, time.Duration(float64(after)/t.DevHost.TimeScale).Round(100*time.Millisecond))
	}
	fmt.Fprintf(stderr, "scheduled %s %s on %s for %s (in %s %s) on %s, sequence %d\n",
		contract.SubjectPaymentTimeout, s.MessageID, p.Queue(), s.At.UTC().Format(time.RFC3339), after, clock, t.Describe, s.SequenceNumber)
	// Service Bus numbers even a dropped duplicate, so this cannot tell
	// (azservicebus Sender.ScheduleMessages has no per-message outcome).
	fmt.Fprintf(stderr, "to cancel it: orderstatus publish cancel-timeout --sequence %d; but if the handler scheduled this Created's check "+
		"(it does, with this MessageId, when it applies that Created) within the queue's duplicate-detection window, "+
		"duplicate detection dropped this copy and Service Bus still gave it a sequence number, so nothing here can tell: "+
		"the handler's own check stands, and that cancel finds nothing to cancel\n",
		s.SequenceNumber)
	return ExitOK
}

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer, e env) int {
	c := newCommand("cancel-timeout", "usage: orderstatus publish cancel-timeout --sequence N [--namespace NS]",
		`Cancels a scheduled PaymentTimeoutCheck by the sequence number 'orderstatus publish
timeout' printed. If there is none (delivered or cancelled already, or dropped as
a duplicate of the handler's own check, which stands), it says so and exits 0:
harmless, as a check cancels an order only while it is still Created.`, stdout, stderr)
	c.exitCodes = "exit codes: 0 cancelled, or nothing to cancel (the line says which), 1 connecting or\ncancelling failed, 2 bad input (one line on stderr; nothing is changed).\n"
	var seq int64
	c.fs.Int64Var(&seq, "sequence", 0, "the scheduled message's sequence `number`")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if !c.set()["sequence"] {
		return c.bad("--sequence is required")
	}
	if seq < 1 {
		return c.bad("--sequence %d: want at least 1", seq)
	}
	p, t, closeFn, err := c.connect(e)
	if err != nil {
		return c.fail(err)
	}
	defer closeFn()
	err = p.CancelTimeout(ctx, seq)
	switch {
	case errors.Is(err, publish.ErrNotScheduled):
		fmt.Fprintf(stdout, "nothing to cancel: no scheduled message %d on %s on %s: it was delivered or cancelled already, or duplicate detection dropped it "+
			"(the check with that MessageId may be the handler's own, scheduled when it applied the order's Created: that one stands); "+
			"harmless: a check cancels an order only while it is still Created\n",
			seq, p.Queue(), t.Describe)
		return ExitOK
	case err != nil:
		return c.fail(err)
	}
	fmt.Fprintf(stdout, "cancelled scheduled message %d on %s on %s\n", seq, p.Queue(), t.Describe)
	return ExitOK
}
