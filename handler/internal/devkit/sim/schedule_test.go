package sim

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

func TestGenerateIsDeterministic(t *testing.T) {
	for _, seed := range []uint64{1, 2, 17, 1 << 40} {
		a, b := Generate(seed), Generate(seed)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("seed %d: two schedules differ", seed)
		}
	}
	if reflect.DeepEqual(Generate(1).Messages, Generate(2).Messages) {
		t.Error("seeds 1 and 2 give the same messages")
	}
}

// poisonReason is what the message contract says about m (independently
// of the generator's label): the reason it must be parked with, or "" for
// a valid message.
func poisonReason(m Message) string {
	var err error
	switch m.Line.Subject {
	case order.SubjectStatusChanged:
		_, err = order.ParseUpdate(m.Line.Body, m.Line.SessionID)
	case order.SubjectPaymentTimeout:
		_, err = order.ParseTimeoutCheck(m.Line.Body, m.Line.SessionID)
	default:
		return order.ReasonUnknownSubject
	}
	var pe *order.PoisonError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return ""
}

// TestGenerateShape checks the contract of Generate over many seeds.
func TestGenerateShape(t *testing.T) {
	for seed := uint64(1); seed <= 1000; seed++ {
		s := Generate(seed)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: %s\nschedule: %s", seed, fmt.Sprintf(format, args...), s.Mix())
		}
		if n := len(s.Orders); n < 4 || n > 12 {
			fail("%d orders, want 4 to 12 (up to 10, and two of the producers() kinds)", n)
		}
		for _, o := range s.Orders {
			n := len(o.Events)
			switch o.Timeout {
			case NoTimeout:
				if n < 3 || n > 5 {
					fail("order %s has %d events, want 3 to 5", o.ID, n)
				}
			case RaceTimeout:
				if n < 2 || o.Events[1] != order.Paid {
					fail("race order %s: events %v, want Created, Paid, ...", o.ID, o.Events)
				}
			case UnpaidTimeout:
				if n != 1 {
					fail("unpaid order %s: events %v, want Created only", o.ID, o.Events)
				}
			}
			if o.Events[0] != order.Created {
				fail("order %s starts with %s", o.ID, o.Events[0])
			}
			for i, st := range o.Events[:n-1] {
				if st.Terminal() {
					fail("order %s: terminal %s at sequence %d, before the last event", o.ID, st, i+1)
				}
			}
		}

		var last time.Duration
		firstSend := map[string]Message{}
		sentEvents := map[string]int{}
		timeouts := map[string]Message{}
		eventAt := map[string]time.Duration{}
		for _, m := range s.Messages {
			l := m.Line
			if l.SendAfter < last {
				fail("message %s is sent at %s, before the previous one (%s)", l.MessageID, l.SendAfter, last)
			}
			last = l.SendAfter
			if l.SessionID != m.Order {
				fail("message %s: session %q, want its order %q", l.MessageID, l.SessionID, m.Order)
			}
			if prev, ok := firstSend[l.MessageID]; ok && (m.Kind != KindDuplicateSend || !reflect.DeepEqual(prev.Line.Body, l.Body)) {
				fail("MessageId %s is used by two different messages", l.MessageID)
			}
			if _, ok := firstSend[l.MessageID]; !ok {
				firstSend[l.MessageID] = m
			}
			reason := poisonReason(m)
			switch m.Kind {
			case KindPoison:
				if reason == "" || reason != m.Reason {
					fail("poison %s (%s): the contract gives reason %q, the schedule expects %q", l.MessageID, m.Poison, reason, m.Reason)
				}
			case KindEvent, KindDuplicateSend, KindLateReplay:
				if reason != "" {
					fail("valid event %s is poison (%s)", l.MessageID, reason)
				}
				u, _ := order.ParseUpdate(l.Body, l.SessionID)
				o, _ := s.Order(m.Order)
				if u.Sequence != m.Sequence || u.Status != m.Status || o.Events[u.Sequence-1] != u.Status {
					fail("event %s carries %s/%d, not its order's event", l.MessageID, u.Status, u.Sequence)
				}
				want := fmt.Sprintf("%s:%d", m.Order, m.Sequence)
				if m.Kind == KindLateReplay {
					want += ":late"
				}
				if l.MessageID != want {
					fail("event MessageId %s, want %s", l.MessageID, want)
				}
				if m.Kind == KindEvent {
					sentEvents[want]++
					eventAt[want] = l.SendAfter
				}
			case KindTimeout:
				if reason != "" || l.MessageID != m.Order+":payment-timeout-1" || l.ScheduleAfter <= 0 {
					fail("timeout %s: reason %q, scheduled after %s", l.MessageID, reason, l.ScheduleAfter)
				}
				timeouts[m.Order] = m
			}
		}
		for _, o := range s.Orders {
			for i := range o.Events {
				if id := fmt.Sprintf("%s:%d", o.ID, i+1); sentEvents[id] != 1 {
					fail("event %s is sent %d times as an event, want once", id, sentEvents[id])
				}
			}
			tm, has := timeouts[o.ID]
			if producerCheck := o.Timeout != NoTimeout && o.Timeout != UnpaidNoCheck; has != producerCheck {
				fail("order %s (timeout kind %d) has a timeout: %v", o.ID, o.Timeout, has)
			}
			if o.Timeout == RaceTimeout {
				due := tm.Line.SendAfter + tm.Line.ScheduleAfter
				paid := eventAt[o.ID+":2"]
				if d := paid - due; d < -80*time.Millisecond || d > 80*time.Millisecond {
					fail("race order %s: Paid is sent %s from the timeout's due time, want within 80 ms", o.ID, d)
				}
			}
			inOrder := true
			for i := 1; i < len(o.Events); i++ {
				inOrder = inOrder && eventAt[fmt.Sprintf("%s:%d", o.ID, i)] <= eventAt[fmt.Sprintf("%s:%d", o.ID, i+1)]
			}
			if o.Reordered == inOrder {
				fail("order %s: reordered %v, but its events are sent in sequence order: %v", o.ID, o.Reordered, inOrder)
			}
		}

		f := s.Faults
		if f.MaxDelivery != MaxDelivery {
			fail("max delivery %d", f.MaxDelivery)
		}
		if f.LockExpiry != nil {
			if f.LockExpiry.Delay <= f.LockDuration || f.RetryBudget <= f.LockExpiry.Delay || len(f.Outages) > 0 {
				fail("lock expiry: delay %s, lock %s, budget %s, %d outages: want lock < delay < budget and no outage",
					f.LockExpiry.Delay, f.LockDuration, f.RetryBudget, len(f.Outages))
			}
		} else if kills := slices.ContainsFunc(f.Scale, func(e ScaleEvent) bool { return e.Action == scenario.ScaleKill && e.Group == "" }); f.RetryBudget != DefaultRetryBudget ||
			(!kills && f.LockDuration != 0) || (kills && f.LockDuration != KillLock) {
			fail("budget %s, lock %s without lock expiry (instance killed: %v)", f.RetryBudget, f.LockDuration, kills)
		}
		for _, o := range f.Outages {
			if o.Long != (o.Duration > f.RetryBudget) {
				fail("outage of %s marked long=%v with a %s budget", o.Duration, o.Long, f.RetryBudget)
			}
		}
	}
}

// TestGenerateCoversEveryFault: the CI seeds (1 to defaultSchedules) exercise every
// fault many times, and both producer behaviours of the payment timeout:
// an unpaid order whose producer never schedules the check, and one whose
// producer schedules and cancels it.
func TestGenerateCoversEveryFault(t *testing.T) {
	count := map[string]int{}
	for seed := uint64(1); seed <= defaultSchedules; seed++ {
		s := Generate(seed)
		seen := map[string]bool{}
		for _, m := range s.Messages {
			seen[m.Kind.String()] = true
			if m.Kind == KindPoison {
				seen["poison "+m.Poison] = true
			}
		}
		for _, o := range s.Orders {
			seen["reordered"] = seen["reordered"] || o.Reordered
			seen["race"] = seen["race"] || o.Timeout == RaceTimeout
			seen["unpaid"] = seen["unpaid"] || o.Timeout == UnpaidTimeout
			// The producer crashed before scheduling the check: the
			// handler's own check must cancel it (issue 21).
			seen["unpaid, producer never schedules"] = seen["unpaid, producer never schedules"] || o.Timeout == UnpaidNoCheck
			// The producer schedules the check and cancels it after Paid.
			seen["paid, producer cancels"] = seen["paid, producer cancels"] || o.Timeout == PaidCancelledCheck
			seen["ends cancelled"] = seen["ends cancelled"] || (o.Timeout == NoTimeout && o.Last().Status == order.Cancelled)
		}
		f := s.Faults
		for _, o := range f.Outages {
			seen[map[bool]string{false: "short outage", true: "long outage"}[o.Long]] = true
			seen["outage of "+modeName(o.Mode)] = true
			seen[map[bool]string{false: "outage of all", true: "outage of writes"}[o.WritesOnly]] = true
		}
		seen["lost answers"] = len(f.LoseAnswers) > 0
		seen["kills"] = len(f.Kills) > 0
		seen["lock expiry"] = f.LockExpiry != nil
		seen["more than one instance"] = s.MultiInstance()
		seen["short session idle"] = f.SessionIdleTimeout > 0
		for _, e := range f.Scale {
			if e.Group == SweeperGroup {
				seen["sweeper "+e.Action] = true
			} else {
				seen["scale "+e.Action] = true
			}
		}
		seen["kill with another fault"] = seen["scale kill"] && (len(f.Outages) > 0 || len(f.Kills) > 0 || len(f.LoseAnswers) > 0 || f.LockExpiry != nil)
		for k, v := range seen {
			if v {
				count[k]++
			}
		}
	}
	want := []string{"event", "duplicate-send", "late-replay", "timeout", "poison", "reordered", "race", "unpaid", "ends cancelled",
		"unpaid, producer never schedules", "paid, producer cancels",
		"short outage", "long outage", "outage of ServerBusy", "outage of Drop", "outage of all", "outage of writes",
		"lost answers", "kills", "lock expiry", "short session idle", "scale add", "scale remove", "scale kill", "kill with another fault",
		"sweeper add", "sweeper remove", "sweeper kill"}
	for _, p := range poisonKinds {
		want = append(want, "poison "+p.name)
	}
	var missing []string
	for _, k := range want {
		if count[k] < 10 {
			missing = append(missing, fmt.Sprintf("%s (%d)", k, count[k]))
		}
	}
	if len(missing) > 0 {
		t.Errorf("seeds 1 to %d: fewer than 10 schedules with: %s", defaultSchedules, strings.Join(missing, ", "))
	}
	if got := count["more than one instance"]; got < 50 {
		t.Errorf("seeds 1 to %d: %d schedules run more than one instance, want at least 50", defaultSchedules, got)
	}
}

// TestGenerateScaleEvents: the running instances of each group stay
// between 1 and MaxInstances, events come in time order, and a schedule
// that kills an OrderStatus instance has a lock short enough for its
// sessions to come back (a sweeper instance holds no session).
func TestGenerateScaleEvents(t *testing.T) {
	for seed := uint64(1); seed <= 500; seed++ {
		f := Generate(seed).Faults
		if f.Instances < 1 || f.Instances > MaxInstances {
			t.Fatalf("seed %d: %d instances, want 1 to %d", seed, f.Instances, MaxInstances)
		}
		running := map[string]int{"": f.Instances, SweeperGroup: 1}
		var prev time.Duration
		for _, e := range f.Scale {
			if e.At < prev {
				t.Errorf("seed %d: scale event at %s after one at %s", seed, e.At, prev)
			}
			prev = e.At
			if _, ok := running[e.Group]; !ok {
				t.Fatalf("seed %d: scale event of group %q", seed, e.Group)
			}
			switch e.Action {
			case scenario.ScaleAdd:
				running[e.Group]++
			case scenario.ScaleRemove, scenario.ScaleKill:
				running[e.Group]--
				if short := max(KillLock, LockExpiryLock); e.Action == scenario.ScaleKill && e.Group == "" && (f.LockDuration == 0 || f.LockDuration > short) {
					t.Errorf("seed %d: kills an instance with lock duration %s, want at most %s", seed, f.LockDuration, short)
				}
			default:
				t.Errorf("seed %d: scale action %q", seed, e.Action)
			}
			if n := running[e.Group]; n < 1 || n > MaxInstances {
				t.Errorf("seed %d: %d instances of %q running after %s@%s", seed, n, e.Group, e.Action, e.At)
			}
		}
	}
}

func TestMix(t *testing.T) {
	s := Generate(4)
	s.Faults.Kills = []int{3}
	s.Faults.LoseAnswers = []int{2, 5}
	mix := s.Mix()
	for _, want := range []string{fmt.Sprintf("%d orders", len(s.Orders)), "kills after writes [3]", "lost answers of writes [2 5]", "retry budget"} {
		if !strings.Contains(mix, want) {
			t.Errorf("Mix() = %q, want it to mention %q", mix, want)
		}
	}
}
