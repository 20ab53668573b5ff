package scenario

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/publish"
)

// DemoOptions tune Demo. The zero value is usable.
type DemoOptions struct {
	// Seed makes the workload reproducible (same seed, same messages).
	Seed uint64
	// Orders is the number of orders (default 300).
	Orders int
	// Now is when the demo is played (default 2026-11-29 18:00 UTC; see Demo).
	Now time.Time
}

// The demo's day: orders are created over DemoDay, ending DemoQuietEnd before
// Now, so that every event occurred before Now.
const (
	DemoDay      = 18 * time.Hour
	DemoQuietEnd = 6 * time.Hour
)

// The demo's fixed delays.
const (
	// CheckAfter is when, after it is sent, the producer's payment timeout check fires.
	CheckAfter = 10 * time.Second
	// LateReplayAfter is when the demo's late replays, each with a MessageId
	// of its own (<MessageId>:late), are sent.
	LateReplayAfter = 5 * time.Second
)

// Demo generates the built-in workload, deterministic for a seed: orders
// o-0001... with 3 to 5 OrderStatusChanged events each (MessageId
// <order>:<sequence>, SessionId the order id), interleaved across orders,
// with about one order in ten reordered, about 5% duplicate sends (same
// MessageId, or a late replay), about 5% unpaid orders with the producer's
// PaymentTimeoutCheck, and a few poison messages. Event times look like a
// real day's orders, all before o.Now, so that no occurredAt is later than
// the updatedAt the handler writes.
func Demo(o DemoOptions) []Line {
	if o.Orders <= 0 {
		o.Orders = 300
	}
	if o.Now.IsZero() {
		o.Now = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x6f72646572737461)) // "ordersta"
	// Times have their own generator, so the messages do not depend on them.
	times := rand.New(rand.NewPCG(o.Seed, 0x74696d6573)) // "times"
	g := demo{start: o.Now.UTC().Truncate(time.Second).Add(-DemoQuietEnd - DemoDay)}
	spacing := DemoDay / time.Duration(o.Orders)

	type plan struct {
		id     string
		events []Line
	}
	plans := make([]plan, o.Orders)
	paidWithTimeout := 0
	for i := range plans {
		id := fmt.Sprintf("o-%04d", i+1)
		created := g.start.Add(time.Duration(i)*spacing + jitter(times, 0, spacing))
		var statuses []order.Status
		timeout := false
		switch r := rng.IntN(100); {
		case r < 5:
			statuses, timeout = []order.Status{order.Created}, true
		case r < 25:
			statuses = []order.Status{order.Created, order.Paid, order.Shipped}
		case r < 40:
			statuses = []order.Status{order.Created, order.Paid, order.Cancelled}
		case r < 80:
			statuses = []order.Status{order.Created, order.Paid, order.Shipped, order.Delivered}
		default:
			statuses = []order.Status{order.Created, order.Paid, order.Shipped, order.Shipped, order.Delivered}
		}
		if !timeout && paidWithTimeout < 2 && len(statuses) == 3 && statuses[2] == order.Shipped {
			timeout = true // a paid order whose timeout was not cancelled
			paidWithTimeout++
		}
		var events []Line
		at := created
		for seq, st := range statuses {
			at = at.Add(afterPrevious(times, statuses, seq))
			events = append(events, g.update(id, id, st, int64(seq+1), at))
		}
		if len(events) >= 3 && rng.IntN(10) == 0 {
			k := 1 + rng.IntN(len(events)-1)
			events[k-1], events[k] = events[k], events[k-1]
		}
		if timeout {
			events = append(events, g.timeout(id, int64(slices.Index(statuses, order.Created)+1)))
		}
		plans[i] = plan{id: id, events: events}
	}

	// Poison, in orders that are not reordered.
	var late []Line
	poisonKinds := []func(id, other string) Line{
		func(id, _ string) Line {
			return Line{Subject: order.SubjectStatusChanged, SessionID: id, MessageID: id + ":bad-json",
				Body: []byte(`{"orderId":"` + id + `","status":`)}
		},
		func(id, _ string) Line {
			l := g.update(id, id, order.Paid, 90, g.start)
			l.Subject, l.MessageID = "OrderRefunded", id+":refund"
			return l
		},
		func(id, other string) Line {
			l := g.update(other, id, order.Paid, 91, g.start)
			l.MessageID = id + ":mismatch"
			return l
		},
	}
	nPoison := max(4, o.Orders/60)
	for n, k := 0, 0; n < nPoison && k < len(plans); k++ {
		p := &plans[(k*37)%len(plans)]
		last := p.events[len(p.events)-1]
		if last.Subject != order.SubjectStatusChanged || !inOrder(p.events) {
			continue
		}
		if n%4 == 3 {
			if u, err := order.ParseUpdate(last.Body, p.id); err == nil && u.Status == order.Delivered {
				p.events = append(p.events, g.update(p.id, p.id, order.Shipped, u.Sequence+1, u.OccurredAt.Add(10*time.Minute)))
				n++
			}
			continue
		}
		other := plans[(k*37+1)%len(plans)].id
		p.events = append(p.events, poisonKinds[n%4](p.id, other))
		n++
	}

	// Interleave the orders, keeping each order's own order.
	var out []Line
	next := make([]int, len(plans))
	live := make([]int, len(plans))
	for i := range live {
		live[i] = i
	}
	for len(live) > 0 {
		j := rng.IntN(min(len(live), 24)) // a moving window: orders overlap in time
		pi := live[j]
		l := plans[pi].events[next[pi]]
		next[pi]++
		if next[pi] == len(plans[pi].events) {
			live = append(live[:j], live[j+1:]...)
		}
		out = append(out, l)
		if l.ScheduleAfter == 0 && rng.IntN(20) == 0 {
			if rng.IntN(2) == 0 {
				out = append(out, l) // a producer retry: the broker drops it
			} else {
				r := l
				r.MessageID += ":late"
				r.SendAfter = LateReplayAfter
				late = append(late, r)
			}
		}
	}
	return append(out, late...)
}

// afterPrevious is how long after the order's previous event statuses[i] occurred.
func afterPrevious(rng *rand.Rand, statuses []order.Status, i int) time.Duration {
	if i == 0 {
		return 0
	}
	switch statuses[i] {
	case order.Paid:
		return jitter(rng, time.Minute, 10*time.Minute)
	case order.Shipped:
		if statuses[i-1] == order.Shipped {
			return jitter(rng, 10*time.Minute, 30*time.Minute) // a re-scan
		}
		return jitter(rng, 30*time.Minute, 3*time.Hour)
	case order.Delivered:
		return jitter(rng, time.Hour, 2*time.Hour)
	case order.Cancelled:
		return jitter(rng, 5*time.Minute, time.Hour)
	}
	return time.Minute
}

// jitter is a random duration in [lo, hi), whole seconds.
func jitter(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return (lo + time.Duration(rng.Int64N(int64(hi-lo)))).Truncate(time.Second)
}

// inOrder reports whether the status events are in sequence order.
func inOrder(events []Line) bool {
	var last int64
	for _, e := range events {
		if e.Subject != order.SubjectStatusChanged {
			continue
		}
		u, err := order.ParseUpdate(e.Body, e.SessionID)
		if err != nil || u.Sequence < last {
			return false
		}
		last = u.Sequence
	}
	return true
}

type demo struct{ start time.Time }

// update is an OrderStatusChanged in session sessionID about bodyOrder (a
// mismatch is poison on purpose), built by package publish.
func (demo) update(bodyOrder, sessionID string, st order.Status, seq int64, at time.Time) Line {
	m, err := publish.StatusMessage(contract.StatusChanged{OrderID: bodyOrder, Status: st, Sequence: seq, OccurredAt: at})
	if err != nil {
		panic("scenario: demo update: " + err.Error()) // the demo's ids, statuses and times are valid
	}
	l := FromMessage(broker.Message(m))
	l.SessionID, l.MessageID = sessionID, contract.StatusMessageID(sessionID, seq)
	return l
}

// timeout is the producer's PaymentTimeoutCheck of the order's Created createdSeq.
func (demo) timeout(id string, createdSeq int64) Line {
	m, err := publish.TimeoutMessageFor(id, createdSeq)
	if err != nil {
		panic("scenario: demo timeout: " + err.Error()) // the demo's ids are valid
	}
	l := FromMessage(broker.Message(m))
	l.ScheduleAfter = CheckAfter
	return l
}
