package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/publish"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
)

// Checkout keeps its orders in its own table "checkout" (PartitionKey the
// order id). Placing an order writes the order's row, its Created and its
// payment timeout in one transaction; the relay in the same process sends
// them.
func ExampleTable_Commit() {
	ctx := context.Background()
	var (
		svc    *aztables.ServiceClient // the producer's account
		client *azservicebus.Client    // the order-status namespace
	)
	tbl, err := outbox.NewTable(svc.NewClient("checkout"), nil)
	if err != nil {
		panic(err)
	}
	relay := outbox.NewRelay(tbl, publish.NewServiceBus(client, nil), &outbox.RelayOptions{Logger: slog.Default()})
	go relay.Run(ctx) // until ctx ends: sends, marks, purges

	// Checkout places order o-1: its own row and its two messages, all or none.
	row, _ := json.Marshal(map[string]any{"PartitionKey": "o-1", "RowKey": "order", "Total": 42})
	err = tbl.Commit(ctx, "o-1",
		outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: row},
		outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Created, Sequence: 1, OccurredAt: time.Now()}),
		outbox.ScheduleTimeout("o-1", contract.PaymentTimeout))
	if err != nil {
		panic(err) // errors.Is(err, outbox.ErrConflict): the order exists already; nothing was written
	}

	// Payments (another process, same table) records the payment and
	// cancels the timeout Checkout's relay scheduled: the relay cancels it
	// by the sequence number recorded when it was sent.
	var etag azcore.ETag // from Payments' read of the order row
	paid, _ := json.Marshal(map[string]any{"PartitionKey": "o-1", "RowKey": "order", "Total": 42, "Paid": true})
	err = tbl.Commit(ctx, "o-1",
		outbox.Entity{ActionType: aztables.TransactionTypeUpdateMerge, Entity: paid, IfMatch: &etag},
		outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2, OccurredAt: time.Now()}),
		outbox.CancelTimeout("o-1"))
	if err != nil {
		panic(err) // ErrConflict: someone changed the order since the read; reread and decide again
	}
}

// A producer on another database writes the records Encode returns in its
// own transaction, and implements outbox.Store on that table for the
// relay (outboxtest.Run is the suite that Store must pass).
func ExampleEncode() {
	ctx := context.Background()
	var db *sql.DB
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE orders SET paid = true, version = version + 1 WHERE id = $1 AND version = $2`, "o-1", 7); err != nil {
		panic(err)
	}
	recs, err := outbox.Encode("o-1", time.Now(),
		outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2, OccurredAt: time.Now()}),
		outbox.CancelTimeout("o-1"))
	if err != nil {
		panic(err) // errors.Is(err, contract.ErrInvalid): nothing to roll back yet
	}
	for _, r := range recs { // seq: a serial column gives commit order
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO outbox (partition, kind, order_id, message_id, session_id, subject, content_type, body, after_ms, committed_at, state)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending')`,
			r.Partition, r.Kind, r.OrderID, r.Message.MessageID, r.Message.SessionID, r.Message.Subject,
			r.Message.ContentType, r.Message.Body, r.After.Milliseconds(), r.CommittedAt); err != nil {
			panic(err)
		}
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
}
