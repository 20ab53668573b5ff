package orderfn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// createdHere reports whether the outcome leaves u's order Created at u's
// sequence: u is the order's Created, applied now or before (a
// redelivery, Duplicate, whose earlier answer may have failed before its
// check was scheduled).
func createdHere(u order.Update, res orderstate.Outcome) bool {
	return u.Status == order.Created && (res.Result == order.Applied || res.Result == order.Duplicate) &&
		res.State.Status == order.Created && res.State.LastSequence == u.Sequence
}

// ensureTimeout makes sure the PaymentTimeoutCheck of u (the order's
// Created, MessageId <order>:payment-timeout-<u's sequence>), occurred at
// occurredAt, is scheduled. The row is durable already; if the schedule
// fails the call is answered 5xx, and the redelivery (Duplicate) schedules
// it again. One whose occurredAt is ahead of the clock has its check
// counted from now, and a warning line says by how much.
func (h *Handler) ensureTimeout(call context.Context, msg hostproto.ServiceBusMessage, out outcome, u order.Update, occurredAt time.Time) outcome {
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	var sc reschedule.CheckScheduled
	err := retry.Do(ctx, h.opts.Stop, retry.Policy{Budget: h.opts.ScheduleBudget}, transient, func(ctx context.Context) error {
		var err error
		sc, err = h.opts.Reschedule.ScheduleCreatedCheck(ctx, u.OrderID, u.Sequence, occurredAt)
		return err
	}, func(a retry.Attempt) { h.retryLog("timeout_check", msg, &out, a) })
	if sc.Skew > 0 {
		h.log.Warn("Created's occurredAt ahead of the clock: its payment-timeout check counts from now",
			append([]any{"order_id", u.OrderID, "message_id", msg.MessageID, "sequence", u.Sequence,
				"occurred_at", u.OccurredAt.UTC().Format(time.RFC3339Nano), "skew_ms", sc.Skew.Milliseconds(),
				"timeout_check_at", sc.At.UTC().Format(time.RFC3339Nano)}, traceAttrs(out)...)...)
	}
	if err != nil {
		h.metrics.TimeoutChecks.WithLabelValues("failed").Inc()
		out.result, out.err, out.httpStatus = ResultFailed, fmt.Errorf("schedule the payment timeout of %s: %w", u.OrderID, err), statusFor(err)
		return out
	}
	h.metrics.TimeoutChecks.WithLabelValues("scheduled").Inc()
	out.timeoutCheck = sc.At
	return out
}

// checkOnce is one attempt at a PaymentTimeoutCheck c: ExpireIfUnpaid,
// which cancels the order only while the Created c names is in effect.
// With rescheduling on, a check of the older form (CreatedSequence 0)
// reads the row first, and is resultNotDue while the Created in effect is
// not due (notDue). ExpireIfUnpaid decides again on the row it writes
// over: a Created applied in between (by another instance, after this one
// lost the session's lock) makes it Stale, never cancelled.
func (h *Handler) checkOnce(ctx context.Context, c order.TimeoutCheck) (orderstate.Outcome, error) {
	if c.CreatedSequence == 0 && h.opts.Reschedule != nil {
		row, err := h.applier.Get(ctx, c.OrderID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return orderstate.Outcome{Result: order.Stale, RoundTrips: 1}, nil
		case err != nil:
			return orderstate.Outcome{RoundTrips: 1}, err
		case row.State.Status == order.Created && h.notDue(row.State):
			return orderstate.Outcome{Result: resultNotDue, State: row.State, RoundTrips: 1}, nil
		}
		exp, err := h.applier.ExpireIfUnpaid(ctx, c.OrderID, 0)
		exp.RoundTrips++
		return exp, err
	}
	return h.applier.ExpireIfUnpaid(ctx, c.OrderID, c.CreatedSequence)
}

// OlderCheckSlack is how long before the Created in effect is due a check
// of the older form (one that names no Created) may come and still be
// taken for that Created's check: more than the clocks of a producer,
// the handler and the broker differ by. An earlier one belongs to an
// earlier Created of the order, created again since (or was scheduled
// sooner than the payment timeout): it cancels nothing.
const OlderCheckSlack = time.Minute

// notDue reports whether the Created in effect, of state st, is due more
// than OlderCheckSlack after now.
func (h *Handler) notDue(st order.State) bool {
	return st.OccurredAt.Add(h.opts.PaymentTimeout - OlderCheckSlack).After(h.opts.Reschedule.Now())
}

// ownCheck answers a check of the older form that found the Created in
// effect, of state st, not due (resultNotDue): Stale, once that Created's
// own check is scheduled (the one the handler scheduled when it applied
// it, or, for a Created an older handler applied, the first), due when
// that Created is (reschedule.Rescheduler.ScheduleCreatedCheck).
func (h *Handler) ownCheck(call context.Context, msg hostproto.ServiceBusMessage, out outcome, st order.State) outcome {
	u := order.Update{OrderID: out.orderID, Status: order.Created, Sequence: st.LastSequence, OccurredAt: st.OccurredAt}
	out = h.ensureTimeout(call, msg, out, u, st.OccurredAt)
	if out.err == nil {
		out.result = string(order.Stale)
		out.description = fmt.Sprintf("a check that names no Created, before the Created in effect (sequence %d) is due: that Created has its own check", st.LastSequence)
	}
	return out
}
