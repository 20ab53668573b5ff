package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
)

// runWait is `orderstatus publish wait`: status --wait's polling alone, for a
// change sent elsewhere (a payment timeout, a relay). Exit 0 once GetOrder
// shows it, 1 if not within --timeout, 2 on bad flags or no GetOrder to ask.
func runWait(ctx context.Context, args []string, stdout, stderr io.Writer, e env) int {
	c := newLocalCommand("wait", "usage: orderstatus publish wait --order ID (--sequence N | --status S) [--timeout 30s] [--get-order-url URL]",
		`Waits until GetOrder shows the order at --sequence N or a later one, or in
--status S (given both, it waits for both), polling every 100 ms for at most
--timeout. For what no publish of yours waits on: a payment timeout firing (wait
for --status Cancelled), or an outbox relay's send. It sends nothing. Against the
development host it asks its HTTP front; against Azure pass --get-order-url.`, stdout, stderr)
	c.exitCodes = "exit codes: 0 the order got there (one line on stdout), 1 not within --timeout\n(one line on stderr says what GetOrder showed last), 2 bad input or no GetOrder\nto ask (one line on stderr).\n"
	var orderID, status, orderURL string
	var seq int64
	timeout := defaultWaitTimeout
	c.fs.StringVar(&orderID, "order", "", "order `id` to ask GetOrder about")
	c.fs.Int64Var(&seq, "sequence", 0, "wait until the order's lastSequence is this `number` or higher")
	c.fs.StringVar(&status, "status", "", "wait until the order's status is this `status`: "+contract.StatusNames()+" (any case)")
	c.fs.DurationVar(&timeout, "timeout", defaultWaitTimeout, "how long to wait, by your watch, at most 1h (a Go `duration`)")
	c.fs.StringVar(&orderURL, "get-order-url", "", "GetOrder's `URL`, with {orderId} where the id goes, e.g. https://<app>.azurewebsites.net/api/orders/{orderId}?code=<function key>; default: the development host's front")
	if code := c.parse(args); code >= 0 {
		return code
	}
	set := c.set()
	if !set["order"] {
		return c.bad("--order is required")
	}
	if err := contract.ValidateOrderID(orderID); err != nil {
		return c.bad("--order: %v", err)
	}
	if !set["sequence"] && !set["status"] {
		return c.bad("--sequence or --status is required: what to wait for")
	}
	if set["sequence"] && seq < 1 {
		return c.bad("--sequence %d: want at least 1", seq)
	}
	want, ok := contract.ParseStatus(status) // "" when not set
	if set["status"] && !ok {
		return c.bad("--status %q: want one of %s", status, contract.StatusNames())
	}
	if err := checkWaitTimeout("timeout", timeout); err != nil {
		return c.bad("%v", err)
	}
	addr := ""
	if orderURL == "" {
		ep, err := devrun.Find(e.dir)
		switch {
		case errors.Is(err, devrun.ErrNotRunning) || (err == nil && ep.HTTPAddr == ""):
			return c.bad("no GetOrder to ask: pass --get-order-url (https://<app>.azurewebsites.net/api/orders/{orderId}?code=<function key>), or start the development host with 'make run'")
		case err != nil:
			return c.fail(err)
		}
		addr = ep.HTTPAddr
	}
	tmpl, err := getOrderURL(orderURL, addr)
	if err != nil {
		return c.bad("%v", err)
	}

	target := waitTarget{sequence: seq, status: want}
	w := newWaiter(tmpl, timeout)
	var seen orderAnswer
	behind, err := w.until(ctx, []string{orderID}, func(_ string, a orderAnswer) bool {
		seen = a
		return target.reached(a)
	})
	if len(behind) == 0 && err == nil {
		fmt.Fprintf(stdout, "reached: order %s shows %s (GetOrder), waited for %s\n", orderID, seen, target)
		return ExitOK
	}
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "%s: interrupted before order %s reached %s: GetOrder says %s\n", c.name, orderID, target, behind[orderID])
	} else {
		fmt.Fprintf(stderr, "%s: order %s did not reach %s within --timeout %s: GetOrder says %s\n", c.name, orderID, target, timeout, behind[orderID])
	}
	return ExitFailure
}

// waitTarget is what wait waits for: a sequence, a status, or both.
type waitTarget struct {
	sequence int64
	status   contract.Status
}

func (t waitTarget) reached(a orderAnswer) bool {
	return a.err == "" && a.code == http.StatusOK && a.lastSequence >= t.sequence &&
		(t.status == "" || a.status == string(t.status))
}

// String says what is awaited, e.g. "sequence 2 or later".
func (t waitTarget) String() string {
	var parts []string
	if t.sequence > 0 {
		parts = append(parts, fmt.Sprintf("sequence %d or later", t.sequence))
	}
	if t.status != "" {
		parts = append(parts, "status "+string(t.status))
	}
	return strings.Join(parts, " and ")
}
