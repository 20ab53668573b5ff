package publish

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokerpub"
	"github.com/orderstatus/orderstatus/handler/internal/connect"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
	"github.com/orderstatus/orderstatus/handler/publish"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
)

// outboxFlags are the flags of the commands on a producer's outbox table.
type outboxFlags struct {
	table, tables, prefix string
}

func (o *outboxFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.table, "table", "", "the producer's outbox `table` (its own table, where outbox.Table commits)")
	fs.StringVar(&o.tables, "tables", "", "Table Storage `account`: https://<account>.table.core.windows.net or a connection string; default: OrderStore__serviceUri, else OrderStore__connectionString, else make run's Azurite")
	fs.StringVar(&o.prefix, "prefix", outbox.DefaultPrefix, "the outbox's RowKey `prefix` in the producer's partitions")
}

// check validates the flags; a message for a usage error, or "".
func (o *outboxFlags) check() string {
	if o.table == "" {
		return "--table is required"
	}
	if !tableName.MatchString(o.table) {
		return fmt.Sprintf("--table %q: want 3 to 63 letters and digits, starting with a letter", o.table)
	}
	if _, err := outbox.NewTable(nil, &outbox.TableOptions{Prefix: o.prefix}); err != nil {
		return fmt.Sprintf("--prefix: %v", err)
	}
	return ""
}

// tableName is 3 to 63 alphanumerics, starting with a letter
// (https://learn.microsoft.com/rest/api/storageservices/understanding-the-table-service-data-model#table-names).
var tableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{2,62}$`)

// openOutbox connects to Service Bus and Table Storage, the relay's two ends.
func (c *command) openOutbox(ctx context.Context, o outboxFlags, e env) (*outbox.Table, *connect.Target, string, func(), error) {
	t, closeFn, err := c.target(e, o.tables)
	if err != nil {
		return nil, nil, "", nil, err
	}
	svc, where, err := t.Tables()
	var tbl *outbox.Table
	if err == nil {
		tbl, err = outbox.NewTable(svc.NewClient(o.table), &outbox.TableOptions{Prefix: o.prefix})
	}
	if err != nil {
		closeFn()
		return nil, nil, "", nil, err
	}
	return tbl, t, where, closeFn, nil
}

func runRelay(ctx context.Context, args []string, stdout, stderr io.Writer, e env) int {
	c := newCommand("relay", "usage: orderstatus publish relay --table T [--once] [--interval 1s] [--batch 100] [--retention 168h] [--tables ACCOUNT] [--namespace NS]",
		`Relays a producer's transactional outbox (package handler/publish/outbox): sends
what its commits left pending, schedules and cancels their payment timeouts, marks
each record sent and purges sent records older than --retention. Running it beside
the producers' own relays is safe (duplicate detection drops a message sent twice).
With --once it relays until nothing is pending, purges, prints what it did and
exits; without, it runs until interrupted.`, stdout, stderr)
	var o outboxFlags
	o.register(c.fs)
	once := c.fs.Bool("once", false, "relay until nothing is pending, purge, and exit (else run until interrupted)")
	interval := c.fs.Duration("interval", outbox.DefaultInterval, "wait between passes that found less than a full batch (a Go `duration`)")
	batch := c.fs.Int("batch", outbox.DefaultBatchSize, "the most records one pass reads (`n`, 1 to 1000)")
	retention := c.fs.Duration("retention", outbox.DefaultRetention, "keep sent records this long (a Go `duration`; at least 1h: above duplicate detection's 10 minutes and the payment timeout)")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if msg := o.check(); msg != "" {
		return c.bad("%s", msg)
	}
	switch {
	case *interval <= 0 || *interval > time.Hour:
		return c.bad("--interval %s: want above 0 and at most 1h", *interval)
	case *batch < 1 || *batch > 1000:
		return c.bad("--batch %d: want 1 to 1000", *batch)
	case *retention < time.Hour:
		return c.bad("--retention %s: want at least 1h", *retention)
	}
	tbl, t, where, closeFn, err := c.openOutbox(ctx, o, e)
	if err != nil {
		return c.fail(err)
	}
	defer closeFn()
	if err := tbl.Check(ctx); errors.Is(err, outbox.ErrTableNotFound) {
		return c.fail(missingTable(o.table, where))
	}
	p := publish.New(brokerpub.Sender(t.Broker), &publish.Options{Queue: t.Queue})
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := outbox.NewRelay(tbl, p, &outbox.RelayOptions{BatchSize: *batch, Interval: *interval, Retention: *retention, Logger: logger})
	fmt.Fprintf(stdout, "relaying outbox table %s on %s to %s on %s\n", o.table, where, p.Queue(), t.Describe)
	if !*once {
		_ = r.Run(ctx)
		fmt.Fprintln(stdout, "stopped")
		return ExitOK
	}
	var total outbox.PassResult
	for {
		res, err := r.Pass(ctx)
		total.Sent += res.Sent
		total.Scheduled += res.Scheduled
		total.Cancelled += res.Cancelled
		total.Parked += res.Parked
		if err != nil {
			fmt.Fprintf(stdout, "sent %d, scheduled %d, cancelled %d, parked %d before the failure\n", total.Sent, total.Scheduled, total.Cancelled, total.Parked)
			if errors.Is(err, outbox.ErrTableNotFound) {
				return c.fail(missingTable(o.table, where))
			}
			return c.fail(fmt.Errorf("%w (what was not marked is sent again by the next run, with the same MessageIds)", err))
		}
		if res.Read < *batch || res.Waiting == res.Read {
			total.Waiting = res.Waiting
			break
		}
	}
	purged, err := r.Purge(ctx)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(stdout, "sent %d, scheduled %d, cancelled %d, parked %d, waiting %d, purged %d\n",
		total.Sent, total.Scheduled, total.Cancelled, total.Parked, total.Waiting, purged)
	return ExitOK
}

// missingTable is the failure of a relay on a table that does not exist.
func missingTable(table, where string) error {
	return fmt.Errorf("table %s does not exist on %s: check --table (the producer's deployment creates its table; 'orderstatus publish commit' creates one for trying)", table, where)
}

func runCommit(ctx context.Context, args []string, stdout, stderr io.Writer, e env) int {
	c := newCommand("commit", "usage: orderstatus publish commit --table T --order ID [--status S --sequence N [--occurred-at T]] [--schedule-timeout [--created-sequence N] [--after 30m]] [--cancel-timeout] [--partition P] [--tables ACCOUNT]",
		`Commits outgoing messages into a producer's transactional outbox table, in one
entity-group transaction in the order's partition, as outbox.Table.Commit does in
the producer's own code (there with the producer's own rows in the same
transaction). Nothing is sent: 'orderstatus publish relay' (or the producer's relay)
sends them. It creates the table if it does not exist. For trying the outbox, and
for an operator's correction that must follow the producer's earlier messages.`, stdout, stderr)
	var o outboxFlags
	o.register(c.fs)
	var orderID, status, occurred, partition string
	var seq int64
	c.fs.StringVar(&orderID, "order", "", "order `id` the messages are about")
	c.fs.StringVar(&partition, "partition", "", "the producer's partition `key` to commit in (default: the order id)")
	c.fs.StringVar(&status, "status", "", "an OrderStatusChanged with this `status` (with --sequence)")
	c.fs.Int64Var(&seq, "sequence", 0, "its sequence `number`")
	c.fs.StringVar(&occurred, "occurred-at", "", "when it happened: RFC 3339 (`time`) or a duration ago (\"31m ago\"); default now")
	schedule := c.fs.Bool("schedule-timeout", false, "schedule the PaymentTimeoutCheck of the order's Created (this commit's, or --created-sequence), --after the commit")
	createdSeq := c.fs.Int64("created-sequence", 0, "the sequence `number` of the Created the check is for, when this commit has none")
	after := c.fs.Duration("after", contract.PaymentTimeout, "the timeout's delay from the commit (a Go `duration`)")
	cancel := c.fs.Bool("cancel-timeout", false, "cancel the order's PaymentTimeoutCheck scheduled through this outbox")
	if code := c.parse(args); code >= 0 {
		return code
	}
	if msg := o.check(); msg != "" {
		return c.bad("%s", msg)
	}
	set := c.set()
	if !set["order"] {
		return c.bad("--order is required")
	}
	if partition == "" {
		partition = orderID
	}
	if err := contract.ValidateOrderID(partition); err != nil {
		return c.bad("--partition: %v", err)
	}
	var intents []outbox.Op
	switch {
	case set["status"] != set["sequence"]:
		return c.bad("--status and --sequence go together")
	case set["status"]:
		ch, err := change(orderID, status, seq, occurred, set["occurred-at"], e.now)
		if err != nil {
			return c.bad("%v", err)
		}
		intents = append(intents, outbox.Status(ch))
	case set["occurred-at"]:
		return c.bad("--occurred-at needs --status")
	}
	for _, f := range []string{"after", "created-sequence"} {
		if set[f] && !*schedule {
			return c.bad("--%s needs --schedule-timeout", f)
		}
	}
	if *schedule {
		if *after <= 0 || *after > maxAfter {
			return c.bad("--after %s: want a duration above 0 and at most %s", *after, maxAfter)
		}
		withCreated := set["status"] && status == string(contract.Created)
		switch {
		case withCreated && set["created-sequence"] && *createdSeq != seq:
			return c.bad("--created-sequence %d: this commit's Created is sequence %d", *createdSeq, seq)
		case withCreated:
			intents = append(intents, outbox.ScheduleTimeoutFor(orderID, seq, *after))
		case !set["created-sequence"]:
			return c.bad("--schedule-timeout needs the Created it checks: --status Created with it, or --created-sequence N")
		case *createdSeq < 1:
			return c.bad("--created-sequence %d: want a sequence of 1 or more", *createdSeq)
		default:
			intents = append(intents, outbox.ScheduleTimeoutFor(orderID, *createdSeq, *after))
		}
	}
	if *cancel {
		intents = append(intents, outbox.CancelTimeout(orderID))
	}
	if len(intents) == 0 {
		return c.bad("nothing to commit: give --status and --sequence, --schedule-timeout or --cancel-timeout")
	}
	for _, in := range intents {
		if err := in.(outbox.Intent).Err(); err != nil {
			return c.bad("%v", flagError(errors.Unwrap(err)))
		}
	}
	tbl, _, where, closeFn, err := c.openOutbox(ctx, o, e)
	if err != nil {
		return c.fail(err)
	}
	defer closeFn()
	if err := tbl.EnsureTable(ctx); err != nil {
		return c.fail(err)
	}
	if err := tbl.Commit(ctx, partition, intents...); err != nil {
		return c.fail(err)
	}
	them := "them"
	if len(intents) == 1 {
		them = "it"
	}
	fmt.Fprintf(stdout, "committed %s for order %s in table %s partition %s on %s; 'orderstatus publish relay --table %s' sends %s\n",
		wording.Count(len(intents), "outgoing message"), orderID, o.table, partition, where, o.table, them)
	return ExitOK
}
