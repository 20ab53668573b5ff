package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// statuses are an order's four in-order status changes, sequences 1 to 4.
var statuses = []order.Status{order.Created, order.Paid, order.Shipped, order.Delivered}

// Message is one workload message: an OrderStatusChanged update.
type Message struct {
	ID     string // the message id
	Update order.Update
}

// Order is one order's messages in the order they are sent (a session).
type Order struct {
	ID       string
	Messages []Message
}

// Workload is the same set of messages for every design: each order's four
// status changes in order, plus redeliveries of applied messages and stale
// replays; the expected counts say how each must settle.
type Workload struct {
	Orders                      []Order
	Applied, Duplicates, Stales int
}

// Messages is how many messages the workload has.
func (w Workload) Messages() int { return w.Applied + w.Duplicates + w.Stales }

// NewWorkload builds a workload of orders orders with prefix in their ids,
// dupShare redeliveries and staleShare stale replays, with a fixed seed.
func NewWorkload(prefix string, orders int, dupShare, staleShare float64, seed uint64) Workload {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	base := orders * len(statuses)
	dups, stales := int(float64(base)*dupShare+0.5), int(float64(base)*staleShare+0.5)
	if orders == 0 {
		dups, stales = 0, 0
	}
	// after[o][k]: the extra copies sent right after order o's sequence k+1.
	after := make([][][]int64, orders)
	for o := range after {
		after[o] = make([][]int64, len(statuses))
	}
	for range dups {
		o, k := rng.IntN(orders), rng.IntN(len(statuses))
		after[o][k] = append(after[o][k], int64(k+1)) // a duplicate of sequence k+1
	}
	for range stales {
		o, k := rng.IntN(orders), 1+rng.IntN(len(statuses)-1)
		after[o][k] = append(after[o][k], int64(1+rng.IntN(k))) // an earlier sequence
	}
	w := Workload{Orders: make([]Order, orders), Applied: base, Duplicates: dups, Stales: stales}
	for o := range orders {
		id := fmt.Sprintf("%s-o%d", prefix, o)
		msgs := make([]Message, 0, len(statuses)+2)
		for k, st := range statuses {
			seq := int64(k + 1)
			msgs = append(msgs, message(id, fmt.Sprintf("%s:%d", id, seq), st, seq))
			for i, extra := range after[o][k] {
				msgs = append(msgs, message(id, fmt.Sprintf("%s:%d:again%d-%d", id, extra, seq, i), statuses[extra-1], extra))
			}
		}
		w.Orders[o] = Order{ID: id, Messages: msgs}
	}
	return w
}

// FirstOnly is a workload of orders orders with one message each, the
// session-slot regime's shape.
func FirstOnly(prefix string, orders int) Workload {
	w := Workload{Orders: make([]Order, orders), Applied: orders}
	for o := range orders {
		id := fmt.Sprintf("%s-o%d", prefix, o)
		w.Orders[o] = Order{ID: id, Messages: []Message{message(id, id+":1", order.Created, 1)}}
	}
	return w
}

func message(orderID, messageID string, st order.Status, seq int64) Message {
	return Message{ID: messageID, Update: order.Update{OrderID: orderID, Status: st, Sequence: seq}}
}

// Lines is the workload as dev host scenario lines, order by order, each
// body with occurredAt now, as producers send them (docs/performance.md).
func (w Workload) Lines() []devhost.ScenarioLine {
	lines := make([]devhost.ScenarioLine, 0, w.Messages())
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, o := range w.Orders {
		for _, m := range o.Messages {
			body := fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d,"occurredAt":%q}`, m.Update.OrderID, m.Update.Status, m.Update.Sequence, now)
			lines = append(lines, devhost.ScenarioLine{Subject: order.SubjectStatusChanged, SessionID: o.ID,
				MessageID: m.ID, ContentType: "application/json", Body: []byte(body)})
		}
	}
	return lines
}
