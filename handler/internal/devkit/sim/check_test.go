package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// ideal returns what a correct run of s observes when nothing fails:
// every event applied in sequence order, duplicates and late replays
// settled without a write, poison parked; a race order's timeout comes
// after Paid unless cancelRaces (then it cancels, and its Paid supersedes
// the cancellation), and an unpaid order is cancelled.
func ideal(s Schedule, cancelRaces bool) Observation {
	o := Observation{Rows: map[string]Row{}, Replays: map[string]string{}, MaxDelivery: MaxDelivery}
	n := 0
	write := func(id string, r Row, insert bool, prev string) string {
		n++
		etag := fmt.Sprintf(`W/"%s-%d"`, id, n)
		o.Writes = append(o.Writes, Write{N: n, Order: id, Row: r, Insert: insert, IfMatch: prev, ETag: etag})
		return etag
	}
	answer := func(m Message, result, reason string) {
		o.Answers = append(o.Answers, Answer{MessageID: m.Line.MessageID, Order: m.Order, Subject: m.Line.Subject,
			DeliveryCount: 1, Sequence: m.Sequence, Result: result, Reason: reason})
	}
	cancelled := map[string]bool{}
	for _, ord := range s.Orders {
		unpaid := ord.Timeout == UnpaidTimeout || ord.Timeout == UnpaidNoCheck
		cancelled[ord.ID] = unpaid || (ord.Timeout == RaceTimeout && cancelRaces)
		etag := write(ord.ID, Row{order.Created, 1}, true, "")
		if cancelled[ord.ID] {
			etag = write(ord.ID, Row{order.Cancelled, 1}, false, etag)
		}
		if unpaid {
			o.Rows[ord.ID] = Row{order.Cancelled, 1}
			continue
		}
		// A race's cancellation is superseded by its Paid, which
		// occurred by the deadline.
		for i := 1; i < len(ord.Events); i++ {
			etag = write(ord.ID, Row{ord.Events[i], int64(i + 1)}, false, etag)
		}
		o.Rows[ord.ID] = ord.Last()
	}
	// The handler's own check of an order whose producer sent none: it
	// cancels an unpaid order and finds any other one Stale.
	for _, ord := range s.Orders {
		if ord.Timeout == NoTimeout || ord.Timeout == UnpaidNoCheck {
			res := resultStale
			if cancelled[ord.ID] {
				res = resultApplied
			}
			o.Answers = append(o.Answers, Answer{MessageID: ord.ID + ":payment-timeout-1", Order: ord.ID,
				Subject: order.SubjectPaymentTimeout, DeliveryCount: 1, Result: res})
		}
	}
	o.CancelledChecks = map[string]bool{}
	for _, c := range s.Cancels {
		o.CancelledChecks[c.Order+":payment-timeout-1"] = true
	}
	seen := map[string]bool{}
	for _, m := range s.Messages {
		if seen[m.Line.MessageID] {
			continue // dropped by duplicate detection
		}
		seen[m.Line.MessageID] = true
		if m.Kind == KindTimeout && o.CancelledChecks[m.Line.MessageID] {
			continue // cancelled by its producer
		}
		switch {
		case m.Kind == KindPoison:
			answer(m, resultParked, m.Reason)
			o.Parked = append(o.Parked, Parked{ParkedID: m.Line.MessageID + ":parked", OriginalMessageID: m.Line.MessageID, Reason: m.Reason})
		case m.Kind == KindTimeout && cancelled[m.Order]:
			answer(m, resultApplied, "")
		case m.Kind == KindTimeout:
			answer(m, resultStale, "")
		case m.Kind == KindLateReplay:
			answer(m, resultDuplicate, "")
		default:
			answer(m, resultApplied, "")
		}
	}
	return o
}

// TestCheckAcceptsCorrectRuns: for every schedule of many seeds, both
// legal outcomes of the timeout races pass. A checker that fails correct
// runs would hide real failures in noise.
func TestCheckAcceptsCorrectRuns(t *testing.T) {
	for seed := uint64(1); seed <= 500; seed++ {
		s := Generate(seed)
		for _, cancel := range []bool{false, true} {
			if v := Check(s, ideal(s, cancel)); len(v) > 0 {
				t.Fatalf("seed %d (races cancelled: %v): a correct run fails the check:\n%s", seed, cancel, strings.Join(v, "\n"))
			}
		}
	}
}

// fixture is a small schedule and its correct observation, for planting
// violations: o-1 Created, Paid, Shipped, Delivered; o-2 Created, Paid with
// a timeout race; o-3 unpaid; a bad-JSON poison message in o-1.
func fixture() (Schedule, Observation) {
	s := Schedule{Seed: 1, Orders: []Order{
		{ID: "o-1", Events: []order.Status{order.Created, order.Paid, order.Shipped, order.Delivered}},
		{ID: "o-2", Events: []order.Status{order.Created, order.Paid}, Timeout: RaceTimeout},
		{ID: "o-3", Events: []order.Status{order.Created}, Timeout: UnpaidTimeout},
	}}
	g := &gen{}
	for _, o := range s.Orders {
		for i, st := range o.Events {
			s.Messages = append(s.Messages, event(o.ID, int64(i+1), st, 0, KindEvent, ""))
		}
		if o.Timeout != NoTimeout {
			s.Messages = append(s.Messages, g.timeout(o.ID, 0, 0))
		}
	}
	late := event("o-1", 2, order.Paid, 0, KindLateReplay, ":late")
	s.Messages = append(s.Messages, late)
	s.Messages = append(s.Messages, Message{Kind: KindPoison, Order: "o-1", Poison: "bad-json", Reason: order.ReasonInvalidPayload,
		Line: scenario.Line{Subject: order.SubjectStatusChanged, SessionID: "o-1", MessageID: "o-1:poison:bad-json", Body: []byte(`{"orderId":`)}})
	return s, ideal(s, false)
}

// TestCheckCatchesPlantedViolations plants one violation of each invariant
// into a correct observation and expects Check to name it.
func TestCheckCatchesPlantedViolations(t *testing.T) {
	s, clean := fixture()
	if v := Check(s, clean); len(v) > 0 {
		t.Fatalf("the fixture's correct observation fails:\n%s", strings.Join(v, "\n"))
	}
	writesOf := func(o *Observation, id string) []int {
		var idx []int
		for i, w := range o.Writes {
			if w.Order == id {
				idx = append(idx, i)
			}
		}
		return idx
	}
	// appendWrite chains a write after the last write of id.
	appendWrite := func(o *Observation, id string, r Row) {
		idx := writesOf(o, id)
		last := o.Writes[idx[len(idx)-1]]
		o.Writes = append(o.Writes, Write{N: len(o.Writes) + 1, Order: id, Row: r, IfMatch: last.ETag, ETag: fmt.Sprintf("planted-%d", len(o.Writes)+1)})
	}
	tests := []struct {
		name  string
		plant func(o *Observation)
		want  string // a violation containing this
	}{
		{"wrong row", func(o *Observation) { o.Rows["o-1"] = Row{order.Shipped, 3} }, "order o-1: row Shipped/3, want Delivered/4"},
		{"missing row", func(o *Observation) { delete(o.Rows, "o-3") }, "order o-3: no row"},
		{"row of an unknown order", func(o *Observation) { o.Rows["o-9"] = Row{order.Paid, 91} }, "row o-9 (Paid/91) belongs to no order"},
		{"unpaid order not cancelled", func(o *Observation) {
			o.Rows["o-3"] = Row{order.Created, 1}
			o.Writes = slices.DeleteFunc(o.Writes, func(w Write) bool { return w.Order == "o-3" && !w.Insert })
		}, "order o-3: row Created/1, want Cancelled/1"},
		{"double apply", func(o *Observation) {
			// Delivered/4 written again after itself.
			appendWrite(o, "o-1", Row{order.Delivered, 4})
		}, "sequence 4 written twice (double effect)"},
		{"double apply of a non-terminal status", func(o *Observation) {
			// Paid/2 written twice, the second time on the first one's
			// ETag, and Shipped/3 after that.
			idx := writesOf(o, "o-1")
			paid := o.Writes[idx[1]]
			o.Writes[idx[2]].IfMatch = "again"
			o.Writes = append(o.Writes, Write{N: 100, Order: "o-1", Row: paid.Row, IfMatch: paid.ETag, ETag: "again"})
		}, "sequence 2 written twice (double effect)"},
		{"regression", func(o *Observation) {
			idx := writesOf(o, "o-1")
			o.Writes[idx[3]].Row = Row{order.Shipped, 3}
			o.Writes[idx[2]].Row = Row{order.Delivered, 4}
		}, "LastSequence went back (regression)"},
		{"write after a terminal status", func(o *Observation) { appendWrite(o, "o-1", Row{order.Shipped, 5}) }, "after the terminal"},
		{"write of nothing sent", func(o *Observation) {
			o.Writes[writesOf(o, "o-1")[1]].Row = Row{order.Shipped, 2}
		}, "write #2 replace o-1 Shipped/2 matches no event sent"},
		{"unconditional write", func(o *Observation) { o.Writes[writesOf(o, "o-1")[3]].IfMatch = "*" }, "is unconditional"},
		{"lost update: two writes on one ETag", func(o *Observation) {
			idx := writesOf(o, "o-1")
			o.Writes[idx[3]].IfMatch = o.Writes[idx[1]].ETag
		}, "both succeeded on ETag"},
		{"two inserts", func(o *Observation) {
			o.Writes = append(o.Writes, Write{N: 99, Order: "o-2", Row: Row{order.Created, 1}, Insert: true, ETag: "x"})
		}, "2 inserts succeeded"},
		{"write missing from the log", func(o *Observation) {
			i := writesOf(o, "o-1")[1]
			o.Writes = slices.Delete(o.Writes, i, i+1)
		}, "follows no write seen"},
		{"row is not the last write", func(o *Observation) {
			i := writesOf(o, "o-1")[3]
			o.Writes = slices.Delete(o.Writes, i, i+1)
		}, "order o-1: row Delivered/4, but the last write seen is"},
		{"row without writes", func(o *Observation) {
			o.Writes = slices.DeleteFunc(o.Writes, func(w Write) bool { return w.Order == "o-3" })
		}, "order o-3: row Cancelled/1, but no write of it was seen"},
		{"paid order cancelled by the timeout", func(o *Observation) {
			appendWrite(o, "o-2", Row{order.Cancelled, 2})
			o.Rows["o-2"] = Row{order.Cancelled, 2}
		}, "cancels a paid order"},
		{"expiry of an order without a timeout", func(o *Observation) {
			// o-1 cancelled as if by a timeout right after its creation.
			idx := writesOf(o, "o-1")
			o.Writes = slices.Delete(o.Writes, idx[1], idx[3]+1)
			appendWrite(o, "o-1", Row{order.Cancelled, 1})
			o.Rows["o-1"] = Row{order.Cancelled, 1}
		}, "replace o-1 Cancelled/1 expires an order that must not expire (no payment timeout)"},
		{"lost message", func(o *Observation) {
			o.Answers = slices.Delete(o.Answers, answerIndex(o, "o-1:3"), answerIndex(o, "o-1:3")+1)
		}, "message o-1:3 (event): lost"},
		{"lost message: only failed answers", func(o *Observation) {
			o.Answers[answerIndex(o, "o-1:3")].Result = resultFailed
		}, "message o-1:3 (event): lost: never answered with a result that settles it (answers: Failed)"},
		{"answer to a message never sent", func(o *Observation) {
			o.Answers = append(o.Answers, Answer{MessageID: "o-7:1", Order: "o-7", Result: resultStale})
		}, "message o-7:1, which was never sent"},
		{"left in the dead-letter queue", func(o *Observation) {
			o.LeftInDLQ = []DeadLetter{{MessageID: "o-1:2", SessionID: "o-1", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: 4}}
		}, "message o-1:2: still in the dead-letter queue"},
		{"missing poison", func(o *Observation) { o.Parked = nil }, "message o-1:poison:bad-json: not in the poison queue"},
		{"poison twice", func(o *Observation) {
			p := o.Parked[0]
			p.ParkedID = "other-id"
			o.Parked = append(o.Parked, p)
		}, "in the poison queue 2 times"},
		{"poison with the wrong reason", func(o *Observation) { o.Parked[0].Reason = order.ReasonUnknownSubject }, `parked with reason "UnknownSubject", want "InvalidPayload"`},
		{"valid message parked", func(o *Observation) {
			o.Parked = append(o.Parked, Parked{ParkedID: "o-1:3:parked", OriginalMessageID: "o-1:3", Reason: order.ReasonInvalidTransition})
		}, "message o-1:3: in the poison queue (InvalidTransition), but it is not poison"},
		{"answer with the wrong poison reason", func(o *Observation) {
			o.Answers[answerIndex(o, "o-1:poison:bad-json")].Reason = order.ReasonUnknownSubject
		}, "answered Parked (UnknownSubject), want reason InvalidPayload"},
		{"completed, not durable", func(o *Observation) {
			o.Answers = append(o.Answers, Answer{MessageID: "o-2:2", Order: "o-2", Subject: order.SubjectStatusChanged, DeliveryCount: 2, Sequence: 2, Result: resultDuplicate})
			o.Rows["o-2"] = Row{order.Created, 1}
			i := writesOf(o, "o-2")[1]
			o.Writes = slices.Delete(o.Writes, i, i+1)
		}, "message o-2:2: answered Duplicate (delivery 2), but the row is Created/1: the effect of sequence 2 is not durable"},
		{"applied without a write", func(o *Observation) {
			i := writesOf(o, "o-1")[3]
			o.Writes[i].Row = Row{order.Delivered, 5}
			o.Rows["o-1"] = Row{order.Delivered, 5}
		}, "message o-1:4: answered Applied, but no write of Delivered/4 was seen"},
		{"timeout applied, not cancelled", func(o *Observation) {
			o.Answers[answerIndex(o, "o-2:payment-timeout-1")].Result = resultApplied
		}, "message o-2:payment-timeout-1: answered Applied (timeout), but no Cancelled write of o-2 was seen on the wire"},
		{"dead-lettered by a non-broker reason", func(o *Observation) {
			o.DeadLettered = []DeadLetter{{MessageID: "o-1:2", SessionID: "o-1", Reason: "HandlerGaveUp", DeliveryCount: 4}}
		}, `message o-1:2: dead-lettered with reason "HandlerGaveUp"; only the broker dead-letters`},
		{"dead-lettered before the max delivery count", func(o *Observation) {
			o.DeadLettered = []DeadLetter{{MessageID: "o-1:2", SessionID: "o-1", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: 1}}
		}, "after 1 deliveries, want at least 3"},
		{"the host's own findings", func(o *Observation) { o.Host = []string{"queue order-status is not drained"} }, "devhost: queue order-status is not drained"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := clone(clean)
			tt.plant(&o)
			v := Check(s, o)
			for _, x := range v {
				if strings.Contains(x, tt.want) {
					return
				}
			}
			t.Errorf("no violation contains %q; got:\n%s", tt.want, strings.Join(v, "\n"))
		})
	}
}

// TestCheckLegalRaceOutcomes: a race order ends Paid, whether its timeout
// was Stale or cancelled it first (its Paid, paid in time, supersedes the
// cancellation); ending Cancelled/1 with its Paid parked is a violation;
// and a dead-lettered Created of an unpaid order may come after its
// timeout.
func TestCheckLegalRaceOutcomes(t *testing.T) {
	s, _ := fixture()
	cancelled := ideal(s, true)
	if v := Check(s, cancelled); len(v) > 0 {
		t.Errorf("the race's cancel outcome fails:\n%s", strings.Join(v, "\n"))
	}
	// A paid-in-time order left Cancelled, its Paid parked, is a
	// violation: no allowance.
	o := clone(cancelled)
	o.Rows["o-2"] = Row{order.Cancelled, 1}
	o.Writes = slices.DeleteFunc(o.Writes, func(w Write) bool { return w.Order == "o-2" && w.Status == order.Paid })
	o.Answers[answerIndex(&o, "o-2:2")].Result = resultParked
	o.Answers[answerIndex(&o, "o-2:2")].Reason = order.ReasonInvalidTransition
	o.Parked = append(o.Parked, Parked{ParkedID: "o-2:2:parked", OriginalMessageID: "o-2:2", Reason: order.ReasonInvalidTransition})
	if v := Check(s, o); !slices.ContainsFunc(v, func(x string) bool { return strings.Contains(x, "order o-2: row Cancelled/1, want Paid/2") }) {
		t.Errorf("paid race order left Cancelled: got %q, want the row violation", v)
	}

	// Unpaid o-3 left Created is a violation, even when its Created was
	// dead-lettered and replayed after the timeout (the allowance issue 17
	// removed: the handler's own check cancels it).
	o = clone(cancelled)
	o.Rows["o-3"] = Row{order.Created, 1}
	o.Writes = slices.DeleteFunc(o.Writes, func(w Write) bool { return w.Order == "o-3" && !w.Insert })
	for i := range o.Answers {
		if o.Answers[i].MessageID == "o-3:payment-timeout-1" {
			o.Answers[i].Result = resultStale
		}
		if o.Answers[i].MessageID == "o-3:1" {
			o.Answers[i].MessageID = "o-3:1:replay:1"
		}
	}
	o.DeadLettered = []DeadLetter{{MessageID: "o-3:1", SessionID: "o-3", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: 4}}
	o.Replays = map[string]string{"o-3:1:replay:1": "o-3:1"}
	if v := Check(s, o); !slices.ContainsFunc(v, func(x string) bool { return strings.Contains(x, "order o-3: row Created/1, want Cancelled/1") }) {
		t.Errorf("unpaid order left Created after a late Created: got %q, want the row violation", v)
	}
}

// An unpaid order whose producer never scheduled the check must end
// Cancelled; a paid one whose producer cancelled its check must not; the
// answers to the handler's own checks and to rescheduled copies count as
// the messages they stand for.
func TestCheckProducersAndCopies(t *testing.T) {
	s := Schedule{Seed: 1, Orders: []Order{
		{ID: "o-1", Events: []order.Status{order.Created}, Timeout: UnpaidNoCheck},
		{ID: "o-2", Events: []order.Status{order.Created, order.Paid}, Timeout: PaidCancelledCheck},
	}}
	for _, o := range s.Orders {
		for i, st := range o.Events {
			s.Messages = append(s.Messages, event(o.ID, int64(i+1), st, 0, KindEvent, ""))
		}
	}
	g := &gen{}
	s.Messages = append(s.Messages, g.timeout("o-2", 0, 10*time.Minute))
	s.Cancels = []Cancel{{Order: "o-2", At: time.Second}}
	good := ideal(s, false)
	if v := Check(s, good); len(v) > 0 {
		t.Fatalf("a correct run fails:\n%s", strings.Join(v, "\n"))
	}
	// The Paid applied through a rescheduled copy.
	o := clone(good)
	for i := range o.Answers {
		if o.Answers[i].MessageID == "o-2:2" {
			o.Answers = append(o.Answers, Answer{MessageID: "o-2:2", Order: "o-2", Subject: order.SubjectStatusChanged, Sequence: 2, Result: "Rescheduled"})
			o.Answers[i].MessageID, o.Answers[i].Original = "o-2:2:retry:1", "o-2:2"
			break
		}
	}
	if v := Check(s, o); len(v) > 0 {
		t.Errorf("a Paid applied through its copy fails:\n%s", strings.Join(v, "\n"))
	}
	// o-1 left Created: the producer never scheduled a check, the
	// handler's must have cancelled it.
	o = clone(good)
	o.Rows["o-1"] = Row{order.Created, 1}
	o.Writes = slices.DeleteFunc(o.Writes, func(w Write) bool { return w.Order == "o-1" && !w.Insert })
	if v := Check(s, o); !slices.ContainsFunc(v, func(x string) bool { return strings.Contains(x, "order o-1: row Created/1, want Cancelled/1") }) {
		t.Errorf("unpaid order without a producer check left Created: got %q", v)
	}
	// o-2 cancelled by a timeout: a paid order must never be.
	o = clone(good)
	last := o.Writes[len(o.Writes)-1]
	o.Writes = append(o.Writes, Write{N: last.N + 1, Order: "o-2", Row: Row{order.Cancelled, 2}, IfMatch: last.ETag, ETag: "x"})
	o.Rows["o-2"] = Row{order.Cancelled, 2}
	if v := Check(s, o); !slices.ContainsFunc(v, func(x string) bool { return strings.Contains(x, "cancels a paid order") }) {
		t.Errorf("paid order cancelled: got %q", v)
	}
	// Within the retry window nothing may be dead-lettered or parked for it.
	s.Faults.WithinWindow = true
	o = clone(good)
	o.DeadLettered = []DeadLetter{{MessageID: "o-1:1", SessionID: "o-1", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: 5}}
	o.MaxDelivery = 5
	o.Answers = append(o.Answers, Answer{MessageID: "o-1:1", Order: "o-1", Result: resultParked, Reason: order.ReasonRetryWindowExceeded})
	v := strings.Join(Check(s, o), "\n")
	for _, want := range []string{"dead-lettered (MaxDeliveryCountExceeded) by an outage shorter than the retry window", "parked RetryWindowExceeded by an outage shorter"} {
		if !strings.Contains(v, want) {
			t.Errorf("within the window: no violation %q in:\n%s", want, v)
		}
	}
}

func clone(o Observation) Observation {
	c := o
	c.Rows = map[string]Row{}
	for k, v := range o.Rows {
		c.Rows[k] = v
	}
	c.Writes = slices.Clone(o.Writes)
	c.Answers = slices.Clone(o.Answers)
	c.Parked = slices.Clone(o.Parked)
	c.DeadLettered = slices.Clone(o.DeadLettered)
	c.LeftInDLQ = slices.Clone(o.LeftInDLQ)
	c.Replays = map[string]string{}
	for k, v := range o.Replays {
		c.Replays[k] = v
	}
	c.Host = slices.Clone(o.Host)
	return c
}

// answerIndex is the index of the answer to message id in o.
func answerIndex(o *Observation, id string) int {
	return slices.IndexFunc(o.Answers, func(a Answer) bool { return a.MessageID == id })
}
