// Package orderfn is the OrderStatus function: it decodes the Functions
// host's invocation, validates the message, applies it to the store (or
// parks it), and answers so that the host settles the message correctly.
//
// The answer is the settlement. 200 completes the message, so it is given
// only when the effect is durable: applied, proven duplicate or stale,
// parked on the poison queue, or rescheduled (a copy scheduled for later,
// see package reschedule). Everything else (a failed park or schedule,
// shutdown, a malformed invocation, and with rescheduling off a storage
// outage longer than the retry budget) is answered 5xx, so the host
// abandons and Service Bus redelivers or, past the max delivery count,
// dead-letters.
//
// With rescheduling on (Options.Reschedule), a message that still fails
// transiently after the in-call budget is scheduled again as a copy at now
// plus a backoff, and answered 200 once the broker accepted the copy; past
// the retry window it is parked (RetryWindowExceeded) with its last error.
// A per-instance circuit breaker (Options.Breaker) stops sending every call
// to a failing store: while it is open, messages are rescheduled at once
// and one probe at a time tries the store. A PaymentTimeoutCheck for an
// order with no row yet, or a row behind the Created it names, is
// rescheduled the same way until that Created appears (OrderNeverCreated
// past the window), and applying an order's Created makes sure that
// Created's own PaymentTimeoutCheck is scheduled, so every unpaid order
// expires whatever its producers did. A check cancels only while the
// Created it names is in effect; one of the older form, which names
// none, once the Created in effect is due. A check never waits for the
// order's other messages: a Paid that occurred by the deadline supersedes
// the cancellation when it comes (order.Decide), so a change without an
// occurredAt is judged by when its first message was enqueued
// (reschedule.FirstEnqueued).
package orderfn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/circuit"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// Applier applies messages to the order store (orderstate.Service). The
// lock is the session lock the message came under (from
// SessionActions.SessionLockedUntil; zero when the host sent none), which
// tells the cache whether another instance may have written since.
type Applier interface {
	ApplyUnder(ctx context.Context, u order.Update, lock orderstate.Lock) (orderstate.Outcome, error)
	ExpireIfUnpaid(ctx context.Context, orderID string, createdSeq int64) (orderstate.Outcome, error)
	// Get reads the stored row (an error wrapping store.ErrNotFound when
	// there is none).
	Get(ctx context.Context, orderID string) (store.Row, error)
}

// Parker copies a poison message to the poison queue (parking.Parker).
type Parker interface {
	Park(ctx context.Context, o parking.Original, reason, description string) error
}

// Rescheduler schedules a copy of a failing message for later, and an
// order's PaymentTimeoutCheck (reschedule.Rescheduler).
type Rescheduler interface {
	Decide(o reschedule.Original) (reschedule.Decision, error)
	Schedule(ctx context.Context, o reschedule.Original, d reschedule.Decision, lastError string) (broker.Message, error)
	// Restart is d with its backoff started over: due within the first
	// backoff's bound of when it was decided.
	Restart(d reschedule.Decision) reschedule.Decision
	// ScheduleCreatedCheck schedules the PaymentTimeoutCheck of an
	// order's Created of sequence createdSeq, occurred at occurredAt
	// (reschedule.Rescheduler.ScheduleCreatedCheck).
	ScheduleCreatedCheck(ctx context.Context, orderID string, createdSeq int64, occurredAt time.Time) (reschedule.CheckScheduled, error)
	// Now is the clock rescheduling runs on.
	Now() time.Time
}

var (
	_ Applier     = (*orderstate.Service)(nil)
	_ Parker      = (*parking.Parker)(nil)
	_ Rescheduler = (*reschedule.Rescheduler)(nil)
)

// ResultParked is the result reported for a message copied to the poison
// queue; ResultRescheduled for one scheduled again as a copy; ResultFailed
// for one answered 5xx.
const (
	ResultParked      = "Parked"
	ResultRescheduled = "Rescheduled"
	ResultFailed      = "Failed"
)

// Reasons a message is rescheduled (the orderstatus_rescheduled_total
// label).
const (
	// RescheduleTransient: the store still failed after the in-call budget.
	RescheduleTransient = "transient"
	// RescheduleCircuitOpen: the circuit breaker is open; the store was
	// not called.
	RescheduleCircuitOpen = "circuit_open"
	// RescheduleOrderNotFound: a PaymentTimeoutCheck for an order with no
	// row yet (its Created is late).
	RescheduleOrderNotFound = "order_not_found"
)

// resultNotDue is the internal result of a check of the older form that
// found the Created in effect not due (answered Stale, see ownCheck).
const resultNotDue order.Result = "NotDue"

// DefaultRetryBudget is the in-call retry budget when Options leave it zero
// and rescheduling is off: well below the 1 minute lock of the
// order-status queue. DefaultRescheduleBudget is the budget with
// rescheduling on: long enough for a blip (a throttled request, one lost
// connection), short because a longer failure is cheaper as a scheduled
// copy than as a call holding the session.
const (
	DefaultRetryBudget      = 20 * time.Second
	DefaultRescheduleBudget = 5 * time.Second
)

// DefaultScheduleBudget bounds the Service Bus calls that follow the
// in-call budget (the copy, the timeout check, a park after the window),
// so that the whole call stays well within the 1 minute lock.
const DefaultScheduleBudget = 15 * time.Second

// MaxInvocationBytes bounds the request body (a 256 KiB Standard-tier
// message, base64-encoded, plus metadata, with room to spare).
const MaxInvocationBytes = 4 << 20

// Options configure a Handler.
type Options struct {
	// Binding is the trigger binding name in function.json (default "message").
	Binding string
	// Retry bounds in-call retries of transient failures; Retry.Budget
	// (default DefaultRetryBudget) is the deadline of the whole call.
	Retry retry.Policy
	// Stop, when done, ends retry waits at once (shutdown): the call is
	// answered 5xx. nil means never.
	Stop context.Context
	// Reschedule, when set, turns a transient failure after the budget
	// into a scheduled copy (answered 200), reschedules a
	// PaymentTimeoutCheck whose order has no row yet, and schedules a
	// PaymentTimeoutCheck for every order whose Created it applies. nil
	// is today's policy: answer 5xx after the budget.
	Reschedule Rescheduler
	// Breaker, when set with Reschedule, is the store's circuit breaker.
	Breaker *circuit.Breaker
	// PaymentTimeout is the payment timeout (default
	// contract.PaymentTimeout): a check of the older form is taken for the
	// Created in effect once that Created is this old (see notDue).
	PaymentTimeout time.Duration
	// ScheduleBudget bounds the Service Bus calls after the in-call
	// budget (default DefaultScheduleBudget).
	ScheduleBudget time.Duration
	// Now is the clock the freshness lags are measured on (default
	// time.Now).
	Now func() time.Time
}

// Handler serves POST /OrderStatus.
type Handler struct {
	applier Applier
	parker  Parker
	metrics *metrics.Metrics
	log     *slog.Logger
	opts    Options
	// failStreak counts this process's store calls that failed in a
	// row (each after its in-call retries); 0 after a success.
	failStreak atomic.Int64
	// answeredAt is when (UnixNano, on the rescheduling clock) a success
	// last ended a run of store failures here: a copy scheduled before
	// it that fails now starts its backoff over (Rescheduler.Restart).
	answeredAt atomic.Int64
}

// New returns the OrderStatus handler. All arguments are required.
func New(a Applier, p Parker, m *metrics.Metrics, log *slog.Logger, opts Options) *Handler {
	if opts.Binding == "" {
		opts.Binding = "message"
	}
	if opts.Stop == nil {
		opts.Stop = context.Background()
	}
	if opts.Retry.Budget <= 0 {
		opts.Retry.Budget = DefaultRetryBudget
		if opts.Reschedule != nil {
			opts.Retry.Budget = DefaultRescheduleBudget
		}
	}
	if opts.ScheduleBudget <= 0 {
		opts.ScheduleBudget = DefaultScheduleBudget
	}
	if opts.Reschedule == nil {
		opts.Breaker = nil // an open breaker without rescheduling would only hasten dead-lettering
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PaymentTimeout <= 0 {
		opts.PaymentTimeout = contract.PaymentTimeout
	}
	return &Handler{applier: a, parker: p, metrics: m, log: log, opts: opts}
}

// outcome is everything the answer, the log line and the metrics need.
type outcome struct {
	result      string // order.Result, ResultParked or ResultFailed
	reason      string // poison reason when parked
	description string
	status      order.Status
	orderID     string
	sequence    int64
	gap         int64
	roundTrips  int
	cacheHit    bool
	conflicts   int
	retries     int
	// fresh: the store call failed after this process's previous one
	// succeeded (a blip, not a run of failures): its copy's backoff
	// starts over (Rescheduler.Restart).
	fresh bool
	// rescheduled: the copy's MessageId, when it is due and why.
	rescheduled   string
	rescheduledAt time.Time
	why           string
	attempt       int64
	// timeoutCheck is when the check this call scheduled is due.
	timeoutCheck time.Time
	err          error // set when result is ResultFailed
	httpStatus   int
	// invocationID is the host's X-Azure-Functions-InvocationId.
	invocationID string
	// occurredAt is the update's occurredAt (zero when absent).
	occurredAt time.Time
	// traceID is the producer's trace (the message's traceparent or
	// Diagnostic-Id); operationID the trace of the host's invocation (the
	// request's traceparent header). Empty when absent.
	traceID, operationID string
}

// ServeHTTP handles one invocation. The whole call, parking included, has
// one deadline: the retry budget from the moment the request arrived, so
// that the answer comes well within the message lock.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		hostproto.WriteResponse(w, http.StatusMethodNotAllowed, hostproto.Response{Logs: []string{"OrderStatus accepts POST only"}})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxInvocationBytes+1))
	if err == nil && len(body) > MaxInvocationBytes {
		err = fmt.Errorf("invocation larger than %d bytes", MaxInvocationBytes)
	}
	var msg hostproto.ServiceBusMessage
	if err == nil {
		msg, err = hostproto.DecodeServiceBus(body, h.opts.Binding)
	}
	var out outcome
	// The trace ids go on every line of the message, the retries' too.
	traceID, operationID := traceIDs(msg, r)
	if err != nil {
		// Not the message's fault but a host/handler protocol mismatch:
		// fail so nothing is lost; the broker dead-letters it after the
		// max delivery count, where the sweeper and runbooks see it.
		out = outcome{result: ResultFailed, err: fmt.Errorf("decode invocation: %w", err), httpStatus: http.StatusInternalServerError}
	} else {
		h.metrics.DeliveryCount.Observe(float64(msg.DeliveryCount))
		call := r.Context()
		ctx, cancel := context.WithTimeout(call, h.opts.Retry.Budget)
		out = h.handle(ctx, call, msg, traceID, operationID)
		cancel()
	}
	out.traceID, out.operationID = traceID, operationID
	out.invocationID = r.Header.Get("X-Azure-Functions-InvocationId")
	h.finish(w, msg, out, time.Since(start))
}

// handle decides msg. ctx carries the in-call budget; call is the whole
// request's context, from which the Service Bus calls after the budget
// (rescheduling, the timeout check) get Options.ScheduleBudget of their own.
func (h *Handler) handle(ctx, call context.Context, msg hostproto.ServiceBusMessage, traceID, operationID string) outcome {
	base := outcome{orderID: msg.SessionID, traceID: traceID, operationID: operationID}
	switch msg.Subject {
	case order.SubjectStatusChanged:
		u, err := order.ParseUpdate(msg.Body, msg.SessionID)
		if err != nil {
			return h.park(ctx, msg, base, err)
		}
		out := base
		out.orderID, out.sequence, out.occurredAt = u.OrderID, u.Sequence, u.OccurredAt
		if u.OccurredAt.IsZero() {
			// When it occurred, as far as anyone can tell: when its
			// first message was enqueued (a copy's and a replay's carry it).
			u.OccurredAt = reschedule.FirstEnqueued(original(msg))
		}
		lock := orderstate.Lock{Until: msg.SessionLockedUntil}
		var res orderstate.Outcome
		out = h.apply(ctx, call, msg, out, func(ctx context.Context) (orderstate.Outcome, error) {
			var err error
			res, err = h.applier.ApplyUnder(ctx, u, lock)
			return res, err
		})
		if h.opts.Reschedule != nil && out.httpStatus == http.StatusOK && createdHere(u, res) {
			out = h.ensureTimeout(call, msg, out, u, res.State.OccurredAt)
		}
		return out
	case order.SubjectPaymentTimeout:
		c, err := order.ParseTimeoutCheck(msg.Body, msg.SessionID)
		if err != nil {
			return h.park(ctx, msg, base, err)
		}
		out := base
		out.orderID = c.OrderID
		var res orderstate.Outcome
		out = h.apply(ctx, call, msg, out, func(ctx context.Context) (orderstate.Outcome, error) {
			var err error
			res, err = h.checkOnce(ctx, c)
			return res, err
		})
		switch {
		case h.opts.Reschedule == nil || out.httpStatus != http.StatusOK:
		case out.result == string(order.Stale) && res.State == (order.State{}):
			// No row: the order's Created is late (or never comes).
			// Check again later; past the window, a human looks.
			return h.reschedule(call, msg, out, RescheduleOrderNotFound, order.ReasonOrderNeverCreated,
				fmt.Sprintf("order %s has no row", c.OrderID))
		case out.result == string(order.Stale) && c.CreatedSequence > res.State.LastSequence && !res.State.Status.Terminal():
			// The row is behind the Created the check names: that
			// Created is late. As for no row.
			return h.reschedule(call, msg, out, RescheduleOrderNotFound, order.ReasonOrderNeverCreated,
				fmt.Sprintf("order %s has no Created of sequence %d yet (its row is at sequence %d)", c.OrderID, c.CreatedSequence, res.State.LastSequence))
		case out.result == string(resultNotDue):
			return h.ownCheck(call, msg, out, res.State)
		}
		return out
	default:
		return h.park(ctx, msg, base, &order.PoisonError{Reason: order.ReasonUnknownSubject,
			Description: fmt.Sprintf("no handler for subject %q", msg.Subject)})
	}
}

// retryLog logs one failed attempt that will be retried.
func (h *Handler) retryLog(operation string, msg hostproto.ServiceBusMessage, out *outcome, a retry.Attempt) {
	out.retries++
	h.metrics.Retries.WithLabelValues(operation).Inc()
	attrs := []any{"operation", operation, "order_id", out.orderID, "message_id", msg.MessageID,
		"delivery_count", msg.DeliveryCount, "sequence", out.sequence, "subject", msg.Subject,
		"attempt", a.Number, "wait_ms", a.Wait.Milliseconds(), "error", a.Err.Error()}
	h.log.Warn("transient failure, retrying", append(attrs, traceAttrs(*out)...)...)
}

// traceIDs reads the producer's trace id from the message's application
// properties (tracectx.FromProperties: traceparent, else Diagnostic-Id)
// and the host's operation id from the request's traceparent header, when
// the host sends one (lenient: either may be absent).
func traceIDs(msg hostproto.ServiceBusMessage, r *http.Request) (traceID, operationID string) {
	if t, ok := tracectx.FromProperties(msg.ApplicationProperties); ok {
		traceID = t.TraceIDString()
	}
	if t, err := tracectx.Parse(r.Header.Get("traceparent")); err == nil {
		operationID = t.TraceIDString()
	}
	return traceID, operationID
}

// traceAttrs are the trace log fields of out, those that are known.
func traceAttrs(out outcome) []any {
	var attrs []any
	if out.traceID != "" {
		attrs = append(attrs, "trace_id", out.traceID)
	}
	if out.operationID != "" {
		attrs = append(attrs, "operation_id", out.operationID)
	}
	return attrs
}

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

// original is what rescheduling keeps of msg.
func original(msg hostproto.ServiceBusMessage) reschedule.Original {
	return reschedule.Original{
		MessageID: msg.MessageID, SessionID: msg.SessionID, SequenceNumber: msg.SequenceNumber,
		Subject: msg.Subject, ContentType: msg.ContentType, CorrelationID: msg.CorrelationID,
		EnqueuedTime: msg.EnqueuedTime, Body: msg.Body, ApplicationProperties: msg.ApplicationProperties,
	}
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

// newRun reports whether the store failure of orig is one of a new run
// here: the first failure after a success (out.fresh), or a copy
// scheduled before a success last ended a run of failures.
func (h *Handler) newRun(orig reschedule.Original, out outcome) bool {
	if out.fresh {
		return true
	}
	st := reschedule.StateOf(orig)
	return !st.ScheduledAt.IsZero() && st.ScheduledAt.UnixNano() < h.answeredAt.Load()
}

// raiseTo moves v up to n (never down).
func raiseTo(v *atomic.Int64, n int64) {
	for {
		if o := v.Load(); n <= o || v.CompareAndSwap(o, n) {
			return
		}
	}
}

// pastWindow reports whether msg has been failing for longer than the
// retry window (false when that cannot be told).
func (h *Handler) pastWindow(msg hostproto.ServiceBusMessage) bool {
	d, err := h.opts.Reschedule.Decide(original(msg))
	return err == nil && d.Park
}

// storeFailure reports whether err says the store failed (what the
// circuit breaker counts): a transient storage error or a call cut off by
// its deadline, not a lost race (contention) nor shutdown.
func storeFailure(err error) bool {
	if err == nil || errors.Is(err, orderstate.ErrContention) {
		return false
	}
	return errors.Is(err, store.ErrTransient) || errors.Is(err, context.DeadlineExceeded)
}

// apply runs op with in-call retries of transient failures until ctx's
// deadline, behind the circuit breaker; with rescheduling on, a transient
// failure (or an open breaker) becomes a scheduled copy.
func (h *Handler) apply(ctx, call context.Context, msg hostproto.ServiceBusMessage, out outcome, op func(context.Context) (orderstate.Outcome, error)) outcome {
	policy := h.opts.Retry
	var ticket circuit.Ticket
	if b := h.opts.Breaker; b != nil {
		t, ok := b.Allow()
		switch {
		case !ok && !h.pastWindow(msg):
			return h.reschedule(call, msg, out, RescheduleCircuitOpen, order.ReasonRetryWindowExceeded, "circuit open: the order store is failing")
		case !ok:
			// Past its window a message is parked, but never on the
			// breaker's word alone: it tries the store once itself.
			policy.Budget = time.Nanosecond
		default:
			ticket = t
			if t.Probe() {
				// One attempt: the probe holds the only way to the store.
				policy.Budget = time.Nanosecond
			}
		}
	}
	var res orderstate.Outcome
	err := retry.Do(ctx, h.opts.Stop, policy, transient, func(ctx context.Context) error {
		var err error
		res, err = op(ctx)
		// Count every attempt's storage work, failed ones included.
		out.roundTrips += res.RoundTrips
		out.conflicts += res.Conflicts
		out.cacheHit = out.cacheHit || res.CacheHit
		return err
	}, func(a retry.Attempt) { h.retryLog("apply", msg, &out, a) })
	if err != nil && !storeFailure(err) && (errors.Is(err, context.Canceled) || h.opts.Stop.Err() != nil) {
		ticket.Abort() // cut short: nothing learnt about the store
	} else {
		ticket.Done(storeFailure(err))
	}
	switch {
	case err == nil && res.RoundTrips > 0:
		// A load first: the hot path writes nothing shared.
		if h.failStreak.Load() > 0 && h.failStreak.Swap(0) > 0 && h.opts.Reschedule != nil {
			// The end of a run of failures.
			raiseTo(&h.answeredAt, h.opts.Reschedule.Now().UnixNano())
		}
	case storeFailure(err):
		out.fresh = h.failStreak.Add(1) == 1
	}
	if err != nil {
		if h.opts.Reschedule != nil && statusFor(err) == http.StatusServiceUnavailable && h.opts.Stop.Err() == nil && call.Err() == nil {
			return h.reschedule(call, msg, out, RescheduleTransient, order.ReasonRetryWindowExceeded, err.Error())
		}
		out.result, out.err, out.httpStatus = ResultFailed, err, statusFor(err)
		return out
	}
	out.result = string(res.Result)
	out.gap = res.Gap
	if res.Result == order.Applied {
		out.status = res.State.Status
	}
	if res.Result == order.InvalidTransition {
		p := res.Poison
		if p == nil {
			p = &order.PoisonError{Reason: order.ReasonInvalidTransition, Description: "invalid transition"}
		}
		return h.park(ctx, msg, out, p)
	}
	out.httpStatus = http.StatusOK
	return out
}

// reschedule schedules a copy of msg for later (why is the metric's
// reason, lastError the copy's LastError), or, past the retry window,
// parks msg with parkReason. It answers 200 only once the copy (or the
// park) was accepted; 5xx otherwise, so nothing is lost.
func (h *Handler) reschedule(call context.Context, msg hostproto.ServiceBusMessage, out outcome, why, parkReason, lastError string) outcome {
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	orig := original(msg)
	var d reschedule.Decision
	var copied broker.Message
	forStore := why == RescheduleTransient || why == RescheduleCircuitOpen
	err := retry.Do(ctx, h.opts.Stop, retry.Policy{Budget: h.opts.ScheduleBudget}, transient, func(ctx context.Context) error {
		var err error
		if d, err = h.opts.Reschedule.Decide(orig); err != nil || d.Park {
			return err
		}
		if forStore && h.newRun(orig, out) {
			// The store answered this process since the message last
			// failed: the backoff starts over, whatever the message's
			// attempt (a copy back from a long outage would wait a whole
			// cap again, and every check with it).
			d = h.opts.Reschedule.Restart(d)
		}
		copied, err = h.opts.Reschedule.Schedule(ctx, orig, d, lastError)
		return err
	}, func(a retry.Attempt) { h.retryLog("reschedule", msg, &out, a) })
	out.attempt = d.Attempt
	if err != nil {
		out.result, out.err, out.httpStatus = ResultFailed, fmt.Errorf("reschedule %s (%s, first error: %s): %w", msg.MessageID, why, lastError, err), statusFor(err)
		return out
	}
	if d.Park {
		desc := fmt.Sprintf("still failing %s after the first failure (%d attempts): %s", d.Elapsed.Round(time.Second), d.Attempt-1, lastError)
		return h.park(ctx, msg, out, &order.PoisonError{Reason: parkReason, Description: desc})
	}
	h.metrics.Rescheduled.WithLabelValues(why).Inc()
	out.result, out.httpStatus = ResultRescheduled, http.StatusOK
	out.rescheduled, out.rescheduledAt, out.why = copied.MessageID, d.At, why
	out.description = lastError
	out.status = ""
	return out
}

// park copies msg to the poison queue for the reason in cause (a
// *order.PoisonError), with in-call retries of transient send failures
// until ctx's deadline. out carries what is known of the message so far.
func (h *Handler) park(ctx context.Context, msg hostproto.ServiceBusMessage, out outcome, cause error) outcome {
	var pe *order.PoisonError
	if !errors.As(cause, &pe) {
		pe = &order.PoisonError{Reason: order.ReasonInvalidPayload, Description: cause.Error()}
	}
	out.result, out.reason, out.description, out.status = ResultParked, pe.Reason, pe.Description, ""
	orig := parking.Original{
		MessageID: msg.MessageID, SessionID: msg.SessionID, SequenceNumber: msg.SequenceNumber,
		Subject: msg.Subject, ContentType: msg.ContentType, CorrelationID: msg.CorrelationID,
		EnqueuedTime: msg.EnqueuedTime, DeliveryCount: msg.DeliveryCount,
		Body: msg.Body, ApplicationProperties: msg.ApplicationProperties,
	}
	err := retry.Do(ctx, h.opts.Stop, h.opts.Retry, transient, func(ctx context.Context) error {
		return h.parker.Park(ctx, orig, pe.Reason, pe.Description)
	}, func(a retry.Attempt) { h.retryLog("park", msg, &out, a) })
	if err != nil {
		out.result, out.err, out.httpStatus = ResultFailed, fmt.Errorf("park %s (%s): %w", msg.MessageID, pe.Reason, err), statusFor(err)
		return out
	}
	h.metrics.CountParked(pe.Reason)
	out.httpStatus = http.StatusOK
	return out
}

// transient reports whether err may go away on its own.
func transient(err error) bool {
	return errors.Is(err, store.ErrTransient) || errors.Is(err, broker.ErrTransient)
}

// statusFor is the one mapping from a failure to the host answer: 503 for
// what a redelivery may fix (outages, shutdown), 500 otherwise. Both make
// the host abandon the message.
func statusFor(err error) int {
	switch {
	case transient(err), errors.Is(err, retry.ErrBudgetExhausted),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// finish logs the attempt, records metrics and writes the answer.
func (h *Handler) finish(w http.ResponseWriter, msg hostproto.ServiceBusMessage, out outcome, d time.Duration) {
	subject := subjectLabel(msg.Subject)
	h.metrics.Messages.WithLabelValues(subject, out.result).Inc()
	h.metrics.MessageRoundTrips.WithLabelValues(subject, out.result).Add(float64(out.roundTrips))
	h.metrics.Duration.WithLabelValues(subject).Observe(d.Seconds())
	if out.cacheHit {
		h.metrics.CacheHits.Inc()
	}
	if out.conflicts > 0 {
		h.metrics.ETagConflicts.Add(float64(out.conflicts))
	}
	if out.gap > 0 {
		h.metrics.SequenceGaps.Inc()
		h.metrics.SkippedSequence.Add(float64(out.gap))
	}
	lag, occurredLag := h.lags(msg, out)

	level, text := slog.LevelInfo, "message settled"
	switch {
	case out.err != nil:
		level, text = slog.LevelError, "message failed, host will abandon it"
		if errors.Is(out.err, parking.ErrNotConfigured) {
			text = "poison message cannot be parked: no Service Bus configured (set " +
				"ServiceBusConnection__fullyQualifiedNamespace); answering 5xx so it is not lost"
		}
	case out.result == ResultParked:
		level, text = slog.LevelWarn, "message parked on the poison queue"
	case out.result == ResultRescheduled:
		level, text = slog.LevelWarn, "message rescheduled: a copy is due later"
	case out.gap > 0:
		level, text = slog.LevelWarn, "sequence gap: update applied after missing sequence numbers"
	}
	// One line per attempt, written before the answer: a process killed
	// after answering leaves no completed message without its line.
	// logging.Line writes what slog would, without its per-record cost.
	l := logging.Begin(h.log, level, text).
		Str("order_id", out.orderID).Str("message_id", msg.MessageID).Int("delivery_count", int64(msg.DeliveryCount)).
		Int("sequence", out.sequence).Str("subject", msg.Subject).Str("result", out.result).
		Float("duration_ms", float64(d.Microseconds())/1000).Int("round_trips", int64(out.roundTrips))
	if out.status != "" {
		// The status applied: the scheduled-surge runbook (step 2)
		// counts the orders Created in the last 30 minutes by it.
		l.Str("status", string(out.status))
	}
	if out.cacheHit {
		l.Bool("cache_hit", true)
	}
	if out.conflicts > 0 {
		l.Int("etag_conflicts", int64(out.conflicts))
	}
	if out.retries > 0 {
		l.Int("retries", int64(out.retries))
	}
	if out.gap > 0 {
		l.Int("gap", out.gap)
	}
	if out.reason != "" {
		l.Str("reason", out.reason).Str("description", out.description)
	}
	if id, ok := msg.ApplicationProperties[reschedule.PropOriginalMessageID].(string); ok && id != "" {
		l.Str("original_message_id", id)
	}
	if out.attempt > 0 {
		l.Int("retry_attempt", out.attempt)
	}
	if out.rescheduled != "" {
		l.Str("rescheduled_id", out.rescheduled).Str("rescheduled_at", out.rescheduledAt.UTC().Format(time.RFC3339Nano)).
			Str("reschedule_reason", out.why).Str("last_error", out.description)
	}
	if !out.timeoutCheck.IsZero() {
		l.Str("timeout_check_at", out.timeoutCheck.UTC().Format(time.RFC3339Nano))
	}
	if out.invocationID != "" {
		l.Str("invocation_id", out.invocationID)
	}
	if out.traceID != "" {
		l.Str("trace_id", out.traceID)
	}
	if out.operationID != "" {
		l.Str("operation_id", out.operationID)
	}
	if lag >= 0 {
		l.Int("lag_ms", lag.Milliseconds())
	}
	if occurredLag >= 0 {
		l.Int("occurred_lag_ms", occurredLag.Milliseconds())
	}
	if out.err != nil {
		l.Str("error", out.err.Error())
	}
	l.Write()

	rv := invocationResult{Result: out.result, OrderID: out.orderID, Sequence: out.sequence, Status: string(out.status), Gap: out.gap}
	// The stdout line above is the record of every attempt. A success's
	// answer carries no Logs line: the host would log it on
	// Function.OrderStatus.User, which host.json drops (docs/cost.md,
	// Telemetry). A failure's says why, for the dev host's warning (in
	// Azure the host ingests Logs only on success).
	var logs []string
	switch {
	case out.err != nil:
		rv.Error = out.err.Error()
		logs = []string{fmt.Sprintf("%s %s: failed: %s", msg.Subject, msg.MessageID, rv.Error)}
	case out.result == ResultParked:
		rv.Reason, rv.Description = out.reason, out.description
	case out.result == ResultRescheduled:
		rv.Rescheduled, rv.Due = out.rescheduled, out.rescheduledAt.UTC().Format(time.RFC3339)
	}
	hostproto.WriteResponse(w, out.httpStatus, hostproto.Response{Logs: logs, ReturnValue: rv})
}

// invocationResult is the ReturnValue of an OrderStatus invocation: the result, and
// what is known of the message.
type invocationResult struct {
	Result      string `json:"result"`
	OrderID     string `json:"orderId,omitempty"`
	Sequence    int64  `json:"sequence,omitempty"`
	Status      string `json:"status,omitempty"`
	Gap         int64  `json:"gap,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Description string `json:"description,omitempty"`
	// Rescheduled is the MessageId of the copy scheduled for later, due
	// at Due (RFC 3339), for a Rescheduled answer.
	Rescheduled string `json:"rescheduled,omitempty"`
	Due         string `json:"due,omitempty"`
	Error       string `json:"error,omitempty"`
}

// lags measures, for a settled message (answered 200), how old the read
// model is: from the message's EnqueuedTimeUtc to now, and for an applied
// update with an occurredAt, from occurredAt to now. Each is -1 when it
// does not apply; a clock skew that makes one negative counts as 0.
func (h *Handler) lags(msg hostproto.ServiceBusMessage, out outcome) (enqueued, occurred time.Duration) {
	enqueued, occurred = -1, -1
	if out.httpStatus != http.StatusOK {
		return enqueued, occurred
	}
	now := h.opts.Now()
	if !msg.EnqueuedTime.IsZero() {
		enqueued = max(now.Sub(msg.EnqueuedTime), 0)
		h.metrics.Lag.WithLabelValues(metrics.LagEnqueuedToSettled).Observe(enqueued.Seconds())
	}
	if out.result == string(order.Applied) && !out.occurredAt.IsZero() {
		occurred = max(now.Sub(out.occurredAt), 0)
		h.metrics.Lag.WithLabelValues(metrics.LagOccurredToApplied).Observe(occurred.Seconds())
	}
	return enqueued, occurred
}

// subjectLabel bounds the subject label to the known subjects.
func subjectLabel(s string) string {
	switch s {
	case order.SubjectStatusChanged, order.SubjectPaymentTimeout:
		return s
	}
	return "other"
}
