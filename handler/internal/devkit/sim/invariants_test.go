package sim

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

// Row is an order's stored row.
type Row struct {
	Status       order.Status
	LastSequence int64
}

func (r Row) String() string { return fmt.Sprintf("%s/%d", r.Status, r.LastSequence) }

// Write is one successful (2xx) entity write seen on the wire.
type Write struct {
	// N numbers the writes in the order the proxy saw their answers.
	N     int
	Order string // PartitionKey
	Row
	// Insert: a POST (a new row); otherwise a conditional replace.
	Insert bool
	// IfMatch is the request's If-Match ("" when absent); ETag the answer's.
	IfMatch, ETag string
}

func (w Write) String() string {
	op := "replace"
	if w.Insert {
		op = "insert"
	}
	return fmt.Sprintf("#%d %s %s %s", w.N, op, w.Order, w.Row)
}

// Parked is a message in the poison queue.
type Parked struct {
	ParkedID, OriginalMessageID, Reason string
}

// DeadLetter is a message in the workload queue's dead-letter subqueue.
type DeadLetter struct {
	MessageID, SessionID, Reason string
	DeliveryCount                int32
}

// Observation is everything a run saw, for Check.
type Observation struct {
	// Rows are the table's rows by order id, read from the storage.
	Rows map[string]Row
	// Writes are the successful entity writes on the wire, in answer order.
	Writes []Write
	// Answers are the handler's answers.
	Answers []Answer
	// Parked is the poison queue's content.
	Parked []Parked
	// DeadLettered is the dead-letter subqueue before the replays, LeftInDLQ after.
	DeadLettered []DeadLetter
	LeftInDLQ    []DeadLetter
	// Replays maps a replay's MessageId to the MessageId it replays.
	Replays     map[string]string
	MaxDelivery int32
	// CancelledChecks are the producers' checks a Cancel removed (by MessageId).
	CancelledChecks map[string]bool
	// Host are the development host's own violations (devhost.Summary).
	Host []string
}

// Results of the handler that complete a message.
const (
	resultApplied   = string(order.Applied)
	resultDuplicate = string(order.Duplicate)
	resultStale     = string(order.Stale)
	resultParked    = "Parked"
	resultFailed    = "Failed"
)

// checker holds what Check derives once.
type checker struct {
	s Schedule
	o Observation
	v []string

	orders   map[string]Order
	messages map[string]Message // by MessageId: the first message sent with it
	// cancelled: orders whose timeout cancelled them (row Cancelled/1).
	cancelled map[string]bool
	answers   map[string][]Answer // by the MessageId a replay or copy stands for
	// checks maps the handler's own payment-timeout MessageIds to their order.
	checks map[string]string
}

func (c *checker) add(format string, args ...any) { c.v = append(c.v, fmt.Sprintf(format, args...)) }

// Check returns the invariants o breaks, as sentences naming the message,
// order or write at fault; none for a correct run:
//
//  1. Rows: each order's row is its highest sequence's status (unpaid: Cancelled/1).
//  2. Nothing lost: every message sent (or its replay) was settled;
//     nothing is left in the dead-letter queue after the replays.
//  3. From the wire, per order: one ETag chain from one insert, each move
//     allowed by contract.Transitions, each write an event sent or an expiry.
//  4. Poison: every poison message is parked exactly once with its reason.
//  5. No paid order cancelled by a timeout, unless a payment supersedes it.
//  6. Nothing completed whose effect is not durable; only the broker dead-letters.
//  7. Outages within the retry window (Faults.WithinWindow) become delays.
//
// The development host's violations (Observation.Host) are included.
func Check(s Schedule, o Observation) []string {
	c := &checker{s: s, o: o, orders: map[string]Order{}, messages: map[string]Message{},
		cancelled: map[string]bool{}, answers: map[string][]Answer{}, checks: map[string]string{}}
	for _, ord := range s.Orders {
		c.orders[ord.ID] = ord
		c.checks[reschedule.TimeoutCheckID(ord.ID, 1)] = ord.ID
		if ord.Timeout.mayExpire() && o.Rows[ord.ID] == (Row{Status: order.Cancelled, LastSequence: 1}) {
			c.cancelled[ord.ID] = true
		}
	}
	for _, m := range s.Messages {
		if _, ok := c.messages[m.Line.MessageID]; !ok {
			c.messages[m.Line.MessageID] = m
		}
	}
	for _, a := range o.Answers {
		id := c.logicalAnswer(a)
		c.answers[id] = append(c.answers[id], a)
	}
	for _, h := range o.Host {
		c.add("devhost: %s", h)
	}
	c.rows()
	c.wire()
	c.lost()
	c.poison()
	c.durable()
	c.deadLetters()
	c.window()
	return c.v
}

// logicalAnswer is the MessageId an answer stands for, through copies and replays.
func (c *checker) logicalAnswer(a Answer) string {
	if a.Original != "" {
		return c.logical(a.Original)
	}
	return c.logical(a.MessageID)
}

// 7. Within the retry window nothing is dead-lettered or parked for it.
func (c *checker) window() {
	if !c.s.Faults.WithinWindow {
		return
	}
	for _, d := range c.o.DeadLettered {
		c.add("message %s: dead-lettered (%s) by an outage shorter than the retry window", d.MessageID, d.Reason)
	}
	for _, a := range c.o.Answers {
		if a.Result == resultParked && a.Reason == order.ReasonRetryWindowExceeded {
			c.add("message %s: parked RetryWindowExceeded by an outage shorter than the retry window", a.MessageID)
		}
	}
}

// logical returns the MessageId a replay stands for (itself otherwise).
func (c *checker) logical(id string) string {
	for range 10 {
		orig, ok := c.o.Replays[id]
		if !ok {
			return id
		}
		id = orig
	}
	return id
}

// 1. Rows.
func (c *checker) rows() {
	for _, ord := range c.s.Orders {
		row, found := c.o.Rows[ord.ID]
		if !found {
			c.add("order %s: no row, want %s", ord.ID, c.legal(ord)[0])
			continue
		}
		legal := c.legal(ord)
		ok := false
		for _, l := range legal {
			ok = ok || row == l
		}
		if !ok {
			var want []string
			for _, l := range legal {
				want = append(want, l.String())
			}
			c.add("order %s: row %s, want %s", ord.ID, row, strings.Join(want, " or "))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.o.Rows)) {
		if _, ok := c.orders[id]; !ok {
			c.add("row %s (%s) belongs to no order of the schedule", id, c.o.Rows[id])
		}
	}
}

// legal returns the rows order may end with, the expected one first.
func (c *checker) legal(ord Order) []Row {
	cancelled := Row{Status: order.Cancelled, LastSequence: 1}
	switch ord.Timeout {
	case UnpaidTimeout, UnpaidNoCheck:
		return []Row{cancelled}
	}
	return []Row{ord.Last()}
}

func timeoutName(k TimeoutKind) string {
	switch k {
	case NoTimeout:
		return "no payment timeout"
	case PaidCancelledCheck:
		return "paid, its check cancelled by the producer"
	}
	return fmt.Sprintf("timeout kind %d", int(k))
}

// 3 and 5. The wire.
func (c *checker) wire() {
	byOrder := map[string][]Write{}
	for _, w := range c.o.Writes {
		byOrder[w.Order] = append(byOrder[w.Order], w)
	}
	for _, id := range slices.Sorted(maps.Keys(byOrder)) {
		ord, known := c.orders[id]
		if !known {
			for _, w := range byOrder[id] {
				c.add("write %s: no order %s in the schedule", w, id)
			}
			continue
		}
		chain := c.chain(id, byOrder[id])
		var prev, unsuperseded *Write
		paid, expired := false, false
		for i := range chain {
			w := &chain[i]
			expiry := prev != nil && w.LastSequence == prev.LastSequence &&
				prev.Status == order.Created && w.Status == order.Cancelled
			// A payment supersedes the timeout's cancellation.
			supersedes := expired && prev.Status == order.Cancelled && contract.Transitions.ProvesPayment(w.Status) &&
				contract.Transitions.Allows(order.Created, w.Status)
			if prev == nil && w.Insert && !contract.Transitions.Allows("", w.Status) {
				c.add("order %s: write %s inserts a status a new order cannot take: %s", id, w, contract.Transitions.Why("", w.Status))
			}
			if prev != nil {
				switch {
				case supersedes:
				case contract.Transitions.Terminal(prev.Status):
					c.add("order %s: write %s after the terminal %s (status regression)", id, w, prev)
				case !contract.Transitions.Allows(prev.Status, w.Status):
					c.add("order %s: write %s after %s: %s (status regression)", id, w, prev, contract.Transitions.Why(prev.Status, w.Status))
				}
				if w.LastSequence < prev.LastSequence {
					c.add("order %s: write %s after %s: LastSequence went back (regression)", id, w, prev)
				}
				if w.LastSequence == prev.LastSequence && !expiry {
					c.add("order %s: write %s after %s: sequence %d written twice (double effect)", id, w, prev, w.LastSequence)
				}
			}
			if expiry && !ord.Timeout.mayExpire() {
				// A check may come before a paid order's Paid; the Paid must then supersede it.
				unsuperseded = w
			}
			if supersedes {
				unsuperseded = nil
			}
			if !expiry && !c.sent(ord, w.Row) {
				c.add("order %s: write %s matches no event sent for the order", id, w)
			}
			if w.Status == order.Cancelled && paid && !c.sent(ord, w.Row) {
				c.add("order %s: write %s cancels a paid order (a timeout must not cancel a paid order)", id, w)
			}
			if contract.Transitions.ProvesPayment(w.Status) {
				paid = true
			}
			expired = expiry
			prev = w
		}
		if unsuperseded != nil {
			c.add("order %s: write %s expires an order that must not expire (%s), and no payment superseded it", id, unsuperseded, timeoutName(ord.Timeout))
		}
		if row, ok := c.o.Rows[id]; ok && prev != nil && prev.Row != row {
			c.add("order %s: row %s, but the last write seen is %s", id, row, prev)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.o.Rows)) {
		if _, ok := c.orders[id]; ok && len(byOrder[id]) == 0 {
			c.add("order %s: row %s, but no write of it was seen on the wire", id, c.o.Rows[id])
		}
	}
}

// sent reports whether a valid event of ord carries row.
func (c *checker) sent(ord Order, r Row) bool {
	i := r.LastSequence - 1
	return i >= 0 && i < int64(len(ord.Events)) && ord.Events[i] == r.Status
}

// chain orders the writes of one order causally: the insert, then the write
// whose If-Match is the previous ETag, and so on; misfits are violations,
// placed by when they were seen.
func (c *checker) chain(id string, ws []Write) []Write {
	var inserts []Write
	next := map[string][]Write{} // If-Match -> writes
	for _, w := range ws {
		switch {
		case w.Insert:
			inserts = append(inserts, w)
		case w.IfMatch == "" || w.IfMatch == "*":
			c.add("order %s: write %s is unconditional (If-Match %q)", id, w, w.IfMatch)
		default:
			next[w.IfMatch] = append(next[w.IfMatch], w)
		}
	}
	if len(inserts) > 1 {
		c.add("order %s: %d inserts succeeded (%s and %s), want one", id, len(inserts), inserts[0], inserts[1])
	}
	var chain []Write
	used := map[int]bool{}
	if len(inserts) > 0 {
		cur := inserts[0]
		for {
			chain = append(chain, cur)
			used[cur.N] = true
			succ := next[cur.ETag]
			if cur.ETag == "" || len(succ) == 0 {
				break
			}
			if len(succ) > 1 {
				c.add("order %s: writes %s and %s both succeeded on ETag %s (lost update)", id, succ[0], succ[1], cur.ETag)
			}
			if used[succ[0].N] {
				break
			}
			cur = succ[0]
		}
	}
	var rest []Write
	for _, w := range ws {
		if !used[w.N] {
			rest = append(rest, w)
		}
	}
	for _, w := range rest {
		if !w.Insert && w.IfMatch != "" && w.IfMatch != "*" {
			c.add("order %s: write %s (If-Match %s) follows no write seen (a write is missing from the wire log)", id, w, w.IfMatch)
		}
	}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].N < rest[j].N })
	return append(chain, rest...)
}

// 2. Nothing lost.
func (c *checker) lost() {
	for _, id := range slices.Sorted(maps.Keys(c.messages)) {
		m := c.messages[id]
		if m.Kind == KindTimeout && c.o.CancelledChecks[id] {
			continue // cancelled by its producer before it was due
		}
		var results []string
		ok := false
		for _, a := range c.answers[id] {
			results = append(results, a.Result)
			switch m.Kind {
			case KindPoison:
				ok = ok || a.Result == resultParked
			case KindTimeout:
				// Parked OrderNeverCreated: the handler's own check takes over.
				ok = ok || a.Result == resultApplied || a.Result == resultStale ||
					(a.Result == resultParked && a.Reason == order.ReasonOrderNeverCreated)
			default:
				if c.cancelled[m.Order] && m.Sequence > 1 {
					ok = ok || (a.Result == resultParked && a.Reason == order.ReasonInvalidTransition)
				} else {
					ok = ok || a.Result == resultApplied || a.Result == resultDuplicate || a.Result == resultStale
				}
			}
		}
		if !ok {
			c.add("message %s (%s): lost: never answered with a result that settles it (answers: %s)", id, m.Kind, orNone(results))
		}
		if m.Sequence > 0 && !c.cancelled[m.Order] {
			if row, found := c.o.Rows[m.Order]; found && m.Sequence > row.LastSequence {
				c.add("message %s: sequence %d is above the row's %s: neither applied nor proven stale", id, m.Sequence, row)
			}
		}
	}
	for _, d := range c.o.LeftInDLQ {
		c.add("message %s: still in the dead-letter queue after the replays (%s)", d.MessageID, d.Reason)
	}
	for _, a := range c.o.Answers {
		id := c.logicalAnswer(a)
		_, sent := c.messages[id]
		if _, own := c.checks[id]; !sent && !own {
			c.add("the handler answered %s for message %s, which was never sent", a.Result, a.MessageID)
		}
	}
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// 4. Poison.
func (c *checker) poison() {
	want := map[string]string{} // logical MessageId -> reason
	for id, m := range c.messages {
		switch {
		case m.Kind == KindPoison:
			want[id] = m.Reason
		case m.Sequence > 1 && c.cancelled[m.Order]:
			want[id] = order.ReasonInvalidTransition
		}
	}
	copies := map[string][]Parked{} // OriginalMessageId -> copies
	got := map[string][]Parked{}    // logical MessageId -> copies
	for _, p := range c.o.Parked {
		copies[p.OriginalMessageID] = append(copies[p.OriginalMessageID], p)
		id := c.logical(p.OriginalMessageID)
		got[id] = append(got[id], p)
	}
	for _, id := range slices.Sorted(maps.Keys(copies)) {
		if ps := copies[id]; len(ps) > 1 {
			var ids []string
			for _, p := range ps {
				ids = append(ids, p.ParkedID)
			}
			c.add("message %s: in the poison queue %d times (%s), want once", id, len(ps), strings.Join(ids, ", "))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		ps := got[id]
		if len(ps) == 0 {
			c.add("message %s: not in the poison queue, want it parked (%s)", id, want[id])
			continue
		}
		for _, p := range ps {
			if p.Reason != want[id] {
				c.add("message %s: parked with reason %q, want %q", p.OriginalMessageID, p.Reason, want[id])
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(got)) {
		if m, ok := c.messages[id]; ok && m.Kind == KindTimeout && got[id][0].Reason == order.ReasonOrderNeverCreated {
			continue // see lost()
		}
		if _, ok := want[id]; !ok {
			c.add("message %s: in the poison queue (%s), but it is not poison", got[id][0].OriginalMessageID, got[id][0].Reason)
		}
	}
	// The handler's own answers must give the same reasons.
	for _, a := range c.o.Answers {
		id := c.logicalAnswer(a)
		if a.Result != resultParked {
			continue
		}
		if r, ok := want[id]; ok && a.Reason != r {
			c.add("message %s: answered Parked (%s), want reason %s", a.MessageID, a.Reason, r)
		}
	}
}

// 6. Durability of what was answered as settled.
func (c *checker) durable() {
	for _, a := range c.o.Answers {
		switch a.Result {
		case resultApplied, resultDuplicate, resultStale:
		default:
			continue
		}
		row, found := c.o.Rows[a.Order]
		switch {
		case a.Subject == order.SubjectPaymentTimeout:
			if a.Result == resultApplied && row.Status != order.Cancelled && !contract.Transitions.ProvesPayment(row.Status) {
				c.add("message %s: answered Applied (timeout, delivery %d), but the row is %s, neither Cancelled nor superseded by a payment (not durable)", a.MessageID, a.DeliveryCount, row)
			}
			if a.Result == resultApplied && !c.wrote(a.Order, func(w Write) bool { return w.Status == order.Cancelled && !w.Insert }) {
				c.add("message %s: answered Applied (timeout), but no Cancelled write of %s was seen on the wire", a.MessageID, a.Order)
			}
		case a.Sequence > 0:
			if !found || row.LastSequence < a.Sequence {
				c.add("message %s: answered %s (delivery %d), but the row is %s: the effect of sequence %d is not durable",
					a.MessageID, a.Result, a.DeliveryCount, orMissing(row, found), a.Sequence)
			}
			if a.Result == resultApplied {
				m := c.messages[c.logicalAnswer(a)]
				if !c.wrote(a.Order, func(w Write) bool { return w.LastSequence == a.Sequence && w.Status == m.Status }) {
					c.add("message %s: answered Applied, but no write of %s/%d was seen on the wire", a.MessageID, m.Status, a.Sequence)
				}
			}
		}
	}
}

func orMissing(r Row, found bool) string {
	if !found {
		return "missing"
	}
	return r.String()
}

func (c *checker) wrote(id string, match func(Write) bool) bool {
	for _, w := range c.o.Writes {
		if w.Order == id && match(w) {
			return true
		}
	}
	return false
}

// 6. Dead-lettered only by the broker's rules.
func (c *checker) deadLetters() {
	for _, d := range c.o.DeadLettered {
		switch d.Reason {
		case broker.ReasonTTLExpired:
		case broker.ReasonMaxDeliveryCountExceeded:
			if d.DeliveryCount < c.o.MaxDelivery {
				c.add("message %s: dead-lettered (MaxDeliveryCountExceeded) after %d deliveries, want at least %d", d.MessageID, d.DeliveryCount, c.o.MaxDelivery)
			}
		default:
			c.add("message %s: dead-lettered with reason %q; only the broker dead-letters (MaxDeliveryCountExceeded, TTLExpiredException)", d.MessageID, d.Reason)
		}
	}
}
