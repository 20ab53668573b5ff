// Package orderfn is the OrderStatus function: it decodes the Functions
// host's invocation, applies the message to the store (or parks it), and
// answers so that the host settles the message correctly.
//
// The answer is the settlement. 200 completes the message, so it is given
// only when the effect is durable: applied, proven duplicate or stale,
// parked on the poison queue, or rescheduled as a copy for later. All else
// (a failed park or schedule, shutdown, a malformed invocation) is
// answered 5xx: the host abandons, and Service Bus redelivers or, past
// the max delivery count, dead-letters.
//
// The core apply is wrapped in middleware, each in its own package:
// in-call retries (retry.Wrap) behind the store's circuit breaker
// (circuit.Guard); a failure that outlasts them becomes a scheduled copy
// (reschedule), parked past the retry window. Applying a Created makes
// sure its PaymentTimeoutCheck is scheduled (checks.go), so every unpaid
// order expires whatever its producers did. The log line, the metrics and
// the host's answer are written in report.go.
package orderfn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/circuit"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
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
	// Decide tells, among the rest, whether o is past its retry window.
	Decide(o reschedule.Original) (reschedule.Decision, error)
	// Reschedule schedules o's next copy (its backoff started over when
	// restart), or, past the window, says to park it.
	Reschedule(ctx context.Context, o reschedule.Original, restart bool, lastError string) (reschedule.Decision, broker.Message, error)
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
	// runs tells when a failure starts a new run of store failures: its
	// copy's backoff starts over.
	runs reschedule.Runs
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

// original is what rescheduling keeps of msg.
func original(msg hostproto.ServiceBusMessage) reschedule.Original {
	return reschedule.Original{
		MessageID: msg.MessageID, SessionID: msg.SessionID, SequenceNumber: msg.SequenceNumber,
		Subject: msg.Subject, ContentType: msg.ContentType, CorrelationID: msg.CorrelationID,
		EnqueuedTime: msg.EnqueuedTime, Body: msg.Body, ApplicationProperties: msg.ApplicationProperties,
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

// apply runs op, the core apply, wrapped in its middleware: in-call
// retries of transient failures until ctx's deadline (retry.Wrap) behind
// the circuit breaker (circuit.Guard); with rescheduling on, a transient
// failure (or an open breaker) becomes a scheduled copy.
func (h *Handler) apply(ctx, call context.Context, msg hostproto.ServiceBusMessage, out outcome, op retry.Op[orderstate.Outcome]) outcome {
	counted := func(ctx context.Context) (orderstate.Outcome, error) {
		res, err := op(ctx)
		// Count every attempt's storage work, failed ones included.
		out.roundTrips += res.RoundTrips
		out.conflicts += res.Conflicts
		out.cacheHit = out.cacheHit || res.CacheHit
		return res, err
	}
	aborted := func(err error) bool { return errors.Is(err, context.Canceled) || h.opts.Stop.Err() != nil }
	guarded := circuit.Guard[orderstate.Outcome](h.opts.Breaker, storeFailure, aborted, retry.Once)(
		retry.Wrap[orderstate.Outcome](h.opts.Stop, h.opts.Retry, transient, func(a retry.Attempt) { h.retryLog("apply", msg, &out, a) })(counted))
	res, err := guarded(ctx)
	if errors.Is(err, circuit.ErrOpen) {
		if !h.pastWindow(msg) {
			return h.reschedule(call, msg, out, RescheduleCircuitOpen, order.ReasonRetryWindowExceeded, err.Error())
		}
		// Past its window a message is parked, but never on the
		// breaker's word alone: it tries the store once itself.
		res, err = guarded(circuit.Force(ctx))
	}
	switch {
	case err == nil && res.RoundTrips > 0 && h.opts.Reschedule != nil:
		h.runs.Answered(h.opts.Reschedule.Now())
	case storeFailure(err):
		out.fresh = h.runs.Failed()
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
	// The store answered this process since the message last failed
	// (a new run): the backoff starts over, whatever the message's
	// attempt (a copy back from a long outage would wait a whole cap
	// again, and every check with it).
	restart := forStore && h.runs.NewRun(orig, out.fresh)
	err := retry.Do(ctx, h.opts.Stop, retry.Policy{Budget: h.opts.ScheduleBudget}, transient, func(ctx context.Context) error {
		var err error
		d, copied, err = h.opts.Reschedule.Reschedule(ctx, orig, restart, lastError)
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
