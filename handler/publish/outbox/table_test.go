package outbox_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
	"github.com/orderstatus/orderstatus/handler/publish/outbox/outboxtest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// newTable returns a client of a new table in the test Azurite, and a
// second client of the same table (another producer process).
func newTable(t *testing.T) (*aztables.Client, *aztables.Client) {
	t.Helper()
	cs := testenv.Azurite(t)
	name := "outbox" + strings.ToLower(rand.Text())[:12]
	clients := make([]*aztables.Client, 2)
	for i := range clients {
		svc, err := aztables.NewServiceClientFromConnectionString(cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = svc.NewClient(name)
	}
	tbl, err := outbox.NewTable(clients[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tbl.EnsureTable(ctx); err != nil {
		t.Fatalf("EnsureTable %s: %v", name, err)
	}
	return clients[0], clients[1]
}

// ownRow is the producer's own row of a test commit: RowKey own:<id>. A
// failing one is an insert of own:taken, which the test inserts first.
func ownRow(t *testing.T, partition, key string) []byte {
	b, err := json.Marshal(map[string]any{"PartitionKey": partition, "RowKey": key, "Status": "Created"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tableBackend(t *testing.T, c *aztables.Client) outboxtest.Backend {
	tbl, err := outbox.NewTable(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return outboxtest.Backend{
		Store: tbl,
		Commit: func(ctx context.Context, partition string, failOwn bool, intents ...outbox.Intent) error {
			key := "own:" + rand.Text()
			if failOwn {
				key = "own:taken"
				if _, err := c.AddEntity(ctx, ownRow(t, partition, key), nil); err != nil {
					t.Fatalf("insert %s/%s: %v", partition, key, err)
				}
			}
			ops := []outbox.Op{outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: ownRow(t, partition, key)}}
			for _, in := range intents {
				ops = append(ops, in)
			}
			err := tbl.Commit(ctx, partition, ops...)
			if failOwn {
				// Leave only what the commit wrote, not the test's own
				// pre-insert, for Own to count.
				if _, derr := c.DeleteEntity(ctx, partition, key, nil); derr != nil {
					t.Fatalf("delete %s/%s: %v", partition, key, derr)
				}
			}
			return err
		},
		Own: func(ctx context.Context, partition string) (int, error) {
			filter := "PartitionKey eq '" + partition + "' and RowKey ge 'own:' and RowKey lt 'own;'"
			pager := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
			n := 0
			for pager.More() {
				page, err := pager.NextPage(ctx)
				if err != nil {
					return 0, err
				}
				n += len(page.Entities)
			}
			return n, nil
		},
	}
}

// TestConformanceAzurite runs the Store suite on Table Storage (Azurite):
// real entity-group transactions.
func TestConformanceAzurite(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) (outboxtest.Backend, outboxtest.Backend) {
		a, b := newTable(t)
		return tableBackend(t, a), tableBackend(t, b)
	})
}

func TestCommitFailureIsClassified(t *testing.T) {
	c, _ := newTable(t)
	tbl, err := outbox.NewTable(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	add := outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: ownRow(t, "o-1", "state")}
	if err := tbl.Commit(ctx, "o-1", add, outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Created, Sequence: 1})); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	// The same insert again: Azurite answers the batch 202 with the
	// failed operation's 409 inside.
	err = tbl.Commit(ctx, "o-1", add, outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2}))
	if !errors.Is(err, outbox.ErrConflict) {
		t.Errorf("insert of an existing row: %v, want ErrConflict", err)
	}
	// A stale ETag on the producer's row: 412 inside the batch.
	stale := outbox.Entity{ActionType: aztables.TransactionTypeUpdateReplace, Entity: ownRow(t, "o-1", "state"), IfMatch: etagPtr(`W/"datetime'2000-01-01T00%3A00%3A00.0000000Z'"`)}
	err = tbl.Commit(ctx, "o-1", stale, outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2}))
	if !errors.Is(err, outbox.ErrConflict) {
		t.Errorf("replace on a stale ETag: %v, want ErrConflict", err)
	}
	recs, err := tbl.Pending(ctx, 100)
	if err != nil || len(recs) != 1 {
		t.Errorf("pending %+v, %v; want the first commit's one record", recs, err)
	}
}

func TestCommitRefusesWhatCannotFit(t *testing.T) {
	c, _ := newTable(t)
	tbl, err := outbox.NewTable(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var many []outbox.Op
	for i := range 100 {
		many = append(many, outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: int64(i + 1)}))
	}
	big := outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: ownRow(t, "o-1", strings.Repeat("k", 10)+string(make([]byte, 0)))}
	var huge map[string]any
	_ = json.Unmarshal(big.Entity, &huge)
	huge["Blob"] = strings.Repeat("x", outbox.MaxEntityBytes)
	hb, _ := json.Marshal(huge)
	tests := []struct {
		name string
		ops  []outbox.Op
		want error
	}{
		{"101 operations with the counter", many, outbox.ErrTooLarge},
		{"an entity over 1 MiB", []outbox.Op{outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: hb}}, outbox.ErrTooLarge},
		{"another partition's entity", []outbox.Op{outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: ownRow(t, "o-2", "state")}}, contract.ErrInvalid},
		{"a row in the outbox's range", []outbox.Op{outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: ownRow(t, "o-1", "outbox:r:1")}}, contract.ErrInvalid},
		{"nothing to commit", nil, contract.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tbl.Commit(ctx, "o-1", tc.ops...); !errors.Is(err, tc.want) {
				t.Errorf("Commit: %v, want %v", err, tc.want)
			}
		})
	}
	if recs, err := tbl.Pending(ctx, 100); err != nil || len(recs) != 0 {
		t.Errorf("pending %d, %v; want nothing written", len(recs), err)
	}
}

func etagPtr(s string) *azcore.ETag { e := azcore.ETag(s); return &e }
