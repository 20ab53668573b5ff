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

// createdHere reports whether res leaves u, a Created, in effect (Applied or Duplicate).
func createdHere(u order.Update, res orderstate.Outcome) bool {
	return u.Status == order.Created && (res.Result == order.Applied || res.Result == order.Duplicate) &&
		res.State.Status == order.Created && res.State.LastSequence == u.Sequence
}

// ensureTimeout schedules u's PaymentTimeoutCheck from occurredAt (now if ahead), else answers 5xx.
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

// checkOnce is one attempt at c (ExpireIfUnpaid); with rescheduling on, an older-form
// check (CreatedSequence 0) is resultNotDue while the Created in effect is notDue.
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

// OlderCheckSlack is how early an older-form check may come before the Created in effect
// is due and still count as its check: more than producer, handler and broker clocks differ by.
const OlderCheckSlack = time.Minute

// notDue reports if st's Created is due later than OlderCheckSlack from now.
func (h *Handler) notDue(st order.State) bool {
	return st.OccurredAt.Add(h.opts.PaymentTimeout - OlderCheckSlack).After(h.opts.Reschedule.Now())
}

// ownCheck answers a resultNotDue check Stale once the Created in effect (st) has its own check.
func (h *Handler) ownCheck(call context.Context, msg hostproto.ServiceBusMessage, out outcome, st order.State) outcome {
	u := order.Update{OrderID: out.orderID, Status: order.Created, Sequence: st.LastSequence, OccurredAt: st.OccurredAt}
	out = h.ensureTimeout(call, msg, out, u, st.OccurredAt)
	if out.err == nil {
		out.result = string(order.Stale)
		out.description = fmt.Sprintf("a check that names no Created, before the Created in effect (sequence %d) is due: that Created has its own check", st.LastSequence)
	}
	return out
}
