package publish

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	pub "github.com/orderstatus/orderstatus/handler/publish"
)

// TestTimeoutAfterTheHandlersOwnCheck: the handler scheduled the order's
// PaymentTimeoutCheck itself (it does when it applies the Created, with
// the same MessageId), so duplicate detection drops the producer's copy,
// and the broker returns a sequence number all the same. `timeout` does
// not advise a cancel as if it must work, and `cancel-timeout` finding
// nothing says that the check with that MessageId may be the handler's
// own, which stands.
func TestTimeoutAfterTheHandlersOwnCheck(t *testing.T) {
	mb, e := devHost(t, clock.Scaled(1))
	own, err := pub.TimeoutMessageFor("o-1", 1) // the handler's check of the Created of sequence 1
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := mb.Schedule(ctx, queue, broker.Message(own), time.Now().Add(contract.PaymentTimeout)); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, e, "timeout", "--order", "o-1")
	if r.code != ExitOK {
		t.Fatalf("timeout: %+v", r)
	}
	seq := strings.TrimSpace(r.stdout)
	if strings.Contains(r.stderr, "cancel it with:") {
		t.Errorf("timeout's lines advise a cancel as if it must work:\n%s", r.stderr)
	}
	for _, want := range []string{
		"orderstatus publish cancel-timeout --sequence " + seq,
		"duplicate detection dropped this copy",
		"the handler's own check stands",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("timeout's lines lack %q:\n%s", want, r.stderr)
		}
	}
	if st, tot := mb.Stats(queue), mb.Totals(queue); st.Scheduled != 1 || tot.DuplicatesDropped != 1 {
		t.Errorf("queue %+v, totals %+v: want the handler's check scheduled and the copy dropped", st, tot)
	}

	r = runCLI(t, e, "cancel-timeout", "--sequence", seq)
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "nothing to cancel: no scheduled message "+seq+" on order-status") {
		t.Fatalf("cancel-timeout: %+v; want exit 0 and the nothing-to-cancel line", r)
	}
	for _, want := range []string{"duplicate detection", "may be the handler's own", "stands"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("cancel-timeout's line lacks %q: %q", want, r.stdout)
		}
	}
	if st := mb.Stats(queue); st.Scheduled != 1 {
		t.Errorf("queue %+v, want the handler's own check still scheduled", st)
	}
}
