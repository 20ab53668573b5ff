// Package orderfn is the OrderStatus function: it decodes the Functions host's
// invocation, applies the message to the store, and answers 200 (completing the
// message) only when the effect is durable: applied, proven duplicate or stale,
// parked, or rescheduled as a copy; anything else is 5xx and the host abandons.
// The apply runs behind in-call retries (retry.Wrap) and the breaker (circuit.Guard).
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
	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// Applier applies messages to the order store (orderstate.Service).
type Applier interface {
	ApplyUnder(ctx context.Context, u order.Update, lock orderstate.Lock) (orderstate.Outcome, error)
	ExpireIfUnpaid(ctx context.Context, orderID string, createdSeq int64) (orderstate.Outcome, error)
	// Get reads the stored row (an error wrapping store.ErrNotFound if none).
	Get(ctx context.Context, orderID string) (store.Row, error)
}

// Parker copies a poison message to the poison queue (parking.Parker).
type Parker interface {
	Park(ctx context.Context, o parking.Original, reason, description string) error
}

// Rescheduler schedules later copies and checks (reschedule.Rescheduler).
type Rescheduler interface {
	// Decide reports, among the rest, whether o is past its retry window.
	Decide(o reschedule.Original) (reschedule.Decision, error)
	// Reschedule schedules o's next copy or, past the window, says to park it.
	Reschedule(ctx context.Context, o reschedule.Original, restart bool, lastError string) (reschedule.Decision, broker.Message, error)
	// ScheduleCreatedCheck schedules the PaymentTimeoutCheck of a Created.
	ScheduleCreatedCheck(ctx context.Context, orderID string, createdSeq int64, occurredAt time.Time) (reschedule.CheckScheduled, error)
	// Now is the clock rescheduling runs on.
	Now() time.Time
}

var (
	_ Applier     = (*orderstate.Service)(nil)
	_ Parker      = (*parking.Parker)(nil)
	_ Rescheduler = (*reschedule.Rescheduler)(nil)
)

// ResultParked, ResultRescheduled, ResultFailed: a park, a copy, a 5xx.
const (
	ResultParked      = "Parked"
	ResultRescheduled = "Rescheduled"
	ResultFailed      = "Failed"
)

// Reasons a message is rescheduled (the orderstatus_rescheduled_total label).
const (
	// RescheduleTransient: the store still failed after the in-call budget.
	RescheduleTransient = "transient"
	// RescheduleCircuitOpen: the breaker is open; the store was not called.
	RescheduleCircuitOpen = "circuit_open"
	// RescheduleOrderNotFound: a PaymentTimeoutCheck whose order has no row.
	RescheduleOrderNotFound = "order_not_found"
)

// resultNotDue: a check of the older form found the Created in effect not due.
const resultNotDue order.Result = "NotDue"

// DefaultScheduleBudget bounds the Service Bus calls after the in-call budget.
const DefaultScheduleBudget = 15 * time.Second

// binding is the trigger binding's name in functions/OrderStatus/function.json.
const binding = "message"

// MaxInvocationBytes bounds the request body; a base64 256 KiB message fits.
const MaxInvocationBytes = 4 << 20

// Options configure a Handler.
type Options struct {
	// Retry bounds in-call retries; Retry.Budget is the whole call's deadline.
	Retry retry.Policy
	// Stop, when done, ends retry waits at once (shutdown); nil means never.
	Stop context.Context
	// Reschedule (nil: 5xx) reschedules failures past the budget and Created checks.
	Reschedule Rescheduler
	// Breaker, when set with Reschedule, is the store's circuit breaker.
	Breaker *circuit.Breaker
	// PaymentTimeout (default contract.PaymentTimeout) is what notDue counts.
	PaymentTimeout time.Duration
	// ScheduleBudget bounds the Service Bus calls after the in-call budget.
	ScheduleBudget time.Duration
	// Now is the clock the freshness lags are measured on (default time.Now).
	Now func() time.Time
}

// Handler serves POST /OrderStatus.
type Handler struct {
	applier Applier
	parker  Parker
	metrics *metrics.Metrics
	log     *slog.Logger
	opts    Options
	// runs tells when a failure starts a new run (its copy's backoff restarts).
	runs reschedule.Runs
}

// New returns the OrderStatus handler. All arguments are required.
func New(a Applier, p Parker, m *metrics.Metrics, log *slog.Logger, opts Options) *Handler {
	if opts.Stop == nil {
		opts.Stop = context.Background()
	}
	if opts.Retry.Budget <= 0 {
		opts.Retry.Budget = config.DefaultRetryBudgetNoReschedule
		if opts.Reschedule != nil {
			opts.Retry.Budget = config.DefaultRetryBudget
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
	// fresh: the store failed after its last success here (a new run).
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
	// traceID: the producer's trace; operationID: the host invocation's.
	traceID, operationID string
}

// ServeHTTP handles one invocation within the retry budget, parking included.
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
		msg, err = hostproto.DecodeServiceBus(body, binding)
	}
	var out outcome
	traceID, operationID := traceIDs(msg, r)
	if err != nil {
		// A protocol mismatch, not the message's fault: 5xx, nothing is lost.
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

// handle decides msg: ctx holds the in-call budget, call the whole request's.
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
			// No occurredAt: it occurred by its first message's enqueue time.
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
			// No row, or one behind the Created: it is late (or never comes); check later.
			return h.reschedule(call, msg, out, RescheduleOrderNotFound, order.ReasonOrderNeverCreated,
				fmt.Sprintf("order %s has no row", c.OrderID))
		case out.result == string(order.Stale) && c.CreatedSequence > res.State.LastSequence && !res.State.Status.Terminal():
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

func (h *Handler) retryLog(operation string, msg hostproto.ServiceBusMessage, out *outcome, a retry.Attempt) {
	out.retries++
	h.metrics.Retries.WithLabelValues(operation).Inc()
	attrs := []any{"operation", operation, "order_id", out.orderID, "message_id", msg.MessageID,
		"delivery_count", msg.DeliveryCount, "sequence", out.sequence, "subject", msg.Subject,
		"attempt", a.Number, "wait_ms", a.Wait.Milliseconds(), "error", a.Err.Error()}
	h.log.Warn("transient failure, retrying", append(attrs, traceAttrs(*out)...)...)
}

// traceIDs returns the producer's trace id (tracectx.FromProperties) and the host's (traceparent).
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

func original(msg hostproto.ServiceBusMessage) reschedule.Original {
	return reschedule.Original{
		MessageID: msg.MessageID, SessionID: msg.SessionID, SequenceNumber: msg.SequenceNumber,
		Subject: msg.Subject, ContentType: msg.ContentType, CorrelationID: msg.CorrelationID,
		EnqueuedTime: msg.EnqueuedTime, Body: msg.Body, ApplicationProperties: msg.ApplicationProperties,
	}
}

// pastWindow reports whether msg is past its retry window (false when unknown).
func (h *Handler) pastWindow(msg hostproto.ServiceBusMessage) bool {
	d, err := h.opts.Reschedule.Decide(original(msg))
	return err == nil && d.Park
}

// storeFailure reports whether the breaker counts err: transient or timed out.
func storeFailure(err error) bool {
	if err == nil || errors.Is(err, orderstate.ErrContention) {
		return false
	}
	return errors.Is(err, store.ErrTransient) || errors.Is(err, context.DeadlineExceeded)
}

// apply runs op behind retry.Wrap and circuit.Guard; with rescheduling, a failure becomes a copy.
func (h *Handler) apply(ctx, call context.Context, msg hostproto.ServiceBusMessage, out outcome, op retry.Op[orderstate.Outcome]) outcome {
	counted := func(ctx context.Context) (orderstate.Outcome, error) {
		res, err := op(ctx)
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
		// Past its window: try the store once before parking (circuit.Force).
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

// reschedule schedules a copy of msg (why: the metric's reason) or, past the
// window, parks it; 200 only once the broker accepted one, else 5xx.
func (h *Handler) reschedule(call context.Context, msg hostproto.ServiceBusMessage, out outcome, why, parkReason, lastError string) outcome {
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	orig := original(msg)
	var d reschedule.Decision
	var copied broker.Message
	forStore := why == RescheduleTransient || why == RescheduleCircuitOpen
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

// park copies msg to the poison queue for cause, retrying until ctx's deadline.
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

// statusFor is a failure's answer (both abandon): 503 if a redelivery may fix it, else 500.
func statusFor(err error) int {
	switch {
	case transient(err), errors.Is(err, retry.ErrBudgetExhausted),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
