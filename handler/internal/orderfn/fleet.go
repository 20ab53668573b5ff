package orderfn

import (
	"context"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/order"
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
// (Options.Fleet) to the settle delay after this process's last reschedule
// for the store, once per such reschedule, and, when msg is a rescheduled
// copy of a status change (an outage here or on another instance, at most
// a backoff cap ago), to the settle delay after now. A failed raise is
// logged and tried again at the next success (or by the background raise);
// the message's own effect stands.
func (h *Handler) recovered(call context.Context, msg hostproto.ServiceBusMessage) {
	if h.opts.Fleet == nil {
		return
	}
	isCopy := msg.Subject == order.SubjectStatusChanged && reschedule.StateOf(original(msg)).Attempt > 0
	last := h.lastOutage.Load()
	if last <= h.raisedFor.Load() && !isCopy {
		return
	}
	ctx, cancel := context.WithTimeout(call, h.opts.ScheduleBudget)
	defer cancel()
	var now time.Time
	if isCopy {
		var err error
		if now, err = h.opts.Reschedule.Now(ctx); err != nil {
			h.log.Warn("outage recovery not recorded for the fleet: no clock", "message_id", msg.MessageID, "error", err.Error())
			return
		}
	}
	h.raise(ctx, last, now, msg.MessageID)
}

// raise raises the fleet's marker to the settle delay after the later of
// last (UnixNano of this process's last reschedule for the store; not
// raised for when it is at most raisedFor) and now (zero: none), and
// records last as raised for once it is. messageID names the message whose
// success it follows (empty: the background raise).
func (h *Handler) raise(ctx context.Context, last int64, now time.Time, messageID string) bool {
	settle := h.opts.Reschedule.Policy().Settle()
	var until time.Time
	if last > h.raisedFor.Load() {
		until = time.Unix(0, last).Add(settle)
	}
	if !now.IsZero() && now.Add(settle).After(until) {
		until = now.Add(settle)
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
	for {
		if r := h.raisedFor.Load(); last <= r || h.raisedFor.CompareAndSwap(r, last) {
			break
		}
	}
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
// settle delay after the last reschedule has passed (the marker would say
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
	settle := h.opts.Reschedule.Policy().Settle()
	var tried time.Time
	for {
		select {
		case <-h.opts.Stop.Done():
			h.raising.Store(false)
			return
		case <-tick.C:
		}
		last := h.lastOutage.Load()
		if last <= h.raisedFor.Load() {
			h.raising.Store(false)
			// A reschedule between the load and the store found the
			// raise running and left it to this loop: look again.
			if h.lastOutage.Load() <= h.raisedFor.Load() || !h.raising.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		now, err := h.now(h.opts.Stop)
		switch {
		case err != nil, !tried.IsZero() && now.Sub(tried) < h.opts.FleetRaiseEvery && !now.Before(tried):
			continue
		case now.Sub(time.Unix(0, last)) >= settle:
			// Too late to matter: every copy of that outage is due.
			for {
				if r := h.raisedFor.Load(); last <= r || h.raisedFor.CompareAndSwap(r, last) {
					break
				}
			}
			continue
		}
		tried = now
		ctx, cancel := context.WithTimeout(h.opts.Stop, min(raiseTry, h.opts.ScheduleBudget))
		h.raise(ctx, last, time.Time{}, "")
		cancel()
	}
}
