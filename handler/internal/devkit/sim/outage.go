package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Settings of the outage schedules: minutes on the broker's clock, run
// OutageTimeScale times faster, with the deployed max delivery count.
const (
	OutageTimeScale   = 30
	OutageMaxDelivery = 5
	// OutageRetryBudget is the in-call budget on the broker's clock (MinWallBudget at 30x).
	OutageRetryBudget = 7500 * time.Millisecond
	OutageRetryBase   = 2 * time.Second
	OutageRetryCap    = 20 * time.Second
	// The windows: the short outage (3m) is within it, the long one (4m) beyond.
	OutageShortWindow = 10 * time.Minute
	OutageLongWindow  = time.Minute
)

// GenerateOutage returns an outage schedule of seed, deterministically: the
// order store unreachable for 3 minutes (long false: within the retry
// window) or 4 (long true: messages parked RetryWindowExceeded, then
// replayed), while orders of every kind arrive.
func GenerateOutage(seed uint64, long bool) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x6f7574616765)) // "outage"
	g := &gen{rng: rng, s: Schedule{Seed: seed}}
	f := &g.s.Faults
	*f = Faults{RetryBudget: OutageRetryBudget, MaxDelivery: OutageMaxDelivery, TimeScale: OutageTimeScale,
		RetryBase: OutageRetryBase, RetryCap: OutageRetryCap, RetryWindow: OutageShortWindow, WithinWindow: true, Instances: 1}
	o := Outage{Start: g.between(5*time.Second, 20*time.Second), Duration: 3 * time.Minute, Mode: faultproxy.Drop, Long: true}
	if g.chance(50) {
		o.Mode = faultproxy.ServerBusy
	}
	if long {
		o.Duration = 4 * time.Minute
		f.RetryWindow, f.WithinWindow, f.ReplayRetryWindow = OutageLongWindow, false, true
	}
	f.Outages = []Outage{o}
	if g.chance(40) {
		f.Instances = 2
	}
	kinds := []struct {
		timeout TimeoutKind
		events  []order.Status
		overdue bool
	}{
		{NoTimeout, []order.Status{order.Created, order.Paid, order.Shipped}, false},
		{NoTimeout, []order.Status{order.Created, order.Paid, order.Shipped, order.Delivered}, false},
		{UnpaidTimeout, []order.Status{order.Created}, false},
		{UnpaidNoCheck, []order.Status{order.Created}, false},
		{UnpaidNoCheck, []order.Status{order.Created}, true},
		{NoTimeout, []order.Status{order.Created, order.Paid}, true},
		{PaidCancelledCheck, []order.Status{order.Created, order.Paid, order.Shipped}, false},
	}
	for i, k := range kinds {
		ord := Order{ID: fmt.Sprintf("o-%d", i+1), Timeout: k.timeout, Events: k.events, Overdue: k.overdue}
		// Events from just before the outage to well inside it.
		t := g.between(0, o.Start+time.Minute)
		at := make([]time.Duration, len(ord.Events))
		for j := range at {
			at[j] = t
			t += g.between(5*time.Second, 30*time.Second)
		}
		switch ord.Timeout {
		case UnpaidTimeout:
			// Due inside the outage: it fails, waits, and cancels after.
			g.add(g.timeout(ord.ID, at[0]+time.Second, g.between(30*time.Second, 90*time.Second)))
		case PaidCancelledCheck:
			g.cancelled(ord.ID, at[0]+time.Second, 30*time.Minute, at[1]+time.Second)
		}
		for j, st := range ord.Events {
			g.add(event(ord.ID, int64(j+1), st, at[j], KindEvent, ""))
		}
		g.s.Orders = append(g.s.Orders, ord)
	}
	if f.Instances == 2 && !long {
		// An instance added just after the table's return (wall clock), drawn
		// last so the rest of the schedule stays its seed's.
		end := (o.Start + o.Duration) / OutageTimeScale
		f.Scale = append(f.Scale, ScaleEvent{At: end + g.between(0, 500*time.Millisecond), Action: scenario.ScaleAdd})
	}
	if !long && g.chance(50) {
		// The returning wave delivered late: a check due just after the return,
		// ahead of its order's Paid copy; the Paid must supersede the
		// cancellation. Drawn last, as the instance above.
		f.HoldAfterReturn = OutageRetryCap + 5*OutageRetryBase
		ord := Order{ID: fmt.Sprintf("o-%d", len(kinds)+1), Events: []order.Status{order.Created, order.Paid}}
		created := g.between(0, o.Start)
		paid := o.Start + g.between(10*time.Second, o.Duration-10*time.Second)
		// Due just after the return, so its Paid's last copy is almost always later.
		due := o.Start + o.Duration + g.between(500*time.Millisecond, time.Second)
		g.add(g.timeout(ord.ID, created+time.Second, due-created-time.Second))
		g.add(event(ord.ID, 1, order.Created, created, KindEvent, ""))
		g.add(event(ord.ID, 2, order.Paid, paid, KindEvent, ""))
		g.s.Orders = append(g.s.Orders, ord)
	}
	sort.SliceStable(g.s.Messages, func(i, j int) bool {
		return g.s.Messages[i].Line.SendAfter < g.s.Messages[j].Line.SendAfter
	})
	return g.s
}
