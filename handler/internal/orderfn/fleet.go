package orderfn

import (
	"context"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

// raiseTick is how often (wall clock) the background raise looks at the
// rescheduling clock; it tries the store once per Options.FleetRaiseEvery
// on that clock, each try bounded by raiseTry, so that a try under way
// when the table returns (a call that hangs rather than fails) delays the
// marker by at most that.
const (
	raiseTick = 250 * time.Millisecond
	raiseTry  = 2 * time.Second
)

// recovered runs after a store call that succeeded: the order table
// answers this process. It raises the fleet's recovery marker
// (Options.Fleet) to when every copy this process scheduled for the store
// is due (outageDue), plus the Margin, once per such due time; and, when
// msg is a rescheduled copy of a status change (an outage here or on
// another instance), to the copy's RetryHorizon plus the Margin: when
// every copy its scheduler had scheduled for the store is due. A copy
// without one (from before it) raises it to the Horizon (the cap and the
// Margin) after its RetryScheduledAt, or after now. A failed raise is
// logged and tried again at the next success (or by the background raise);
// the message's own effect stands.
func (h *Handler) recovered(call context.Context, msg hostproto.ServiceBusMessage) {
	if h.opts.Fleet == nil {
		return
	}
	st := reschedule.StateOf(original(msg))
	isCopy := movesHorizon(msg) && st.Attempt > 0
	last := h.outageDue.Load()
	if last <= h.raisedFor.Load() && !isCopy {
		return
	}
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	var due time.Time
	if isCopy {
		p := h.opts.Reschedule.Policy()
		switch {
		case !st.Horizon.IsZero():
			due = st.Horizon
		case !st.ScheduledAt.IsZero():
			due = st.ScheduledAt.Add(p.WithDefaults().Cap)
		default:
			now, err := h.opts.Reschedule.Now(ctx)
			if err != nil {
				h.log.Warn("outage recovery not recorded for the fleet: no clock", "message_id", msg.MessageID, "error", err.Error())
				return
			}
			due = now.Add(p.WithDefaults().Cap)
		}
	}
	h.raise(ctx, last, due, msg.MessageID)
}

// raise raises the fleet's marker to the Margin after the later of last
// (UnixNano of outageDue; not raised for when it is at most raisedFor) and
// due (when a copy's scheduler's copies are due; zero: none), and records
// last as raised for once it is. messageID names the message whose
// success it follows (empty: the background raise).
func (h *Handler) raise(ctx context.Context, last int64, due time.Time, messageID string) bool {
	margin := h.opts.Reschedule.Policy().Margin()
	var until time.Time
	if last > h.raisedFor.Load() {
		until = time.Unix(0, last).Add(margin)
	}
	if !due.IsZero() && due.Add(margin).After(until) {
		until = due.Add(margin)
	}
	if until.IsZero() {
		return true
	}
	stored, wrote, err := h.opts.Fleet.Raise(ctx, until)
	if err != nil {
		h.log.Warn("outage recovery not recorded for the fleet yet: the recovery marker could not be raised; the next successful store call tries again",
			"message_id", messageID, "recovering_until", until.UTC().Format(time.RFC3339Nano), "error", err.Error())
		return false
	}
	raiseTo(&h.raisedFor, last)
	if wrote {
		h.log.Info("outage recovery recorded for the fleet: every instance settles a payment-timeout check of a Created order until then",
			"message_id", messageID, "recovering_until", stored.UTC().Format(time.RFC3339Nano))
	}
	return true
}

// startRaiser starts the background raise after a reschedule for the
// store, unless it runs already. It tries to raise the fleet's marker once
// per Options.FleetRaiseEvery until it succeeds (the table is back), so
// that the marker is written within that interval of the table's return
// even when this process gets no message then (a quiet fleet, the case
// the marker is for). It ends when nothing is left to raise for, when the
// Margin after outageDue has passed (the marker would say
// nothing any more), or when Options.Stop is done.
func (h *Handler) startRaiser() {
	if h.opts.Fleet == nil || !h.raising.CompareAndSwap(false, true) {
		return
	}
	go h.raiseLoop()
}

func (h *Handler) raiseLoop() {
	tick := time.NewTicker(min(raiseTick, h.opts.FleetRaiseEvery))
	defer tick.Stop()
	margin := h.opts.Reschedule.Policy().Margin()
	var tried time.Time
	for {
		select {
		case <-h.opts.Stop.Done():
			h.raising.Store(false)
			return
		case <-tick.C:
		}
		last := h.outageDue.Load()
		if last <= h.raisedFor.Load() {
			h.raising.Store(false)
			// A reschedule between the load and the store found the
			// raise running and left it to this loop: look again.
			if h.outageDue.Load() <= h.raisedFor.Load() || !h.raising.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		now, err := h.now(h.opts.Stop)
		switch {
		case err != nil, !tried.IsZero() && now.Sub(tried) < h.opts.FleetRaiseEvery && !now.Before(tried):
			continue
		case now.Sub(time.Unix(0, last)) >= margin:
			// Too late to matter: every copy of that outage is due.
			raiseTo(&h.raisedFor, last)
			continue
		}
		tried = now
		ctx, cancel := context.WithTimeout(h.opts.Stop, min(raiseTry, h.opts.ScheduleBudget))
		h.raise(ctx, last, time.Time{}, "")
		cancel()
	}
}
