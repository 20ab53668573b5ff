package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// TimeoutCheckNames are the figures of the timeout-check phase.
var TimeoutCheckNames = []string{"timeout_check_servicebus_ops_per_order", "timeout_check_executions_per_order"}

// timeoutChecks measures what the handler's own payment-timeout check
// costs: the same Created-then-Paid orders with rescheduling off and on,
// drained; the differences per order in Service Bus operations and
// executions are what the guarantee adds.
func (b *runner) timeoutChecks(ctx context.Context) error {
	orders := max(20, len(b.w.Orders)/5)
	var lines []devhost.ScenarioLine
	for i := range orders {
		id := fmt.Sprintf("tc%s-%d", b.runID, i)
		for seq, st := range []string{"Created", "Paid"} {
			lines = append(lines, devhost.ScenarioLine{Subject: order.SubjectStatusChanged, SessionID: id,
				MessageID: fmt.Sprintf("%s:%d", id, seq+1), ContentType: "application/json",
				Body: []byte(fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d}`, id, st, seq+1))})
		}
	}
	measure := func(reschedule string) (ops int64, execs int, err error) {
		c := oursConfig{store: b.az.ConnectionString(), table: b.table("tc"), sessions: b.opts.InFlight, timeScale: b.opts.TimeScale,
			settings: map[string]string{"ORDER_STATUS_RETRY_RESCHEDULE": reschedule}}
		h, err := b.startHost(ctx, c)
		if err != nil {
			return 0, 0, err
		}
		defer h.Close()
		if err := waitTable(ctx, "http://"+h.Addr()); err != nil {
			return 0, 0, err
		}
		ops0 := h.Broker().Operations()
		if err := h.Play(ctx, lines); err != nil {
			return 0, 0, err
		}
		// Wait until no check is scheduled and all ran.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if err := h.WaitIdle(ctx); err != nil {
				return 0, 0, err
			}
			if h.Broker().Stats(h.Queue()).Scheduled == 0 && h.Broker().Idle(h.Queue()) {
				break
			}
			if time.Now().After(deadline) {
				return 0, 0, fmt.Errorf("bench: timeout checks: %d still scheduled after 2 minutes", h.Broker().Stats(h.Queue()).Scheduled)
			}
			select {
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		for _, in := range h.Instances() {
			execs += in.Invocations
		}
		return h.Broker().Operations() - ops0, execs, nil
	}
	opsOff, execOff, err := measure("false")
	if err != nil {
		return err
	}
	opsOn, execOn, err := measure("true")
	if err != nil {
		return err
	}
	b.results["timeout_check_servicebus_ops_per_order"] = float64(opsOn-opsOff) / float64(orders)
	b.results["timeout_check_executions_per_order"] = float64(execOn-execOff) / float64(orders)
	return nil
}
