package publish

import (
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
)

// Each Created of an order has a check of its own: scheduling the check
// of a re-created order (a higher-sequence Created, within the
// duplicate-detection window) is not dropped as a duplicate of the first,
// and cancel-timeout --sequence N cancels the check N names and no other.
func TestTimeoutPerCreated(t *testing.T) {
	mb, e := devHost(t, clock.Real())
	first := runCLI(t, e, "timeout", "--order", "o-1", "--created", "1")
	second := runCLI(t, e, "timeout", "--order", "o-1", "--created", "3")
	if first.code != ExitOK || second.code != ExitOK {
		t.Fatalf("timeout: %+v, %+v", first, second)
	}
	if id := contract.TimeoutMessageID("o-1", 3); !strings.Contains(second.stderr, " "+id+" ") {
		t.Errorf("second timeout: %q; want MessageId %s", second.stderr, id)
	}
	if st := mb.Stats(queue); st.Scheduled != 2 {
		t.Fatalf("queue %+v, want 2 checks scheduled (one per Created)", st)
	}
	seq := strings.TrimSpace(second.stdout)
	if r := runCLI(t, e, "cancel-timeout", "--sequence", seq); r.code != ExitOK || !strings.HasPrefix(r.stdout, "cancelled scheduled message "+seq) {
		t.Fatalf("cancel-timeout: %+v", r)
	}
	if st := mb.Stats(queue); st.Scheduled != 1 {
		t.Errorf("after cancelling the second Created's check, queue %+v: want the first's still scheduled", st)
	}
}
