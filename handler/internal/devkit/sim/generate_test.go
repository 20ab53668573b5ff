package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/publish"
)

// Kind says what a scheduled message is.
type Kind int

// Kinds of messages.
const (
	// KindEvent is a valid OrderStatusChanged, MessageId <order>:<seq>.
	KindEvent Kind = iota
	// KindDuplicateSend is a producer retry with the same MessageId.
	KindDuplicateSend
	// KindLateReplay is a valid event resent as <order>:<seq>:late.
	KindLateReplay
	// KindTimeout is a PaymentTimeoutCheck (<order>:payment-timeout-1).
	KindTimeout
	// KindPoison is a message that must be parked with Reason.
	KindPoison
)

var kindNames = [...]string{"event", "duplicate-send", "late-replay", "timeout", "poison"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// TimeoutKind says whether and why an order has a payment timeout.
type TimeoutKind int

// Timeout kinds.
const (
	// NoTimeout: the order has no PaymentTimeoutCheck.
	NoTimeout TimeoutKind = iota
	// RaceTimeout: the check is due close to when Paid is sent.
	RaceTimeout
	// UnpaidTimeout: the order is only created, and the check cancels it.
	UnpaidTimeout
	// UnpaidNoCheck: the order is only created, and only the handler's own check cancels it.
	UnpaidNoCheck
	// PaidCancelledCheck: the producer cancels its check after Paid.
	PaidCancelledCheck
)

// mayExpire reports whether a timeout may legally cancel an order of kind k.
func (k TimeoutKind) mayExpire() bool {
	return k == RaceTimeout || k == UnpaidTimeout || k == UnpaidNoCheck
}

// Order is one order of a schedule.
type Order struct {
	ID string
	// Events are the statuses of its valid events (Events[i]: sequence i+1).
	Events  []order.Status
	Timeout TimeoutKind
	// Reordered: the producer sends some events out of sequence order.
	Reordered bool
	// Overdue: its events happened more than the payment timeout before the run.
	Overdue bool
}

// Last returns the order's row when every event is applied and no timeout cancels it.
func (o Order) Last() Row {
	return Row{Status: o.Events[len(o.Events)-1], LastSequence: int64(len(o.Events))}
}

// Message is one message of a schedule.
type Message struct {
	// Line is what is sent; Line.SendAfter is when, since the start.
	Line  scenario.Line
	Kind  Kind
	Order string // the session
	// Sequence and Status of a valid event.
	Sequence int64
	Status   order.Status
	// Poison names the kind of poison and Reason the reason to park it with.
	Poison string
	Reason string
	// Manual: the run sends it itself (a Cancel's check), not Play.
	Manual bool
}

// Outage is a window in which the storage fails.
type Outage struct {
	Start, Duration time.Duration // since the start of the schedule
	// Mode is faultproxy.ServerBusy or faultproxy.Drop.
	Mode faultproxy.Mode
	// WritesOnly: reads pass.
	WritesOnly bool
	// Long: the window is longer than the retry budget.
	Long bool
}

// LockExpiry is a window of storage latency above the lock, renewal off.
type LockExpiry struct {
	Start, Duration, Delay time.Duration
}

// Faults are the faults of one schedule and the settings they need.
type Faults struct {
	// RetryBudget is ORDER_STATUS_RETRY_BUDGET.
	RetryBudget time.Duration
	// LockDuration overrides the queues' lock duration; MaxDelivery their max delivery count.
	LockDuration time.Duration
	MaxDelivery  int32
	Outages      []Outage
	// LoseAnswers are 1-based ordinals of entity writes whose answer is lost.
	LoseAnswers []int
	// Kills are 1-based ordinals of successful entity writes after which the handler is SIGKILLed.
	Kills      []int
	LockExpiry *LockExpiry
	// Instances is how many instances run at the start (1 to MaxInstances).
	Instances int
	// Scale are the scale events during the run, in time order.
	Scale []ScaleEvent
	// SessionIdleTimeout, when set, replaces host.json's sessionIdleTimeout.
	SessionIdleTimeout time.Duration
	// TimeScale runs the broker's clock that many times faster (Faults.wall).
	TimeScale float64
	// RetryBase, RetryCap and RetryWindow are ORDER_STATUS_RETRY_BASE, _CAP and _WINDOW.
	RetryBase, RetryCap, RetryWindow time.Duration
	// WithinWindow: every outage is shorter than the retry window.
	WithinWindow bool
	// ReplayRetryWindow: the sweeper replays the messages parked RetryWindowExceeded.
	ReplayRetryWindow bool
	// HoldAfterReturn holds the scheduled messages that long after the first outage.
	HoldAfterReturn time.Duration
}

// ScaleEvent adds, removes (SIGTERM) or kills (SIGKILL) an instance at At.
type ScaleEvent struct {
	At     time.Duration
	Action string // scenario.ScaleAdd, ScaleRemove or ScaleKill
	// Group is the instance group the event scales: "" for OrderStatus, or SweeperGroup.
	Group string
	// Pick chooses the instance to remove or kill: Pick modulo the running ones.
	Pick int
}

// SweeperGroup is the instance group of the DeadLetterSweeper timer.
const SweeperGroup = "DeadLetterSweeper"

// Cancel is a producer that schedules the PaymentTimeoutCheck of Order at
// Schedule, due After later, and cancels it at At.
type Cancel struct {
	Order               string
	Schedule, After, At time.Duration
}

// Schedule is everything one simulation run does.
type Schedule struct {
	Seed   uint64
	Orders []Order
	// Messages in send order (Line.SendAfter does not decrease).
	Messages []Message
	// Cancels are the producers' cancellations of their checks.
	Cancels []Cancel
	Faults  Faults
}

// Order returns the order with id, and whether there is one.
func (s Schedule) Order(id string) (Order, bool) {
	for _, o := range s.Orders {
		if o.ID == id {
			return o, true
		}
	}
	return Order{}, false
}

// wall is d, a duration on the broker's clock, in the handler's real time.
func (f Faults) wall(d, least time.Duration) time.Duration {
	if f.TimeScale > 1 {
		d = time.Duration(float64(d) / f.TimeScale)
	}
	return max(d, least)
}

// MinWallBudget is the least in-call budget a scaled schedule gives the handler.
const MinWallBudget = 250 * time.Millisecond

// Settings of the generator.
const (
	// DefaultRetryBudget is the in-call retry budget of most schedules.
	DefaultRetryBudget = time.Second
	// LockExpiryBudget is the budget of lock-expiry schedules.
	LockExpiryBudget = 3 * time.Second
	// LockExpiryLock is the lock duration of lock-expiry schedules.
	LockExpiryLock = 1500 * time.Millisecond
	// MaxDelivery is the queues' max delivery count in every schedule.
	MaxDelivery = 3
	// RetryBase, RetryCap and RetryWindow are Generate's rescheduling settings.
	RetryBase   = 50 * time.Millisecond
	RetryCap    = 300 * time.Millisecond
	RetryWindow = 10 * time.Minute
	// MaxInstances bounds the instances of a schedule.
	MaxInstances = 4
	// KillLock is the lock duration of schedules that kill an instance.
	KillLock = time.Second
	// ShortSessionIdle is the session idle timeout of moving-session schedules.
	ShortSessionIdle = 250 * time.Millisecond
)

// The poison kinds and the reasons they must be parked with.
var poisonKinds = []struct{ name, reason string }{
	{"bad-json", order.ReasonInvalidPayload},
	{"unknown-subject", order.ReasonUnknownSubject},
	{"session-mismatch", order.ReasonInvalidPayload},
	{"unknown-status", order.ReasonInvalidPayload},
	{"sequence-zero", order.ReasonInvalidPayload},
	{"timeout-mismatch", order.ReasonInvalidPayload},
}

// Generate returns the schedule of seed, deterministically: orders, duplicate
// sends and late replays, poison, and storage and process faults.
func Generate(seed uint64) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x73696d756c617465)) // "simulate"
	g := &gen{rng: rng, s: Schedule{Seed: seed}}
	g.s.Faults = Faults{RetryBudget: DefaultRetryBudget, MaxDelivery: MaxDelivery,
		RetryBase: RetryBase, RetryCap: RetryCap, RetryWindow: RetryWindow}
	g.orders()
	g.duplicates()
	g.poison()
	g.faults()
	g.instances() // the draws above stay those of earlier schedules
	g.producers() // for the same reason
	g.sweepers()  // last, for the same reason
	sort.SliceStable(g.s.Messages, func(i, j int) bool {
		return g.s.Messages[i].Line.SendAfter < g.s.Messages[j].Line.SendAfter
	})
	return g.s
}

type gen struct {
	rng *rand.Rand
	s   Schedule
	end time.Duration // the latest send so far
}

func (g *gen) chance(percent int) bool { return g.rng.IntN(100) < percent }

// between returns a duration in [lo, hi], in whole milliseconds.
func (g *gen) between(lo, hi time.Duration) time.Duration {
	ms := int64(lo / time.Millisecond)
	span := int64((hi-lo)/time.Millisecond) + 1
	return time.Duration(ms+g.rng.Int64N(span)) * time.Millisecond
}

func (g *gen) add(m Message) {
	g.s.Messages = append(g.s.Messages, m)
	g.end = max(g.end, m.Line.SendAfter)
}

func (g *gen) orders() {
	n := 4 + g.rng.IntN(7)
	races := 0
	if g.chance(60) {
		races = 1 + g.rng.IntN(2)
	}
	unpaid := 0
	if g.chance(35) {
		unpaid = 1
	}
	reorder := g.chance(60)
	for i := range n {
		o := Order{ID: fmt.Sprintf("o-%d", i+1)}
		switch {
		case i < races:
			o.Timeout = RaceTimeout
			o.Events = []order.Status{order.Created, order.Paid}
			if g.chance(50) {
				o.Events = append(o.Events, order.Shipped)
			}
		case i < races+unpaid:
			o.Timeout = UnpaidTimeout
			o.Events = []order.Status{order.Created}
		default:
			patterns := [][]order.Status{
				{order.Created, order.Paid, order.Shipped},
				{order.Created, order.Paid, order.Cancelled},
				{order.Created, order.Paid, order.Shipped, order.Delivered},
				{order.Created, order.Paid, order.Shipped, order.Delivered},
				{order.Created, order.Paid, order.Shipped, order.Shipped, order.Delivered},
			}
			o.Events = slices.Clone(patterns[g.rng.IntN(len(patterns))])
			o.Reordered = reorder && g.chance(50)
		}
		g.order(&o)
		g.s.Orders = append(g.s.Orders, o)
	}
}

// order schedules the events (and the timeout) of o.
func (g *gen) order(o *Order) {
	t := g.between(0, 700*time.Millisecond)
	at := make([]time.Duration, len(o.Events))
	for i := range o.Events {
		at[i] = t
		t += g.between(40*time.Millisecond, 200*time.Millisecond)
	}
	switch o.Timeout {
	case RaceTimeout:
		// The check is due within ±80 ms of Paid's send.
		after := g.between(150*time.Millisecond, 400*time.Millisecond)
		g.add(g.timeout(o.ID, at[0]+5*time.Millisecond, after))
		paid := at[0] + 5*time.Millisecond + after + g.between(0, 160*time.Millisecond) - 80*time.Millisecond
		shift := paid - at[1]
		for i := 1; i < len(at); i++ {
			at[i] += shift
		}
	case UnpaidTimeout:
		g.add(g.timeout(o.ID, at[0]+5*time.Millisecond, g.between(100*time.Millisecond, 600*time.Millisecond)))
	case PaidCancelledCheck:
		// Due well after the run's sends; cancelled right after Paid.
		g.cancelled(o.ID, at[0]+5*time.Millisecond, 10*time.Minute, at[1]+10*time.Millisecond)
	}
	if o.Reordered {
		// Swap the send times of two events.
		i := g.rng.IntN(len(at) - 1)
		j := i + 1 + g.rng.IntN(len(at)-1-i)
		at[i], at[j] = at[j], at[i]
	}
	for i, st := range o.Events {
		g.add(event(o.ID, int64(i+1), st, at[i], KindEvent, ""))
	}
}

// event is a valid OrderStatusChanged; a suffix makes a late replay's MessageId.
func event(id string, seq int64, st order.Status, at time.Duration, kind Kind, suffix string) Message {
	m, err := publish.StatusMessage(contract.StatusChanged{OrderID: id, Status: st, Sequence: seq,
		OccurredAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Minute)})
	if err != nil {
		panic("sim: event: " + err.Error()) // the schedules' ids and statuses are valid
	}
	l := scenario.FromMessage(broker.Message(m))
	l.MessageID += suffix
	l.SendAfter = at
	return Message{Line: l, Kind: kind, Order: id, Sequence: seq, Status: st}
}

// cancelled adds a check scheduled at at, due after later, cancelled at cancel.
func (g *gen) cancelled(id string, at, after, cancel time.Duration) {
	m := g.timeout(id, at, after)
	m.Manual = true
	g.add(m)
	g.s.Cancels = append(g.s.Cancels, Cancel{Order: id, Schedule: at, After: after, At: cancel})
}

func (g *gen) timeout(id string, at, after time.Duration) Message {
	m, err := publish.TimeoutMessageFor(id, 1) // every order of a schedule has one Created, of sequence 1
	if err != nil {
		panic("sim: timeout: " + err.Error()) // the schedules' ids are valid
	}
	l := scenario.FromMessage(broker.Message(m))
	l.SendAfter, l.ScheduleAfter = at, after
	return Message{Line: l, Kind: KindTimeout, Order: id}
}

// duplicates adds producer retries and late replays of some valid events.
func (g *gen) duplicates() {
	var events []Message
	for _, m := range g.s.Messages {
		if m.Kind == KindEvent {
			events = append(events, m)
		}
	}
	if g.chance(50) {
		for range 1 + g.rng.IntN(3) {
			m := events[g.rng.IntN(len(events))]
			m.Kind = KindDuplicateSend
			m.Line.SendAfter += g.between(0, 300*time.Millisecond)
			g.add(m)
		}
	}
	if g.chance(50) {
		late := g.end
		for range 1 + g.rng.IntN(3) {
			m := events[g.rng.IntN(len(events))]
			r := event(m.Order, m.Sequence, m.Status, late+g.between(100*time.Millisecond, 400*time.Millisecond), KindLateReplay, ":late")
			if slices.ContainsFunc(g.s.Messages, func(x Message) bool { return x.Line.MessageID == r.Line.MessageID }) {
				continue // that event is replayed already
			}
			g.add(r)
		}
	}
}

// poison adds a mix of bad messages to random orders' sessions.
func (g *gen) poison() {
	if !g.chance(55) {
		return
	}
	kinds := g.rng.Perm(len(poisonKinds))[:1+g.rng.IntN(3)]
	for _, k := range kinds {
		o := g.s.Orders[g.rng.IntN(len(g.s.Orders))]
		other := g.s.Orders[(slices.IndexFunc(g.s.Orders, func(x Order) bool { return x.ID == o.ID })+1)%len(g.s.Orders)].ID
		p := poisonKinds[k]
		l := scenario.Line{
			Subject:     order.SubjectStatusChanged,
			SessionID:   o.ID,
			MessageID:   o.ID + ":poison:" + p.name,
			ContentType: "application/json",
			SendAfter:   g.between(0, 1200*time.Millisecond),
		}
		switch p.name {
		case "bad-json":
			l.Body, l.ContentType = []byte(`{"orderId":"`+o.ID+`","status":`), ""
		case "unknown-subject":
			l.Subject = "OrderRefunded"
			l.Body = fmt.Appendf(nil, `{"orderId":%q,"status":"Paid","sequence":90}`, o.ID)
		case "session-mismatch":
			// The body is about another order of the schedule.
			l.Body = fmt.Appendf(nil, `{"orderId":%q,"status":"Paid","sequence":91}`, other)
		case "unknown-status":
			l.Body = fmt.Appendf(nil, `{"orderId":%q,"status":"Refunded","sequence":92}`, o.ID)
		case "sequence-zero":
			l.Body = fmt.Appendf(nil, `{"orderId":%q,"status":"Paid","sequence":0}`, o.ID)
		case "timeout-mismatch":
			l.Subject = order.SubjectPaymentTimeout
			l.Body = fmt.Appendf(nil, `{"orderId":%q}`, other)
		}
		g.add(Message{Line: l, Kind: KindPoison, Order: o.ID, Poison: p.name, Reason: p.reason})
	}
}

// faults picks the storage and process faults.
func (g *gen) faults() {
	f := &g.s.Faults
	if g.chance(20) {
		f.RetryBudget, f.LockDuration = LockExpiryBudget, LockExpiryLock
		f.LockExpiry = &LockExpiry{
			Start:    g.between(200*time.Millisecond, 800*time.Millisecond),
			Duration: g.between(800*time.Millisecond, 1500*time.Millisecond),
			Delay:    g.between(1600*time.Millisecond, 2200*time.Millisecond),
		}
	} else if g.chance(45) {
		for range 1 + g.rng.IntN(2) {
			o := Outage{Start: g.between(100*time.Millisecond, 1200*time.Millisecond), Mode: faultproxy.ServerBusy, WritesOnly: g.chance(50)}
			if g.chance(50) {
				o.Mode = faultproxy.Drop
			}
			if g.chance(45) {
				o.Long = true
				o.Duration = g.between(1500*time.Millisecond, 3200*time.Millisecond)
			} else {
				o.Duration = g.between(150*time.Millisecond, 600*time.Millisecond)
			}
			f.Outages = append(f.Outages, o)
		}
	}
	if g.chance(30) {
		for range 1 + g.rng.IntN(3) {
			f.LoseAnswers = append(f.LoseAnswers, 1+g.rng.IntN(20))
		}
		f.LoseAnswers = uniqueSorted(f.LoseAnswers)
	}
	if g.chance(30) {
		for range 1 + g.rng.IntN(2) {
			f.Kills = append(f.Kills, 2+g.rng.IntN(14))
		}
		f.Kills = uniqueSorted(f.Kills)
	}
}

// instances picks the instance count, the scale events and the idle timeout.
func (g *gen) instances() {
	f := &g.s.Faults
	f.Instances = 1
	if g.chance(65) {
		f.Instances = 2 + g.rng.IntN(MaxInstances-1)
	}
	if g.chance(55) {
		running := f.Instances
		at := g.between(150*time.Millisecond, 500*time.Millisecond)
		for range 1 + g.rng.IntN(3) {
			var actions []string
			if running < MaxInstances {
				actions = append(actions, scenario.ScaleAdd)
			}
			if running > 1 {
				actions = append(actions, scenario.ScaleRemove, scenario.ScaleKill)
			}
			a := actions[g.rng.IntN(len(actions))]
			f.Scale = append(f.Scale, ScaleEvent{At: at, Action: a, Pick: g.rng.IntN(MaxInstances)})
			if a == scenario.ScaleAdd {
				running++
			} else {
				running--
			}
			at += g.between(150*time.Millisecond, 600*time.Millisecond)
		}
	}
	if f.Instances > 1 || len(f.Scale) > 0 {
		if g.chance(50) {
			f.SessionIdleTimeout = ShortSessionIdle
		}
	}
	if slices.ContainsFunc(f.Scale, func(e ScaleEvent) bool { return e.Action == scenario.ScaleKill }) && f.LockDuration == 0 {
		f.LockDuration = KillLock
	}
}

// producers adds, in some schedules, an unpaid order without a producer
// check and a paid one whose producer cancels its check.
func (g *gen) producers() {
	if g.chance(35) {
		o := Order{ID: fmt.Sprintf("o-%d", len(g.s.Orders)+1), Timeout: UnpaidNoCheck, Events: []order.Status{order.Created},
			Overdue: g.chance(50)}
		g.order(&o)
		g.s.Orders = append(g.s.Orders, o)
	}
	if g.chance(35) {
		o := Order{ID: fmt.Sprintf("o-%d", len(g.s.Orders)+1), Timeout: PaidCancelledCheck,
			Events: []order.Status{order.Created, order.Paid, order.Shipped}}
		g.order(&o)
		g.s.Orders = append(g.s.Orders, o)
	}
}

// sweepers, in some schedules, replaces the DeadLetterSweeper instance
// that held the timer's lock.
func (g *gen) sweepers() {
	if !g.chance(20) {
		return
	}
	f := &g.s.Faults
	at := g.between(150*time.Millisecond, 500*time.Millisecond)
	gone := scenario.ScaleRemove
	if g.chance(50) {
		gone = scenario.ScaleKill
	}
	f.Scale = append(f.Scale, ScaleEvent{At: at, Action: scenario.ScaleAdd, Group: SweeperGroup},
		ScaleEvent{At: at + g.between(100*time.Millisecond, 400*time.Millisecond), Action: gone, Group: SweeperGroup})
	sort.SliceStable(f.Scale, func(i, j int) bool { return f.Scale[i].At < f.Scale[j].At })
}

// MultiInstance reports whether more than one instance runs at some time.
func (s Schedule) MultiInstance() bool {
	return s.Faults.Instances > 1 || slices.ContainsFunc(s.Faults.Scale, func(e ScaleEvent) bool { return e.Action == scenario.ScaleAdd && e.Group == "" })
}

func uniqueSorted(xs []int) []int {
	slices.Sort(xs)
	return slices.Compact(xs)
}

// Mix describes the schedule's fault mix in one line.
func (s Schedule) Mix() string {
	count := map[Kind]int{}
	var poison []string
	for _, m := range s.Messages {
		count[m.Kind]++
		if m.Kind == KindPoison {
			poison = append(poison, m.Poison)
		}
	}
	var races, unpaid, noCheck, cancelled, overdue, reordered int
	for _, o := range s.Orders {
		switch o.Timeout {
		case RaceTimeout:
			races++
		case UnpaidTimeout:
			unpaid++
		case UnpaidNoCheck:
			noCheck++
		case PaidCancelledCheck:
			cancelled++
		}
		if o.Overdue {
			overdue++
		}
		if o.Reordered {
			reordered++
		}
	}
	parts := []string{fmt.Sprintf("%d orders, %d messages", len(s.Orders), len(s.Messages))}
	add := func(n int, format string, args ...any) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf(format, args...))
		}
	}
	add(reordered, "%d reordered", reordered)
	add(count[KindDuplicateSend], "%d duplicate sends", count[KindDuplicateSend])
	add(count[KindLateReplay], "%d late replays", count[KindLateReplay])
	add(races, "%d timeout races", races)
	add(unpaid, "%d unpaid", unpaid)
	add(noCheck, "%d unpaid without a producer check", noCheck)
	add(cancelled, "%d paid with the check cancelled", cancelled)
	add(overdue, "%d overdue (late Created)", overdue)
	add(len(poison), "poison [%s]", strings.Join(poison, " "))
	f := s.Faults
	for _, o := range f.Outages {
		kind := "short"
		if o.Long {
			kind = "long"
		}
		scope := "all"
		if o.WritesOnly {
			scope = "writes"
		}
		parts = append(parts, fmt.Sprintf("%s outage %s of %s at %s for %s", kind, modeName(o.Mode), scope, o.Start, o.Duration))
	}
	add(len(f.LoseAnswers), "lost answers of writes %v", f.LoseAnswers)
	add(len(f.Kills), "kills after writes %v", f.Kills)
	if e := f.LockExpiry; e != nil {
		parts = append(parts, fmt.Sprintf("lock expiry (lock %s, no renewal): delay %s at %s for %s", f.LockDuration, e.Delay, e.Start, e.Duration))
	}
	if f.Instances > 1 || len(f.Scale) > 0 {
		ev := ""
		for _, e := range f.Scale {
			if e.Group != "" {
				ev += fmt.Sprintf(" %s:%s@%s", e.Action, e.Group, e.At)
			} else {
				ev += fmt.Sprintf(" %s@%s", e.Action, e.At)
			}
		}
		parts = append(parts, fmt.Sprintf("%d instances%s", f.Instances, ev))
	}
	if f.SessionIdleTimeout > 0 {
		parts = append(parts, fmt.Sprintf("session idle timeout %s", f.SessionIdleTimeout))
	}
	if f.LockDuration > 0 && f.LockExpiry == nil {
		parts = append(parts, fmt.Sprintf("lock %s", f.LockDuration))
	}
	if f.TimeScale > 1 {
		parts = append(parts, fmt.Sprintf("broker clock x%g", f.TimeScale))
	}
	if f.HoldAfterReturn > 0 {
		parts = append(parts, fmt.Sprintf("the returning wave held %s", f.HoldAfterReturn))
	}
	parts = append(parts, fmt.Sprintf("retry budget %s, max delivery %d, backoff %s..%s, window %s", f.RetryBudget, f.MaxDelivery, f.RetryBase, f.RetryCap, f.RetryWindow))
	return strings.Join(parts, "; ")
}

func modeName(m faultproxy.Mode) string {
	switch m {
	case faultproxy.ServerBusy:
		return "ServerBusy"
	case faultproxy.Drop:
		return "Drop"
	case faultproxy.LoseAnswer:
		return "LoseAnswer"
	}
	return "Pass"
}

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
