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
// none, once the Created in effect is due. A check that would
// cancel settles instead while its own history, this process's reschedules
// or the fleet's recovery marker (Options.Fleet, package recovery) say that
// an outage's copies, its order's Paid among them, may still be on their
// way.
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
	"github.com/orderstatus/orderstatus/handler/internal/recovery"
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
	Decide(ctx context.Context, o reschedule.Original) (reschedule.Decision, error)
	Schedule(ctx context.Context, o reschedule.Original, d reschedule.Decision, lastError string) (broker.Message, error)
	// Restart is d with its backoff started over: due within the first
	// backoff's bound of when it was decided.
	Restart(d reschedule.Decision) reschedule.Decision
	// ScheduleSettle schedules a check's settle copy, due at until when
	// that is after now (plus a jitter below Policy.Margin); else now if
	// covers, Policy.Settle after now if not
	// (reschedule.Rescheduler.ScheduleSettle).
	ScheduleSettle(ctx context.Context, o reschedule.Original, until time.Time, covers bool) (broker.Message, time.Time, error)
	// ScheduleCreatedCheck schedules the PaymentTimeoutCheck of an
	// order's Created of sequence createdSeq
	// (reschedule.Rescheduler.ScheduleCreatedCheck).
	ScheduleCreatedCheck(ctx context.Context, orderID string, createdSeq int64, occurredAt time.Time, delayed bool) (reschedule.CheckScheduled, error)
	// Now is the clock rescheduling runs on (the broker's if it has one);
	// Policy its bounds (Policy.Settle).
	Now(ctx context.Context) (time.Time, error)
	Policy() reschedule.Policy
}

// FleetGuard is the fleet-wide recovery marker, cached for this process
// (recovery.Guard): Cached and Recovering tell whether any instance
// recorded that the order table was recovering from an outage at a time
// (when the message came due, dueAt; now, on the rescheduling clock, for
// the cache's age); Raise records it until a time.
type FleetGuard interface {
	Cached(now, at time.Time) (recovering, known bool)
	Recovering(ctx context.Context, now, at time.Time) (recovering, read bool, err error)
	Raise(ctx context.Context, until time.Time) (stored time.Time, wrote bool, err error)
	// Until is the latest marker time this process has seen (zero:
	// none): the stored marker is at least that.
	Until() time.Time
}

var (
	_ FleetGuard  = (*recovery.Guard)(nil)
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
	// RescheduleSettle: a PaymentTimeoutCheck that an outage delayed (or
	// that came while one is recent) found its order still Created; it
	// waits until the outage's copies are due, plus
	// reschedule.Policy.Margin (reschedule.Policy.Settle from now when
	// nothing tells), so that the order's own delayed messages (a Paid)
	// come back first.
	RescheduleSettle = "settle"
)

// resultSettle is the internal result of a delayed check that found its
// order Created (never answered as such: it becomes Rescheduled);
// resultNotDue that of a check of the older form that found the Created
// in effect not due (answered Stale, see ownCheck).
const (
	resultSettle order.Result = "Settle"
	resultNotDue order.Result = "NotDue"
)

// Why a check whose order is still Created settles (the answer's
// description).
const (
	settleDelayed = "order still Created after an outage delayed its check"
	settleHere    = "order still Created while copies this instance rescheduled for the order store may be on their way"
	settleFleet   = "order still Created while the fleet recovers from an outage of the order store (its recovery marker)"
	settleUnknown = "order still Created, and the rescheduling clock cannot tell whether the fleet recovers from an outage"
	settleAgain   = "order still Created after the check settled, and a failure of the order store since means the outage's copies are still coming back"
)

// orString returns a, or b when a is empty.
func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

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

// DefaultFleetRaiseEvery is Options.FleetRaiseEvery's default: the circuit
// breaker's probe interval, so that a failing store sees no more calls
// from the background raise than from the breaker's probes.
const DefaultFleetRaiseEvery = circuit.DefaultProbeInterval

// MinHostClockBudget is the least wall time an in-call budget on a faster
// host clock is given (hostproto.HeaderClockRate): the store's latency
// does not run faster with the host's clock, and a budget below a loaded
// Azurite's would fail calls the store was answering. 5 s at 20 times and
// above, 20 s at 80 times: within the lock the development host renews.
const MinHostClockBudget = 250 * time.Millisecond

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
	// (default DefaultRetryBudget) is the deadline of the whole call. An
	// invocation carrying hostproto.HeaderClockRate runs it on that clock
	// (retry.Policy.Faster): only the development host sends it.
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
	// Fleet, when set with Reschedule, carries the settle guard after an
	// outage across instances: when this process's store calls succeed
	// again after it rescheduled for the store, or when it applies a
	// rescheduled copy of a status change, it raises the marker to when
	// the copies of that outage are due (with the margin); a check that
	// would cancel settles while the marker is in the future, until its
	// time (see package recovery).
	Fleet FleetGuard
	// FleetRaiseEvery is how often, on the rescheduling clock, a process
	// that rescheduled for the store tries to raise the fleet's marker in
	// the background until it succeeds, so that the marker does not wait
	// for this process's next message (default DefaultFleetRaiseEvery).
	FleetRaiseEvery time.Duration
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
	// outageDue is the latest time (UnixNano, on the rescheduling clock)
	// a copy of a status change this process scheduled because the
	// store failed or its circuit was open comes due; 0: never. Every
	// such copy is due by then, the order's delayed Paid among them.
	// The copies of checks are left out: no check waits for another.
	outageDue atomic.Int64
	// raisedFor is the outageDue the fleet's marker was last raised for
	// (0: none), so that each outage seen here raises it once; raising
	// is set while the background raise runs (see startRaiser).
	raisedFor atomic.Int64
	raising   atomic.Bool
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
		opts.Fleet = nil   // nothing is delayed, nothing settles
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.FleetRaiseEvery <= 0 {
		opts.FleetRaiseEvery = DefaultFleetRaiseEvery
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
		ctx, budget := call, h.opts.Retry.Budget
		// On a development host whose clock runs faster, the in-call
		// budget and its waits run on that clock, as the lock does.
		if rate := hostproto.ClockRate(r); rate > 1 {
			p := h.opts.Retry.Faster(rate)
			p.Budget = max(p.Budget, min(MinHostClockBudget, budget))
			ctx, budget = context.WithValue(ctx, policyKey{}, p), p.Budget
		}
		ctx, cancel := context.WithTimeout(ctx, budget)
		out = h.handle(ctx, call, msg, traceID, operationID)
		cancel()
	}
	out.traceID, out.operationID = traceID, operationID
	out.invocationID = r.Header.Get("X-Azure-Functions-InvocationId")
	h.finish(w, msg, out, time.Since(start))
}

// policyKey carries the in-call retry policy of one invocation when it is
// not Options.Retry (hostproto.HeaderClockRate).
type policyKey struct{}

// retryPolicy is the in-call retry policy of the invocation ctx belongs
// to: Options.Retry on the host's clock.
func (h *Handler) retryPolicy(ctx context.Context) retry.Policy {
	if p, ok := ctx.Value(policyKey{}).(retry.Policy); ok {
		return p
	}
	return h.opts.Retry
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
		lock := orderstate.Lock{Until: msg.SessionLockedUntil}
		var res orderstate.Outcome
		out = h.apply(ctx, call, msg, out, func(ctx context.Context) (orderstate.Outcome, error) {
			var err error
			res, err = h.applier.ApplyUnder(ctx, u, lock)
			return res, err
		})
		if h.opts.Reschedule != nil && out.httpStatus == http.StatusOK && createdHere(u, res) {
			out = h.ensureTimeout(call, msg, out, u, res.State.OccurredAt, reschedule.StateOf(original(msg)).Delayed())
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
		// A check settles before it may cancel when an outage delayed it,
		// and also while a copy this process scheduled for the store may
		// still be on its way (outageUntil): a check
		// that came on time may otherwise overtake its order's Paid, which
		// the outage delayed and which is still waiting its backoff (the
		// bench's 30-minute outage found 31 paid orders cancelled that
		// way). Another instance may have rescheduled that Paid: the
		// fleet's marker says so (settleFleet).
		//
		// It settles until the outage's copies are due (see settleUntil),
		// not for a fixed delay from now, so that the cancellations of an
		// outage come as soon as its last copy is due. Its settle copy
		// settles once more only when an outage is still recent then (a
		// failure since moved the time on: a Paid that failed again on its
		// way back), up to reschedule.MaxSettleRounds in a row; after that
		// it cancels. Without that bound, failures that kept coming would
		// settle every check for ever and never cancel an unpaid order.
		why := settleDelayed
		st := reschedule.StateOf(original(msg))
		settling := h.opts.Reschedule != nil && st.Settling()
		guarded := h.opts.Reschedule != nil && !settling && (!st.SettleCopy() || st.SettleRound < reschedule.MaxSettleRounds)
		again := ""
		if st.SettleCopy() {
			again = settleAgain
		}
		if guarded && h.afterOutage(call, msg) {
			settling, why = true, orString(again, settleHere)
		}
		// ask: the fleet's marker must be read if the order is Created
		// (the cache cannot tell); asked is the time it is asked at. A
		// delayed check reads it too when this process knows of no recent
		// outage, to learn when the outage's copies are due.
		var ask bool
		var asked, due time.Time
		if (guarded && !settling || settling && why == settleDelayed) && h.opts.Fleet != nil {
			now, err := h.now(call)
			due = dueAt(msg, now)
			switch rec, known := h.opts.Fleet.Cached(now, due); {
			case err != nil:
				settling, why = true, settleUnknown // cannot tell: settling is the safe side
			case rec && !settling:
				settling, why = true, orString(again, settleFleet)
			case !rec:
				ask, asked = !known, now
			}
		}
		out = h.apply(ctx, call, msg, out, func(ctx context.Context) (orderstate.Outcome, error) {
			var err error
			res, err = h.checkOnce(ctx, c, settling, ask, asked, due, &why)
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
		case out.result == string(resultSettle):
			return h.settle(call, msg, out, why)
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
// Created, MessageId <order>:payment-timeout-<u's sequence>) is
// scheduled. The row is durable already; if the schedule fails the call
// is answered 5xx, and the redelivery (Duplicate) schedules it again.
//
// A Created that was itself delayed (a rescheduled copy or a replay) gets
// its check no sooner than reschedule.Policy.Settle from now: its Paid may
// be on its way back from the same outage. One whose occurredAt is ahead
// of the broker's clock has its check counted from now, and a warning
// line says by how much.
func (h *Handler) ensureTimeout(call context.Context, msg hostproto.ServiceBusMessage, out outcome, u order.Update, occurredAt time.Time, delayed bool) outcome {
	if u.OccurredAt.IsZero() {
		// The stored OccurredAt is the handler's wall clock at the
		// apply; the check is scheduled on the broker's, from its now.
		occurredAt = time.Time{}
	}
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	var sc reschedule.CheckScheduled
	err := retry.Do(ctx, h.opts.Stop, retry.Policy{Budget: h.opts.ScheduleBudget}, transient, func(ctx context.Context) error {
		var err error
		sc, err = h.opts.Reschedule.ScheduleCreatedCheck(ctx, u.OrderID, u.Sequence, occurredAt, delayed)
		return err
	}, func(a retry.Attempt) { h.retryLog("timeout_check", msg, &out, a) })
	if sc.Skew > 0 {
		h.log.Warn("Created's occurredAt ahead of the broker's clock: its payment-timeout check counts from now",
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
		Body: msg.Body, ApplicationProperties: msg.ApplicationProperties,
	}
}

// peek decides a PaymentTimeoutCheck c without writing: Stale when the
// order is past Created, has no row (State zero) or is no longer at the
// Created c names (order.CheckApplies), resultSettle when it is still
// Created at it.
func (h *Handler) peek(ctx context.Context, c order.TimeoutCheck) (orderstate.Outcome, error) {
	row, err := h.applier.Get(ctx, c.OrderID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return orderstate.Outcome{Result: order.Stale, RoundTrips: 1}, nil
	case err != nil:
		return orderstate.Outcome{RoundTrips: 1}, err
	case row.State.Status == order.Created && order.CheckApplies(&row.State, c):
		return orderstate.Outcome{Result: resultSettle, State: row.State, RoundTrips: 1}, nil
	}
	return orderstate.Outcome{Result: order.Stale, State: row.State, RoundTrips: 1}, nil
}

// checkOnce is one attempt at a PaymentTimeoutCheck c: a peek when it
// settles (resultSettle when the order is still Created at the Created c
// names), else ExpireIfUnpaid. A check that names a Created
// (CreatedSequence) peeks before it expires: the order is cancelled only
// while that Created is in effect; one of an older Created, the order
// created again since, is Stale. With rescheduling on, a check of the
// older form peeks too, and is resultNotDue while the Created in effect
// is not due (notDue). With ask, the fleet's marker is read once the row
// says Created: only a check that would cancel pays for the marker (the
// row is read first; a paid order's check ends there, as it would in
// ExpireIfUnpaid), and the marker's read is a round trip of its own. A
// check that settles anyway reads it to learn until when (settleUntil); a
// check that would cancel settles when it says so (why becomes
// settleFleet, or stays settleAgain for a settle copy).
//
// The peek and ExpireIfUnpaid are two reads, but ExpireIfUnpaid decides
// again on the row it writes over: a Created applied in between (by
// another instance, after this one lost the session's lock) makes it
// Stale, never cancelled.
func (h *Handler) checkOnce(ctx context.Context, c order.TimeoutCheck, settling, ask bool, asked, due time.Time, why *string) (orderstate.Outcome, error) {
	if !settling && !ask && c.CreatedSequence == 0 && h.opts.Reschedule == nil {
		return h.applier.ExpireIfUnpaid(ctx, c.OrderID, 0) // the older form as before: nothing tells its Created
	}
	res, err := h.peek(ctx, c)
	if err != nil || res.Result != resultSettle {
		return res, err
	}
	if c.CreatedSequence == 0 && h.opts.Reschedule != nil && h.notDue(ctx, res.State) {
		res.Result = resultNotDue
		return res, nil
	}
	if settling && !ask {
		return res, nil
	}
	if ask {
		rec, read, err := h.opts.Fleet.Recovering(ctx, asked, due)
		if read {
			res.RoundTrips++
		}
		switch {
		case settling:
			return res, nil // a failed read only leaves the until unknown
		case err != nil:
			return res, err
		case rec:
			if *why != settleAgain {
				*why = settleFleet
			}
			return res, nil
		}
	}
	exp, err := h.applier.ExpireIfUnpaid(ctx, c.OrderID, c.CreatedSequence)
	exp.RoundTrips += res.RoundTrips
	return exp, err
}

// OlderCheckSlack is how long before the Created in effect is due a check
// of the older form (one that names no Created) may come and still be
// taken for that Created's check: more than the clocks of a producer,
// the handler and the broker differ by. An earlier one belongs to an
// earlier Created of the order, created again since (or was scheduled
// sooner than the payment timeout): it cancels nothing.
const OlderCheckSlack = time.Minute

// notDue reports whether the Created in effect, of state st, is due more
// than OlderCheckSlack after now on the rescheduling clock (false when
// the clock cannot be read: the older form then acts as before).
func (h *Handler) notDue(ctx context.Context, st order.State) bool {
	now, err := h.opts.Reschedule.Now(ctx)
	return err == nil && st.OccurredAt.Add(contract.PaymentTimeout-OlderCheckSlack).After(now)
}

// ownCheck answers a check of the older form that found the Created in
// effect, of state st, not due (resultNotDue): Stale, once that Created's
// own check is scheduled (the one the handler scheduled when it applied
// it, or, for a Created an older handler applied, the first), due when
// that Created is (reschedule.Rescheduler.ScheduleCreatedCheck).
func (h *Handler) ownCheck(call context.Context, msg hostproto.ServiceBusMessage, out outcome, st order.State) outcome {
	u := order.Update{OrderID: out.orderID, Status: order.Created, Sequence: st.LastSequence, OccurredAt: st.OccurredAt}
	out = h.ensureTimeout(call, msg, out, u, st.OccurredAt, false)
	if out.err == nil {
		out.result = string(order.Stale)
		out.description = fmt.Sprintf("a check that names no Created, before the Created in effect (sequence %d) is due: that Created has its own check", st.LastSequence)
	}
	return out
}

// now is the rescheduling clock's time, within the schedule budget.
func (h *Handler) now(call context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	return h.opts.Reschedule.Now(ctx)
}

// afterOutage reports whether a copy this process scheduled because of the
// store may still be on its way, or be behind msg in its session: msg
// came due (dueAt) before outageUntil.
func (h *Handler) afterOutage(call context.Context, msg hostproto.ServiceBusMessage) bool {
	until := h.outageUntil()
	if until.IsZero() {
		return false
	}
	now, err := h.now(call)
	if err != nil {
		return true // cannot tell: settling is the safe side
	}
	return until.After(dueAt(msg, now))
}

// dueAt is when msg joined its session, as far as the handler can tell:
// its EnqueuedTimeUtc, or now when that is absent or later. Every copy for
// the store appended after it is behind it in the session, and so not
// applied yet however long ago it came due: a backlog after an outage (a
// recovering store, a slow wave) delivers a check that came due before
// the outage's horizon after the horizon has passed, with its order's
// Paid, due later, still queued behind it. The bench's 30-minute outage
// found it: two paid orders cancelled when the returning wave ran minutes
// behind.
//
// For a scheduled message EnqueuedTimeUtc is the instant Service Bus
// activated it, at or after its due time, never before: it is appended to
// the queue as if enqueued then, with a new SequenceNumber (Microsoft
// Learn, "Message sequencing and timestamps", MicrosoftDocs azure-docs
// articles/service-bus-messaging/message-sequencing.md). That is the
// instant that places it in its session, so it is what the guard compares;
// a copy due a little before it but activated after it is behind it too,
// and the guard covers that only while the copy's due time plus the
// Margin is after this instant (an activation up to the Margin late; the
// docs give no bound). membroker stamps the due time instead, which is
// the activation instant only when it activates at once. EnqueuedTimeUtc
// comes in whole seconds: an earlier time only makes the guard settle
// more, never less.
func dueAt(msg hostproto.ServiceBusMessage, now time.Time) time.Time {
	if t := msg.EnqueuedTime; !t.IsZero() && t.Before(now) {
		return t
	}
	return now
}

// outageUntil is when every copy this process scheduled for the store is
// due, plus the Margin (zero: none).
func (h *Handler) outageUntil() time.Time {
	due := h.outageDue.Load()
	if due == 0 {
		return time.Time{}
	}
	return time.Unix(0, due).Add(h.opts.Reschedule.Policy().Margin())
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

// movesHorizon reports whether a copy of msg rescheduled for the store
// moves the outage's horizon (outageDue, and the fleet's marker through
// recovered): a status change's, which may carry the Paid a check must not
// overtake; not a check's, which carries nothing another check waits for.
func movesHorizon(msg hostproto.ServiceBusMessage) bool {
	return msg.Subject == order.SubjectStatusChanged
}

// raiseTo moves v up to n (never down).
func raiseTo(v *atomic.Int64, n int64) {
	for {
		if o := v.Load(); n <= o || v.CompareAndSwap(o, n) {
			return
		}
	}
}

// settleUntil is when a check of state st that settles (for why) may
// cancel: the later of this process's outageUntil, the fleet's marker as
// this process knows it and, for a check an outage of the store delayed,
// its copy's RetryHorizon plus the Margin (zero when none is known).
//
// covers reports whether that time covers every message the check waits
// for, so that once it has passed the check settles behind them at once
// (ScheduleSettle) rather than for the settle delay. It does for a check
// that only the store delayed, and for one that came while copies for the
// store are out: every copy for the store is due by the horizons. It does
// not for a dead-letter replay (its Paid may still be in the dead-letter
// queue), for a check delayed for another reason (its Created was late:
// so may its Paid be), nor when the clock could not be read. The bench's
// 30-minute outage found the difference: a wave that took longer than the
// Margin to drain delivered the outage's last check copies just after the
// horizon, and each waited another 10 minutes to cancel.
func (h *Handler) settleUntil(st reschedule.State, why string) (until time.Time, covers bool) {
	until = h.outageUntil()
	if h.opts.Fleet != nil {
		if m := h.opts.Fleet.Until(); m.After(until) {
			until = m
		}
	}
	storeCopy := !st.Replayed && !st.Horizon.IsZero()
	if storeCopy {
		if hz := st.Horizon.Add(h.opts.Reschedule.Policy().Margin()); hz.After(until) {
			until = hz
		}
	}
	switch why {
	case settleUnknown:
		return until, false
	case settleDelayed:
		return until, storeCopy
	}
	return until, !st.Replayed
}

// settle schedules the settle copy of a check whose order is still
// Created, due at settleUntil (or the settle delay from now), and answers
// Rescheduled once Service Bus accepted it; why (one of the settle*
// texts) is the answer's description.
func (h *Handler) settle(call context.Context, msg hostproto.ServiceBusMessage, out outcome, why string) outcome {
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	var (
		copied broker.Message
		at     time.Time
	)
	until, covers := h.settleUntil(reschedule.StateOf(original(msg)), why)
	err := retry.Do(ctx, h.opts.Stop, retry.Policy{Budget: h.opts.ScheduleBudget}, transient, func(ctx context.Context) error {
		var err error
		copied, at, err = h.opts.Reschedule.ScheduleSettle(ctx, original(msg), until, covers)
		return err
	}, func(a retry.Attempt) { h.retryLog("reschedule", msg, &out, a) })
	if err != nil {
		out.result, out.err, out.httpStatus = ResultFailed, fmt.Errorf("settle %s: %w", msg.MessageID, err), statusFor(err)
		return out
	}
	h.metrics.Rescheduled.WithLabelValues(RescheduleSettle).Inc()
	out.result, out.httpStatus, out.status = ResultRescheduled, http.StatusOK, ""
	out.rescheduled, out.rescheduledAt, out.why = copied.MessageID, at, RescheduleSettle
	out.description = why
	return out
}

// pastWindow reports whether msg has been failing for longer than the
// retry window (false when that cannot be told).
func (h *Handler) pastWindow(call context.Context, msg hostproto.ServiceBusMessage) bool {
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	d, err := h.opts.Reschedule.Decide(ctx, original(msg))
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
	policy := h.retryPolicy(ctx)
	var ticket circuit.Ticket
	if b := h.opts.Breaker; b != nil {
		t, ok := b.Allow()
		switch {
		case !ok && !h.pastWindow(call, msg):
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
			// The end of a run of failures: once per run, so the
			// clock's call is rare.
			if now, err := h.now(call); err == nil {
				raiseTo(&h.answeredAt, now.UnixNano())
			}
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
	if res.RoundTrips > 0 {
		h.recovered(call, msg)
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
		if d, err = h.opts.Reschedule.Decide(ctx, orig); err != nil || d.Park {
			return err
		}
		if forStore && h.newRun(orig, out) {
			// The store answered this process since the message last
			// failed: the backoff starts over, whatever the message's
			// attempt (a copy back from a long outage would wait a whole
			// cap again, and every check with it).
			d = h.opts.Reschedule.Restart(d)
		}
		if forStore {
			// The copy carries when every copy this process scheduled
			// for the store is due, itself included (see recovered).
			d.Horizon = d.At
			if due := h.outageDue.Load(); due > d.At.UnixNano() {
				d.Horizon = time.Unix(0, due)
			}
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
	if forStore && movesHorizon(msg) {
		// Only a status change's copy moves the horizon: it may carry
		// the Paid that a check must not overtake. A check's copy
		// carries nothing another check waits for, and a returning
		// store that fails a few checks (a stall under the settled
		// checks' wave) would otherwise hold every other cancellation
		// back another round.
		raiseTo(&h.outageDue, d.At.UnixNano())
		h.startRaiser()
	}
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
	err := retry.Do(ctx, h.opts.Stop, h.retryPolicy(ctx), transient, func(ctx context.Context) error {
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
