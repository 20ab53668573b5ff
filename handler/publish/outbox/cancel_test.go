package outbox_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokerpub"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
	"github.com/orderstatus/orderstatus/handler/publish"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
	"github.com/orderstatus/orderstatus/handler/publish/outbox/memoutbox"
)

// The two limits docs/outbox.md ("Cancelling the timeout: two limits")
// states, held here against the in-memory broker with the queue's
// duplicate detection.

func paid(order string) outbox.Intent {
	return outbox.Status(contract.StatusChanged{OrderID: order, Status: contract.Paid, Sequence: 2})
}

// pass runs one relay pass and fails the test on an error.
func pass(t *testing.T, r *outbox.Relay) outbox.PassResult {
	t.Helper()
	res, err := r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A cancel removes the handler's own check too when the handler scheduled
// it within the duplicate-detection window after the relay: they share
// the MessageId, Service Bus kept only the relay's, and the cancel leaves
// no check for the paid order. The handler scheduling first is the other
// way round: the relay's is dropped, its cancel finds nothing, and the
// handler's check stays (and finds the order paid).
func TestCancelAndTheHandlersOwnCheck(t *testing.T) {
	for _, tc := range []struct {
		name          string
		handlerFirst  bool
		wantScheduled int
	}{
		{"relay first: the cancel removes both", false, 0},
		{"handler first: its check stays", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, mb := memoutbox.New(nil), newBroker(t)
			r := outbox.NewRelay(s, publish.New(brokerpub.Sender(mb), nil), nil)
			handler := reschedule.New(mb, queue, reschedule.Policy{}, nil)
			handlerSchedules := func() {
				if _, err := handler.ScheduleCreatedCheck(ctx, "o-1", 1, time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.handlerFirst {
				handlerSchedules()
			}
			if err := s.Commit(ctx, "o-1", nil, created("o-1"), outbox.ScheduleTimeout("o-1", contract.PaymentTimeout)); err != nil {
				t.Fatal(err)
			}
			pass(t, r)
			if !tc.handlerFirst {
				handlerSchedules() // applies the Created a moment after the relay scheduled
			}
			if st := mb.Stats(queue); st.Scheduled != 1 {
				t.Fatalf("queue %+v: want one check scheduled (one MessageId, the second dropped as a duplicate)", st)
			}
			if err := s.Commit(ctx, "o-1", nil, paid("o-1"), outbox.CancelTimeout("o-1")); err != nil {
				t.Fatal(err)
			}
			if res := pass(t, r); res.Cancelled != 1 {
				t.Fatalf("pass %+v, want the cancel done", res)
			}
			if st := mb.Stats(queue); st.Scheduled != tc.wantScheduled {
				t.Errorf("after the cancel, queue %+v: want %d checks scheduled", st, tc.wantScheduled)
			}
		})
	}
}

// Producers in different tables cannot cancel each other's schedule: the
// cancel finds no timeout row in its own table, says so, is marked done,
// and the other table's check stays scheduled (harmless: it finds the
// order paid). Within one table the same cancel removes it.
func TestCancelFromAnotherTableCancelsNothing(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sameTable     bool
		wantScheduled int
	}{
		{"same table", true, 0},
		{"another table", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mb := newBroker(t)
			checkout := memoutbox.New(nil)
			payments := checkout
			if !tc.sameTable {
				payments = memoutbox.New(nil)
			}
			var log syncBuffer
			logger := slog.New(slog.NewTextHandler(&log, nil))
			if err := checkout.Commit(ctx, "o-1", nil, created("o-1"), outbox.ScheduleTimeout("o-1", contract.PaymentTimeout)); err != nil {
				t.Fatal(err)
			}
			pass(t, outbox.NewRelay(checkout, publish.New(brokerpub.Sender(mb), nil), &outbox.RelayOptions{Logger: logger}))
			if err := payments.Commit(ctx, "o-1", nil, paid("o-1"), outbox.CancelTimeout("o-1")); err != nil {
				t.Fatal(err)
			}
			if res := pass(t, outbox.NewRelay(payments, publish.New(brokerpub.Sender(mb), nil), &outbox.RelayOptions{Logger: logger})); res.Cancelled != 1 || res.Waiting != 0 {
				t.Fatalf("payments' pass %+v, want the cancel marked done", res)
			}
			if st := mb.Stats(queue); st.Scheduled != tc.wantScheduled {
				t.Errorf("queue %+v: want %d checks scheduled", st, tc.wantScheduled)
			}
			if said := strings.Contains(log.String(), "outbox cancel found no timeout"); said == tc.sameTable {
				t.Errorf("log says \"outbox cancel found no timeout\": %v, want %v:\n%s", said, !tc.sameTable, log.String())
			}
		})
	}
}
