package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
)

// wide is a producer's row in o-1 with n string properties P000... of
// value each.
func wide(t *testing.T, key string, n int, value string) []byte {
	t.Helper()
	e := map[string]any{"PartitionKey": "o-1", "RowKey": key}
	for i := range n {
		e[fmt.Sprintf("P%03d", i)] = value
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCommitCountsEntitiesAsTableStorage: an entity's size is checked as
// Table Storage counts it, strings in UTF-16 ("Understanding the Table
// service data model"), so an ASCII-heavy entity between 0.5 and 1 MiB in
// UTF-8 is over the 1 MiB limit and refused before anything is sent; so is
// one whose characters outside the BMP (2 UTF-16 units each) take it over.
func TestCommitCountsEntitiesAsTableStorage(t *testing.T) {
	c, _ := newTable(t)
	tbl, err := outbox.NewTable(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x := strings.Repeat("x", 30_000) // 60,000 bytes in UTF-16: within the 64 KiB of a string property
	tests := []struct {
		name   string
		entity []byte
		want   error
	}{
		{"ASCII, 600,000 characters", wide(t, "own:a", 20, x), outbox.ErrTooLarge},
		{"ASCII, 930,000 characters", wide(t, "own:b", 31, x), outbox.ErrTooLarge},
		{"ASCII, 540,000 characters", wide(t, "own:c", 18, x), outbox.ErrTooLarge},
		// 400,000 ASCII and 70,000 emoji: 680,000 bytes in UTF-8, 940,000
		// UTF-16 units if an emoji were one, 1,080,000 bytes as it is two.
		{"ASCII with characters outside the BMP", func() []byte {
			e := map[string]any{"PartitionKey": "o-1", "RowKey": "own:d"}
			for i := range 10 {
				e[fmt.Sprintf("A%d", i)] = strings.Repeat("x", 30_000)
				e[fmt.Sprintf("E%d", i)] = strings.Repeat("😀", 7_000)
			}
			e["A10"] = strings.Repeat("x", 30_000)
			e["A11"] = strings.Repeat("x", 30_000)
			e["A12"] = strings.Repeat("x", 30_000)
			e["A13"] = strings.Repeat("x", 10_000)
			b, _ := json.Marshal(e)
			return b
		}(), outbox.ErrTooLarge},
		{"ASCII, 480,000 characters: within", wide(t, "own:e", 16, x), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.entity) >= outbox.MaxEntityBytes {
				t.Fatalf("the entity is %d bytes in UTF-8: want it under %d, where only UTF-16 takes it over", len(tc.entity), outbox.MaxEntityBytes)
			}
			op := outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: tc.entity}
			err := tbl.Commit(ctx, "o-1", op, outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Created, Sequence: 1}))
			if (tc.want == nil && err != nil) || !errors.Is(err, tc.want) {
				t.Errorf("Commit of %d bytes in UTF-8: %v, want %v", len(tc.entity), err, tc.want)
			}
		})
	}
	if recs, err := tbl.Pending(ctx, 100); err != nil || len(recs) != 1 {
		t.Errorf("pending %d, %v; want the one commit within the limit", len(recs), err)
	}
}
