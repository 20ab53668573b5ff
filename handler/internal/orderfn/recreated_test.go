package orderfn

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// An order created again within the duplicate-detection window (a
// higher-sequence Created) gets a check of its own, and the first
// Created's check does nothing to it: only the check of the Created in
// effect cancels the order.
func TestRecreatedOrderGetsItsOwnCheck(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	for _, seq := range []int64{1, 2} {
		if code, a := r.post(t, hostInvocation(statusMsg("o-1", seq, order.Created), 1)); code != http.StatusOK || a.ReturnValue["result"] != "Applied" {
			t.Fatalf("Created %d: %d %v", seq, code, a.ReturnValue)
		}
	}
	if len(r.bus.kept) != 2 || r.bus.kept[0].MessageID == r.bus.kept[1].MessageID {
		t.Fatalf("scheduled %d checks (%v), want one per Created with distinct MessageIds", len(r.bus.kept), r.bus.kept)
	}
	first, second := r.bus.kept[0], r.bus.kept[1]
	code, a := r.post(t, hostInvocation(first, 1))
	if code != http.StatusOK || a.ReturnValue["result"] != string(order.Stale) {
		t.Fatalf("first Created's check: %d %v, want 200 Stale", code, a.ReturnValue)
	}
	if row, err := r.mem.Get(t.Context(), "o-1"); err != nil || row.State.Status != order.Created {
		t.Fatalf("after the first check the order is %+v, %v; want still Created", row.State, err)
	}
	code, a = r.post(t, hostInvocation(second, 1))
	if code != http.StatusOK || a.ReturnValue["result"] != string(order.Applied) {
		t.Fatalf("second Created's check: %d %v, want 200 Applied", code, a.ReturnValue)
	}
	if row, _ := r.mem.Get(t.Context(), "o-1"); row.State.Status != order.Cancelled {
		t.Errorf("after its own check the order is %s, want Cancelled", row.State.Status)
	}
}

// A Created whose occurredAt is far ahead of the clock has its
// check due no later than now + the payment timeout, and the skew is
// logged.
func TestCreatedFromTheFutureIsCheckedInTime(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	m := statusMsg("o-1", 1, order.Created)
	m.Body = []byte(`{"orderId":"o-1","status":"Created","sequence":1,"occurredAt":"2026-12-02T10:00:00Z"}`) // a day ahead of now0
	if code, a := r.post(t, hostInvocation(m, 1)); code != http.StatusOK || a.ReturnValue["result"] != "Applied" {
		t.Fatalf("Created: %d %v", code, a.ReturnValue)
	}
	if len(r.bus.at) != 1 {
		t.Fatalf("scheduled %d checks, want 1", len(r.bus.at))
	}
	if limit := now0.Add(30 * time.Minute); r.bus.at[0].After(limit) {
		t.Errorf("check due %s, want no later than now + 30m = %s", r.bus.at[0], limit)
	}
	if !strings.Contains(r.stdout.String(), "occurredAt ahead of the clock") {
		t.Errorf("skew not logged:\n%s", r.stdout.String())
	}
}

// A check whose Created has not been applied yet (the order's row is at a
// lower sequence: that Created is late) is checked again later, as a
// check for an order with no row is, and cancels nothing now.
func TestCheckBeforeItsCreatedIsCheckedAgain(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	if code, a := r.post(t, hostInvocation(statusMsg("o-1", 1, order.Created), 1)); code != http.StatusOK || a.ReturnValue["result"] != "Applied" {
		t.Fatalf("Created 1: %d %v", code, a.ReturnValue)
	}
	code, a := r.post(t, hostInvocation(checkMsg("o-1:payment-timeout-2", `{"orderId":"o-1","createdSequence":2}`), 1))
	if code != http.StatusOK || a.ReturnValue["result"] != ResultRescheduled || a.ReturnValue["rescheduled"] != "o-1:payment-timeout-2:retry:1" {
		t.Fatalf("check of Created 2 before it: %d %v, want 200 Rescheduled as o-1:payment-timeout-2:retry:1", code, a.ReturnValue)
	}
	if got := testutil.ToFloat64(r.m.Rescheduled.WithLabelValues(RescheduleOrderNotFound)); got != 1 {
		t.Errorf("rescheduled{order_not_found} = %v, want 1", got)
	}
	if row, _ := r.mem.Get(t.Context(), "o-1"); row.State.Status != order.Created || row.State.LastSequence != 1 {
		t.Errorf("row %+v, want still Created/1", row.State)
	}
}

// A check of the older form (MessageId <order>:payment-timeout, no
// createdSequence: scheduled before checks named their Created, or by an
// older producer) is taken for the check of the Created in effect once
// that Created is due, and cancels it as before. Before then it belongs
// to an earlier Created (the order created again) or came early: it
// cancels nothing, and the handler makes sure the Created in effect has
// its own check.
func TestOlderCheckCancelsOnlyADueCreated(t *testing.T) {
	r := newOutageRig(t, policy, nil)
	older := hostInvocation(checkMsg("o-1:payment-timeout", `{"orderId":"o-1"}`), 1)
	created2 := statusMsg("o-1", 2, order.Created)
	created2.Body = []byte(`{"orderId":"o-1","status":"Created","sequence":2,"occurredAt":"2026-12-01T10:05:00Z"}`)
	for _, m := range []broker.Message{statusMsg("o-1", 1, order.Created), created2} { // created at 09:50, again at 10:05
		if code, a := r.post(t, hostInvocation(m, 1)); code != http.StatusOK || a.ReturnValue["result"] != "Applied" {
			t.Fatalf("%s: %d %v", m.MessageID, code, a.ReturnValue)
		}
	}
	r.bus.advance(21 * time.Minute) // 10:21: the first Created is due, the second (10:35) is not
	code, a := r.post(t, older)
	if code != http.StatusOK || a.ReturnValue["result"] != string(order.Stale) {
		t.Fatalf("older check at 10:21: %d %v, want 200 Stale", code, a.ReturnValue)
	}
	if row, _ := r.mem.Get(t.Context(), "o-1"); row.State.Status != order.Created || row.State.LastSequence != 2 {
		t.Fatalf("after the older check the row is %+v, want still Created/2", row.State)
	}
	if !strings.Contains(r.stdout.String(), `"timeout_check_at":"2026-12-01T10:35:00Z"`) {
		t.Errorf("the older check's line does not give the Created in effect's own check, due 10:35:\n%s", r.stdout.String())
	}
	r.bus.advance(14 * time.Minute) // 10:35: the Created in effect is due
	if code, a := r.post(t, older); code != http.StatusOK || a.ReturnValue["result"] != string(order.Applied) {
		t.Fatalf("older check at 10:35: %d %v, want 200 Applied", code, a.ReturnValue)
	}
	if row, _ := r.mem.Get(t.Context(), "o-1"); row.State.Status != order.Cancelled || row.State.LastSequence != 2 {
		t.Errorf("row %+v, want Cancelled/2", row.State)
	}
}

// checkMsg is a PaymentTimeoutCheck of o-1 as a producer sends it.
func checkMsg(id, body string) broker.Message {
	return broker.Message{MessageID: id, SessionID: "o-1", Subject: order.SubjectPaymentTimeout, ContentType: "application/json", Body: []byte(body)}
}
