// Package orderfn is the OrderStatus function: it decodes the Functions
// host's invocation, validates the message, applies it to the store (or
// parks it), and answers so that the host settles the message correctly.
//
// The answer is the settlement. 200 completes the message, so it is given
// only when the effect is durable: applied, proven duplicate or stale, or
// parked on the poison queue. Everything else (a storage outage longer than
// the retry budget, a failed park, shutdown, a malformed invocation) is
// answered 5xx, so the host abandons and Service Bus redelivers or, past
// the max delivery count, dead-letters.
package orderfn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/retry"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// Applier applies messages to the order store (orderstate.Service). The
// lock is the session lock the message came under (from
// SessionActions.SessionLockedUntil; zero when the host sent none), which
// tells the cache whether another instance may have written since.
type Applier interface {
	ApplyUnder(ctx context.Context, u order.Update, lock orderstate.Lock) (orderstate.Outcome, error)
	ExpireIfUnpaid(ctx context.Context, orderID string) (orderstate.Outcome, error)
}

// Parker copies a poison message to the poison queue (parking.Parker).
type Parker interface {
	Park(ctx context.Context, o parking.Original, reason, description string) error
}

var (
	_ Applier = (*orderstate.Service)(nil)
	_ Parker  = (*parking.Parker)(nil)
)

// ResultParked is the result reported for a message copied to the poison
// queue; ResultFailed for one answered 5xx.
const (
	ResultParked = "Parked"
	ResultFailed = "Failed"
)

// DefaultRetryBudget is the in-call retry budget when Options leave it zero:
// well below the 1 minute lock of the order-status queue.
const DefaultRetryBudget = 20 * time.Second

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
}

// Handler serves POST /OrderStatus.
type Handler struct {
	applier Applier
	parker  Parker
	metrics *metrics.Metrics
	log     *slog.Logger
	opts    Options
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
	err         error // set when result is ResultFailed
	httpStatus  int
	// invocationID is the host's X-Azure-Functions-InvocationId.
	invocationID string
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
	if err != nil {
		// Not the message's fault but a host/handler protocol mismatch:
		// fail so nothing is lost; the broker dead-letters it after the
		// max delivery count, where the sweeper and runbooks see it.
		out = outcome{result: ResultFailed, err: fmt.Errorf("decode invocation: %w", err), httpStatus: http.StatusInternalServerError}
	} else {
		h.metrics.DeliveryCount.Observe(float64(msg.DeliveryCount))
		ctx, cancel := context.WithTimeout(r.Context(), h.opts.Retry.Budget)
		out = h.handle(ctx, msg)
		cancel()
	}
	out.invocationID = r.Header.Get("X-Azure-Functions-InvocationId")
	h.finish(w, msg, out, time.Since(start))
}

func (h *Handler) handle(ctx context.Context, msg hostproto.ServiceBusMessage) outcome {
	switch msg.Subject {
	case order.SubjectStatusChanged:
		u, err := order.ParseUpdate(msg.Body, msg.SessionID)
		if err != nil {
			return h.park(ctx, msg, outcome{orderID: msg.SessionID}, err)
		}
		out := outcome{orderID: u.OrderID, sequence: u.Sequence}
		lock := orderstate.Lock{Until: msg.SessionLockedUntil}
		return h.apply(ctx, msg, out, func(ctx context.Context) (orderstate.Outcome, error) { return h.applier.ApplyUnder(ctx, u, lock) })
	case order.SubjectPaymentTimeout:
		c, err := order.ParseTimeoutCheck(msg.Body, msg.SessionID)
		if err != nil {
			return h.park(ctx, msg, outcome{orderID: msg.SessionID}, err)
		}
		out := outcome{orderID: c.OrderID}
		return h.apply(ctx, msg, out, func(ctx context.Context) (orderstate.Outcome, error) { return h.applier.ExpireIfUnpaid(ctx, c.OrderID) })
	default:
		return h.park(ctx, msg, outcome{orderID: msg.SessionID}, &order.PoisonError{Reason: order.ReasonUnknownSubject,
			Description: fmt.Sprintf("no handler for subject %q", msg.Subject)})
	}
}

// retryLog logs one failed attempt that will be retried.
func (h *Handler) retryLog(operation string, msg hostproto.ServiceBusMessage, out *outcome, a retry.Attempt) {
	out.retries++
	h.metrics.Retries.WithLabelValues(operation).Inc()
	h.log.Warn("transient failure, retrying", "operation", operation, "order_id", out.orderID, "message_id", msg.MessageID,
		"delivery_count", msg.DeliveryCount, "sequence", out.sequence, "subject", msg.Subject,
		"attempt", a.Number, "wait_ms", a.Wait.Milliseconds(), "error", a.Err.Error())
}

// apply runs op with in-call retries of transient failures until ctx's
// deadline.
func (h *Handler) apply(ctx context.Context, msg hostproto.ServiceBusMessage, out outcome, op func(context.Context) (orderstate.Outcome, error)) outcome {
	var res orderstate.Outcome
	err := retry.Do(ctx, h.opts.Stop, h.opts.Retry, transient, func(ctx context.Context) error {
		var err error
		res, err = op(ctx)
		// Count every attempt's storage work, failed ones included.
		out.roundTrips += res.RoundTrips
		out.conflicts += res.Conflicts
		out.cacheHit = out.cacheHit || res.CacheHit
		return err
	}, func(a retry.Attempt) { h.retryLog("apply", msg, &out, a) })
	if err != nil {
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
	h.metrics.Parked.WithLabelValues(pe.Reason).Inc()
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

	attrs := []any{
		"order_id", out.orderID, "message_id", msg.MessageID, "delivery_count", msg.DeliveryCount,
		"sequence", out.sequence, "subject", msg.Subject, "result", out.result,
		"duration_ms", float64(d.Microseconds()) / 1000, "round_trips", out.roundTrips,
	}
	if out.cacheHit {
		attrs = append(attrs, "cache_hit", true)
	}
	if out.conflicts > 0 {
		attrs = append(attrs, "etag_conflicts", out.conflicts)
	}
	if out.retries > 0 {
		attrs = append(attrs, "retries", out.retries)
	}
	if out.gap > 0 {
		attrs = append(attrs, "gap", out.gap)
	}
	if out.reason != "" {
		attrs = append(attrs, "reason", out.reason, "description", out.description)
	}
	if out.invocationID != "" {
		attrs = append(attrs, "invocation_id", out.invocationID)
	}
	level, text := slog.LevelInfo, "message settled"
	switch {
	case out.err != nil:
		level, text = slog.LevelError, "message failed, host will abandon it"
		attrs = append(attrs, "error", out.err.Error())
		if errors.Is(out.err, parking.ErrNotConfigured) {
			text = "poison message cannot be parked: no Service Bus configured (set " +
				"ServiceBusConnection__fullyQualifiedNamespace); answering 5xx so it is not lost"
		}
	case out.result == ResultParked:
		level, text = slog.LevelWarn, "message parked on the poison queue"
	case out.gap > 0:
		level, text = slog.LevelWarn, "sequence gap: update applied after missing sequence numbers"
	}
	h.log.Log(context.Background(), level, text, attrs...)

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
	Error       string `json:"error,omitempty"`
}

// subjectLabel bounds the subject label to the known subjects.
func subjectLabel(s string) string {
	switch s {
	case order.SubjectStatusChanged, order.SubjectPaymentTimeout:
		return s
	}
	return "other"
}
