package devhost

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

func upd(session string, seq int, status string, result string) Completion {
	return Completion{
		Queue: "order-status", SessionID: session, MessageID: fmt.Sprintf("%s:%d", session, seq), Subject: "OrderStatusChanged",
		Body:          []byte(fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d}`, session, status, seq)),
		DeliveryCount: 1, Result: result,
	}
}

func timeoutFor(session, result string) Completion {
	return Completion{Queue: "order-status", SessionID: session, MessageID: session + ":payment-timeout", Subject: "PaymentTimeoutCheck",
		Body: []byte(fmt.Sprintf(`{"orderId":%q}`, session)), DeliveryCount: 1, Result: result}
}

// goodRun is a run a correct handler produces: reordering, a duplicate, a
// payment timeout, an update after it, and a bad body.
func goodRun() CheckInput {
	bad := Completion{Queue: "order-status", SessionID: "o-3", MessageID: "o-3:bad", Subject: "OrderStatusChanged",
		Body: []byte("{oops"), DeliveryCount: 1, Result: "Parked"}
	in := CheckInput{
		Completions: []Completion{
			upd("o-1", 1, "Created", "Applied"),
			upd("o-2", 1, "Created", "Applied"),
			upd("o-1", 3, "Shipped", "Applied"),
			upd("o-1", 2, "Paid", "Stale"),
			timeoutFor("o-2", "Applied"),
			upd("o-2", 2, "Paid", "Parked"), // after the cancellation: InvalidTransition
			bad,
		},
		Orders: map[string]OrderRow{
			"o-1": {Status: "Shipped", LastSequence: 3},
			"o-2": {Status: "Cancelled", LastSequence: 1},
		},
		Queried: map[string]bool{"o-1": true, "o-2": true, "o-3": true},
		Parked: []Entry{
			{MessageID: "o-2:2", Reason: "InvalidTransition", ParkedID: "o-2:2:parked"},
			{MessageID: "o-3:bad", Reason: "InvalidPayload", ParkedID: "o-3:bad:parked"},
		},
		MaxDelivery:     5,
		CallsPerSession: 1,
		SentIDs:         map[string]bool{},
	}
	for _, c := range in.Completions {
		in.SentIDs[c.MessageID] = true
	}
	return in
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*CheckInput)
		want   []string // substrings, one per expected violation; nil: none
	}{
		{"a correct run", func(*CheckInput) {}, nil},
		{
			"row behind", func(in *CheckInput) { in.Orders["o-1"] = OrderRow{Status: "Paid", LastSequence: 2} },
			[]string{"order o-1: row Paid/2, want Shipped/3"},
		},
		{
			"row missing", func(in *CheckInput) { delete(in.Orders, "o-2") },
			[]string{"order o-2: no row, want Cancelled/1"},
		},
		{
			"row for an order of poison only", func(in *CheckInput) { in.Orders["o-3"] = OrderRow{Status: "Created", LastSequence: 1} },
			[]string{"order o-3: row Created/1, want none"},
		},
		{
			"row of an order never completed", func(in *CheckInput) { in.Orders["o-9"] = OrderRow{Status: "Paid", LastSequence: 2} },
			[]string{"order o-9"},
		},
		{
			"poison not parked", func(in *CheckInput) { in.Parked = in.Parked[1:] },
			[]string{"message o-2:2: want it parked (InvalidTransition)"},
		},
		{
			"parked with the wrong reason", func(in *CheckInput) { in.Parked[1].Reason = "UnknownSubject" },
			[]string{"message o-3:bad: parked with reason UnknownSubject, want InvalidPayload"},
		},
		{
			"parked twice", func(in *CheckInput) {
				in.Parked = append(in.Parked, Entry{MessageID: "o-3:bad", Reason: "InvalidPayload", ParkedID: "o-3:bad:parked:2"})
			},
			[]string{"message o-3:bad: parked 2 times"},
		},
		{
			"parked but not poison", func(in *CheckInput) {
				in.Parked = append(in.Parked, Entry{MessageID: "o-1:1", Reason: "InvalidPayload", ParkedID: "o-1:1:parked"})
			},
			[]string{"message o-1:1: parked (InvalidPayload), but it is not poison"},
		},
		{
			"wrong result at first delivery", func(in *CheckInput) { in.Completions[3].Result = "Applied" },
			[]string{"message o-1:2 (first delivery): handler answered Applied, want Stale"},
		},
		// An instance whose cache is behind the row (another instance wrote
		// since) answers a message at the cached sequence Duplicate where
		// the fold says Stale; only with more than one instance.
		{
			"Duplicate where the fold says Stale, one instance", func(in *CheckInput) {
				in.Completions[3].Result, in.Instances = "Duplicate", 1
			},
			[]string{"message o-1:2 (first delivery): handler answered Duplicate, want Stale"},
		},
		{
			"Duplicate where the fold says Stale, a cache behind another instance's write", func(in *CheckInput) {
				in.Completions[3].Result, in.Instances = "Duplicate", 3
			},
			nil,
		},
		{
			"Applied where the fold says Stale, however many instances", func(in *CheckInput) {
				in.Completions[3].Result, in.Instances = "Applied", 3
			},
			[]string{"message o-1:2 (first delivery): handler answered Applied, want Stale"},
		},
		{
			"results of redeliveries are not judged", func(in *CheckInput) {
				in.Completions[0].DeliveryCount, in.Completions[0].Result = 2, "Duplicate"
			},
			nil,
		},
		// Check 6: a handler that finds its own write (its answer was lost,
		// the retry refused) answers Duplicate or Stale where the fold says
		// Applied.
		{
			"own write found: a status change answered Duplicate, the row holds it", func(in *CheckInput) {
				in.Completions[2].Result = "Duplicate" // o-1:3 Shipped, the row Shipped/3
			},
			nil,
		},
		{
			"own write found: a status change answered Duplicate, superseded later", func(in *CheckInput) {
				in.Completions[0].Result = "Duplicate" // o-1:1 Created, the row Shipped/3
			},
			nil,
		},
		{
			"own write found: a status change answered Duplicate, then cancelled at its sequence", func(in *CheckInput) {
				in.Completions[1].Result = "Duplicate" // o-2:1 Created, the row Cancelled/1
			},
			nil,
		},
		{
			"own write found: a payment timeout answered Stale, the row is Cancelled", func(in *CheckInput) {
				in.Completions[4].Result = "Stale"
			},
			nil,
		},
		{
			"own write found: a payment timeout answered Stale, a payment in time superseded it", func(in *CheckInput) {
				in.Completions[0].Body = []byte(`{"orderId":"o-1","status":"Created","sequence":1,"occurredAt":"2026-11-29T10:01:00Z"}`)
				in.Completions = append(in.Completions,
					timeoutFor("o-1", "Stale"), // its Cancelled/1 went through, its answer was lost; the read found Paid
					Completion{Queue: "order-status", SessionID: "o-1", MessageID: "o-1:4", Subject: "OrderStatusChanged",
						Body:          []byte(`{"orderId":"o-1","status":"Delivered","sequence":4,"occurredAt":"2026-11-29T10:02:00Z"}`),
						DeliveryCount: 1, Result: "Applied"})
				in.SentIDs["o-1:payment-timeout"], in.SentIDs["o-1:4"] = true, true
				in.Orders["o-1"] = OrderRow{Status: "Delivered", LastSequence: 4}
			},
			nil,
		},
		{
			"a status change answered Stale where the fold says Applied", func(in *CheckInput) {
				in.Completions[2].Result = "Stale" // never the answer to one's own write of a status change
			},
			[]string{"message o-1:3 (first delivery): handler answered Stale, want Applied"},
		},
		{
			"a payment timeout answered Duplicate where the fold says Applied", func(in *CheckInput) {
				in.Completions[4].Result = "Duplicate"
			},
			[]string{"message o-2:payment-timeout (first delivery): handler answered Duplicate, want Applied"},
		},
		{
			"answered Duplicate, but the row is behind the message", func(in *CheckInput) {
				in.Completions[2].Result = "Duplicate"
				in.Orders["o-1"] = OrderRow{Status: "Paid", LastSequence: 2}
			},
			[]string{"message o-1:3 (first delivery): handler answered Duplicate, want Applied", "order o-1: row Paid/2, want Shipped/3"},
		},
		{
			"answered Duplicate, but the row was not read", func(in *CheckInput) {
				in.Completions[2].Result = "Duplicate"
				delete(in.Queried, "o-1")
				delete(in.Orders, "o-1")
			},
			[]string{"message o-1:3 (first delivery): handler answered Duplicate, want Applied"},
		},
		{
			"a payment timeout answered Stale, but the row is not Cancelled", func(in *CheckInput) {
				in.Completions[4].Result = "Stale"
				in.Orders["o-2"] = OrderRow{Status: "Created", LastSequence: 1}
			},
			[]string{"message o-2:payment-timeout (first delivery): handler answered Stale, want Applied", "order o-2: row Created/1, want Cancelled/1"},
		},
		{
			"a message lost", func(in *CheckInput) { in.SentIDs["o-4:1"] = true },
			[]string{"message o-4:1 was sent but neither completed nor dead-lettered"},
		},
		{
			"dead-lettered by the broker, order not judged", func(in *CheckInput) {
				in.SentIDs["o-4:1"] = true
				in.Orders["o-4"] = OrderRow{Status: "Created", LastSequence: 1}
				in.DeadLettered = []Entry{{MessageID: "o-4:1", SessionID: "o-4", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: 5}}
			},
			nil,
		},
		{
			"dead-lettered too early", func(in *CheckInput) {
				in.SentIDs["o-4:1"] = true
				in.DeadLettered = []Entry{{MessageID: "o-4:1", SessionID: "o-4", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: 2}}
			},
			[]string{"after 2 deliveries, want at least 5"},
		},
		{
			"dead-lettered with a reason the broker never gives", func(in *CheckInput) {
				in.DeadLettered = []Entry{{MessageID: "o-5:1", SessionID: "o-5", Reason: "InvalidPayload"}}
			},
			[]string{`dead-lettered message o-5:1: reason "InvalidPayload"`},
		},
		{
			"queue not drained", func(in *CheckInput) { in.Busy = []string{"queue order-status is not drained: 1 active"} },
			[]string{"not drained"},
		},
		{
			"order checks need one call per session", func(in *CheckInput) {
				in.CallsPerSession = 2
				in.Orders["o-1"] = OrderRow{Status: "Paid", LastSequence: 2}
			},
			nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := goodRun()
			tt.change(&in)
			got := Check(in)
			if len(got) != len(tt.want) {
				t.Fatalf("violations: got %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d: got %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCheckPaidOrderTimeoutIsStale(t *testing.T) {
	t.Parallel()
	in := CheckInput{
		Completions: []Completion{upd("o-1", 1, "Created", "Applied"), upd("o-1", 2, "Paid", "Applied"), timeoutFor("o-1", "Stale")},
		Orders:      map[string]OrderRow{"o-1": {Status: "Paid", LastSequence: 2}},
		Queried:     map[string]bool{"o-1": true},
		SentIDs:     map[string]bool{"o-1:1": true, "o-1:2": true, "o-1:payment-timeout": true},
		MaxDelivery: 5, CallsPerSession: 1,
	}
	if got := Check(in); len(got) != 0 {
		t.Errorf("violations: got %q, want none", got)
	}
	in.Completions[2].Result = "Applied"
	if got := Check(in); len(got) != 1 || !strings.Contains(got[0], "want Stale") {
		t.Errorf("violations: got %q, want the timeout's result judged Stale", got)
	}
}

// TestCheckOfAnOlderCreatedIsStale: the check of a Created the order was
// created again since (a higher sequence) cancels nothing; the newer
// Created's own check does.
func TestCheckOfAnOlderCreatedIsStale(t *testing.T) {
	t.Parallel()
	checkOf := func(seq int, result string) Completion {
		return Completion{Queue: "order-status", SessionID: "o-1", MessageID: fmt.Sprintf("o-1:payment-timeout-%d", seq), Subject: "PaymentTimeoutCheck",
			Body: []byte(fmt.Sprintf(`{"orderId":"o-1","createdSequence":%d}`, seq)), DeliveryCount: 1, Result: result}
	}
	in := CheckInput{
		Completions: []Completion{upd("o-1", 1, "Created", "Applied"), upd("o-1", 3, "Created", "Applied"), checkOf(1, "Stale"), checkOf(3, "Applied")},
		Orders:      map[string]OrderRow{"o-1": {Status: "Cancelled", LastSequence: 3}},
		Queried:     map[string]bool{"o-1": true},
		MaxDelivery: 5, CallsPerSession: 1,
		SentIDs: map[string]bool{},
	}
	for _, c := range in.Completions {
		in.SentIDs[c.MessageID] = true
	}
	if got := Check(in); len(got) != 0 {
		t.Errorf("violations: got %q, want none", got)
	}
	in.Completions[2].Result = "Applied"
	if got := Check(in); len(got) == 0 || !strings.Contains(got[0], "want Stale") {
		t.Errorf("violations: got %q, want the older Created's check judged Stale", got)
	}
}

// deadRun is a correct run in which the effects of dead-lettered messages
// happened in failed attempts:
//   - o-4:2 (Paid) was written before it was dead-lettered, so the payment
//     timeout that followed is Stale and o-4:3 (Shipped) Applied, where
//     the fold, without o-4:2, says Applied and InvalidTransition;
//   - o-5:2 (Cancelled) was written before it was dead-lettered (then
//     taken out of the dead-letter queue to be replayed), so o-5:3 (Paid)
//     is parked as an invalid transition, where the fold says Applied.
func deadRun() CheckInput {
	in := CheckInput{
		Completions: []Completion{
			upd("o-4", 1, "Created", "Applied"),
			upd("o-5", 1, "Created", "Applied"),
			timeoutFor("o-4", "Stale"),
			upd("o-5", 3, "Paid", "Parked"),
			upd("o-4", 3, "Shipped", "Applied"),
		},
		Orders: map[string]OrderRow{
			"o-4": {Status: "Shipped", LastSequence: 3},
			"o-5": {Status: "Cancelled", LastSequence: 2},
		},
		Queried: map[string]bool{"o-4": true, "o-5": true},
		Parked:  []Entry{{MessageID: "o-5:3", Reason: "InvalidTransition", ParkedID: "o-5:3:parked"}},
		DeadLettered: []Entry{
			{MessageID: "o-4:2", SessionID: "o-4", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: 5},
			{MessageID: "o-5:2", SessionID: "o-5", Reason: broker.ReasonMaxDeliveryCountExceeded, DeliveryCount: 6, Removed: true},
		},
		MaxDelivery:     5,
		CallsPerSession: 1,
		SentIDs:         map[string]bool{"o-4:2": true, "o-5:2": true},
	}
	for _, c := range in.Completions {
		in.SentIDs[c.MessageID] = true
	}
	return in
}

func TestCheckSessionsWithDeadLetters(t *testing.T) {
	t.Parallel()
	bad := Completion{Queue: "order-status", SessionID: "o-4", MessageID: "o-4:bad", Subject: "OrderStatusChanged",
		Body: []byte("{oops"), DeliveryCount: 1, Result: "Parked"}
	tests := []struct {
		name   string
		change func(*CheckInput)
		want   []string
	}{
		{"results, rows and invalid transitions are not judged", func(*CheckInput) {}, nil},
		{
			"the same run without the dead-lettered messages is wrong", func(in *CheckInput) {
				in.DeadLettered = nil
				delete(in.SentIDs, "o-4:2")
				delete(in.SentIDs, "o-5:2")
			},
			[]string{
				"message o-5:3 (first delivery): handler answered Parked, want Applied",
				"message o-4:3 (first delivery): handler answered Applied, want Parked",
				"message o-4:payment-timeout (first delivery): handler answered Stale, want Applied", // its row moved on, the fold did not
				"order o-4: row Shipped/3, want Cancelled/1",
				"order o-5: row Cancelled/2, want Paid/3",
				"message o-4:3: want it parked (InvalidTransition), it was not",
				"message o-5:3: parked (InvalidTransition), but it is not poison",
			},
		},
		{
			"a bad payload must still be parked", func(in *CheckInput) {
				in.Completions = append(in.Completions, bad)
				in.SentIDs[bad.MessageID] = true
			},
			[]string{"message o-4:bad: want it parked (InvalidPayload), it was not"},
		},
		{
			"a bad payload parked", func(in *CheckInput) {
				in.Completions = append(in.Completions, bad)
				in.SentIDs[bad.MessageID] = true
				in.Parked = append(in.Parked, Entry{MessageID: "o-4:bad", Reason: "InvalidPayload", ParkedID: "o-4:bad:parked"})
			},
			nil,
		},
		{
			"parked for a reason that does not depend on the state, but not poison", func(in *CheckInput) {
				in.Parked = append(in.Parked, Entry{MessageID: "o-4:3", Reason: "InvalidPayload", ParkedID: "o-4:3:parked"})
			},
			[]string{"message o-4:3: parked (InvalidPayload), but it is not poison"},
		},
		{
			"parked twice", func(in *CheckInput) {
				in.Parked = append(in.Parked, Entry{MessageID: "o-5:3", Reason: "InvalidTransition", ParkedID: "o-5:3:parked:2"})
			},
			[]string{"message o-5:3: parked 2 times"},
		},
		{
			"dead-lettered with a reason the broker never gives", func(in *CheckInput) { in.DeadLettered[1].Reason = "" },
			[]string{`dead-lettered message o-5:2: reason ""`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := deadRun()
			tt.change(&in)
			got := Check(in)
			if len(got) != len(tt.want) {
				t.Fatalf("violations: got %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d: got %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
