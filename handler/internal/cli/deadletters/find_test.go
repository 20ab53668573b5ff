package deadletters

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// tableRows is an order table that answers as Table Storage does: a key it
// cannot hold fails as a transient error (after the retries, in Azure),
// any other is read from rows. It records the keys it was asked for.
type tableRows struct {
	rows OrderRows
	mu   sync.Mutex
	asks []string
}

func (t *tableRows) Get(ctx context.Context, orderID string) (store.Row, error) {
	t.mu.Lock()
	t.asks = append(t.asks, orderID)
	t.mu.Unlock()
	if strings.ContainsAny(orderID, `/\#?`) || strings.ContainsFunc(orderID, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }) {
		return store.Row{}, fmt.Errorf("tablestore: get %s: 400 OutOfRangeInput: %w", orderID, store.ErrTransient)
	}
	return t.rows.Get(ctx, orderID)
}

func (t *tableRows) asked() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.asks...)
}

// runOn runs the CLI as f.run does, with orders as the order table.
func (f *fixture) runOn(orders OrderRows, args ...string) result {
	f.t.Helper()
	var out, errOut strings.Builder
	code := Run(f.ctx, args, &out, &errOut, Env{
		Getenv:           func(k string) string { return f.env[k] },
		Dir:              f.t.TempDir(),
		Stdin:            strings.NewReader(""),
		IsTerminal:       func() bool { return false },
		StderrIsTerminal: func() bool { return false },
		Connect: func(context.Context) (*Backend, error) {
			f.connects++
			return &Backend{Broker: f.broker, Store: f.store, Orders: orders, Queues: f.q, Now: f.clk.Now, ReceiveWait: time.Millisecond}, nil
		},
	})
	return result{code, out.String(), errOut.String()}
}

// find --order with an id Table Storage cannot hold as a key (/ \\ # ?
// or a control character, U+0000 to U+001F and U+007F to U+009F) is a
// usage error: exit 2 at once, one line naming --order, before anything
// is read. list --order still shows the dead letters that carry it.
func TestFindOrderThatIsNotATableKey(t *testing.T) {
	for _, id := range []string{"a/b", "a#b", "a?b", `a\b`, "tab\there", "nul\x00", "us\x1f", "del\x7f", "c1\u0085", "c1\u009f"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			f := newFixture(t)
			table := &tableRows{rows: f.orders}
			e := f.put(dlstore.Poison, 1, "m-1:parked", id, order.ReasonInvalidPayload, "orderId contains one of / \\ # ?")
			start := time.Now()
			res := f.runOn(table, "find", "--order", id, "--json")
			if res.code != exitUsage || !strings.Contains(res.stderr, "--order") {
				t.Errorf("exit %d, stderr %q; want %d and a usage error naming --order", res.code, res.stderr, exitUsage)
			}
			oneLineErr(t, res.stderr)
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %s, want an answer at once", took)
			}
			if asks := table.asked(); len(asks) != 0 || f.connects != 0 {
				t.Errorf("asked the order table for %q, connected %d times; want nothing read", asks, f.connects)
			}
			if l := f.runOn(table, "list", "--order", id); l.code != exitOK || !strings.Contains(l.stdout, e.ID) {
				t.Errorf("list --order: exit %d, want 0 and the entry %s:\n%s%s", l.code, e.ID, l.stdout, l.stderr)
			}
		})
	}
	// Characters a key may hold are read as before.
	f := newFixture(t)
	table := &tableRows{rows: f.orders}
	for _, id := range []string{"a b", "a~b", "a|b", "\u00a0x", "é"} {
		if res := f.runOn(table, "find", "--order", id); res.code != exitFailure || !strings.Contains(res.stderr, "nothing known of order") {
			t.Errorf("find --order %q: exit %d, stderr %q; want 1 and nothing known", id, res.code, res.stderr)
		}
	}
}

// find --order reads the order table and the store with the id as given:
// ids that differ in case are different orders.
func TestFindOrderKeepsTheIDsCase(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"Ord-Mixed", "ord-mixed", "ORD-MIXED"} {
		if _, err := f.orders.Insert(f.ctx, id, order.State{Status: order.Status("Created"), LastSequence: 1,
			OccurredAt: f.clk.Now().Add(-time.Hour), UpdatedAt: f.clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	mixed := f.put(dlstore.DLQ, 1, "Ord-Mixed:2", "Ord-Mixed", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.put(dlstore.DLQ, 2, "ord-mixed:2", "ord-mixed", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	f.put(dlstore.DLQ, 3, "ORD-MIXED:2", "ORD-MIXED", broker.ReasonMaxDeliveryCountExceeded, "five deliveries")
	ls := lines(t, f.must("find", "--order", "Ord-Mixed", "--json").stdout)
	var got []string
	for _, l := range ls {
		switch l["kind"] {
		case "order":
			got = append(got, "order "+l["order"].(map[string]any)["order_id"].(string))
		case "entry":
			got = append(got, "entry "+l["entry"].(map[string]any)["order_id"].(string)+" "+l["entry"].(map[string]any)["id"].(string))
		case "audit":
			got = append(got, "audit "+l["audit"].(map[string]any)["entry_id"].(string))
		}
	}
	want := []string{"order Ord-Mixed", "entry Ord-Mixed " + mixed.ID, "audit " + mixed.ID}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("find --order Ord-Mixed = %q, want %q", got, want)
	}
}
