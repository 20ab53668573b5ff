package orderfn

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
	"github.com/orderstatus/orderstatus/handler/internal/metrics"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

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
	// Logged before the answer, so that no completed message lacks its line.
	l := logging.Begin(h.log, level, text).
		Str("order_id", out.orderID).Str("message_id", msg.MessageID).Int("delivery_count", int64(msg.DeliveryCount)).
		Int("sequence", out.sequence).Str("subject", msg.Subject).Str("result", out.result).
		Float("duration_ms", float64(d.Microseconds())/1000).Int("round_trips", int64(out.roundTrips))
	if out.status != "" {
		// The scheduled-surge runbook (step 2) counts Created orders by it.
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
	// No Logs on success: host.json drops Function.OrderStatus.User (docs/cost.md, Telemetry).
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

// invocationResult is the ReturnValue of an OrderStatus invocation.
type invocationResult struct {
	Result      string `json:"result"`
	OrderID     string `json:"orderId,omitempty"`
	Sequence    int64  `json:"sequence,omitempty"`
	Status      string `json:"status,omitempty"`
	Gap         int64  `json:"gap,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Description string `json:"description,omitempty"`
	// Rescheduled is the MessageId of the copy, due at Due (RFC 3339).
	Rescheduled string `json:"rescheduled,omitempty"`
	Due         string `json:"due,omitempty"`
	Error       string `json:"error,omitempty"`
}

// lags records and returns the enqueued and occurred lags of a 200 answer (-1: not applicable).
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
