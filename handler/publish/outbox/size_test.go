package outbox_test

import (
	"context"
	"encoding/base64"
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

// TestCommitChecksOwnProperties: a string property of the producer's own
// entity over 64 KiB as Table Storage counts it (UTF-16: 32 K code units)
// or a binary one over 64 KiB ("Understanding the Table service data
// model", Property types) fails the commit with ErrTooLarge from the
// check, before anything is sent; within the limit it commits.
func TestCommitChecksOwnProperties(t *testing.T) {
	c, _ := newTable(t)
	tbl, err := outbox.NewTable(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entity := func(key string, props map[string]any) []byte {
		e := map[string]any{"PartitionKey": "o-1", "RowKey": key}
		for k, v := range props {
			e[k] = v
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bin := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	tests := []struct {
		name   string
		entity []byte
		tooBig bool
	}{
		{"a 100 KiB string", entity("own:a", map[string]any{"S": strings.Repeat("x", 100<<10)}), true},
		{"a string of 32 K + 1 code units", entity("own:b", map[string]any{"S": strings.Repeat("x", 32<<10+1)}), true},
		{"16 K + 1 characters outside the BMP", entity("own:c", map[string]any{"S": strings.Repeat("😀", 16<<10+1)}), true},
		{"binary of 64 KiB + 1", entity("own:d", map[string]any{"B": bin(64<<10 + 1), "B@odata.type": "Edm.Binary"}), true},
		{"a string of 30,000 code units: within", entity("own:e", map[string]any{"S": strings.Repeat("x", 30_000)}), false},
		{"binary of 60,000 bytes: within", entity("own:f", map[string]any{"B": bin(60_000), "B@odata.type": "Edm.Binary"}), false},
	}
	committed := 0
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := outbox.Entity{ActionType: aztables.TransactionTypeAdd, Entity: tc.entity}
			err := tbl.Commit(ctx, "o-1", op, outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: contract.Created, Sequence: int64(i + 1)}))
			switch {
			case tc.tooBig && (!errors.Is(err, outbox.ErrTooLarge) || strings.Contains(err.Error(), "HTTP")):
				t.Errorf("Commit: %v; want ErrTooLarge from the check, before the service is asked", err)
			case !tc.tooBig && err != nil:
				t.Errorf("Commit: %v; want it committed", err)
			case !tc.tooBig:
				committed++
			}
		})
	}
	if recs, err := tbl.Pending(ctx, 100); err != nil || len(recs) != committed {
		t.Errorf("pending %d, %v; want the %d commits within the limit", len(recs), err, committed)
	}
}
