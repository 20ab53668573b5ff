package store_test

import (
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// No order id can take the recovery marker's partition, and Table Storage
// takes it as a key (at most 1 KiB, none of / \ # ?).
func TestRecoveryPartitionKeyIsNoOrderID(t *testing.T) {
	if err := contract.ValidateOrderID(store.RecoveryPartitionKey); err == nil {
		t.Fatalf("ValidateOrderID(%q) = nil, want an error: an order could take the marker's partition", store.RecoveryPartitionKey)
	}
	if n := len(store.RecoveryPartitionKey); n > 1024 {
		t.Fatalf("RecoveryPartitionKey is %d bytes, want at most 1 KiB", n)
	}
	// Only the length keeps it from being an order id: the rest of it is
	// legal, so Table Storage takes it.
	if err := contract.ValidateOrderID(store.RecoveryPartitionKey[:contract.MaxIDLength]); err != nil {
		t.Fatalf("its first %d characters are not a legal key: %v", contract.MaxIDLength, err)
	}
	if store.RecoveryRowKey == "status" {
		t.Fatal("RecoveryRowKey is an order row's RowKey")
	}
}

func TestRecoveryTime(t *testing.T) {
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	berlin := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		in   time.Time
		want time.Time
	}{
		{"zero", time.Time{}, time.Time{}},
		{"whole millisecond", base.Add(5 * time.Millisecond), base.Add(5 * time.Millisecond)},
		{"rounded up, never down", base.Add(5*time.Millisecond + time.Nanosecond), base.Add(6 * time.Millisecond)},
		{"in UTC", base.In(berlin).Add(999 * time.Microsecond), base.Add(time.Millisecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := store.RecoveryTime(tt.in)
			if !got.Equal(tt.want) || (!got.IsZero() && got.Location() != time.UTC) {
				t.Fatalf("RecoveryTime(%v) = %v, want %v in UTC", tt.in, got, tt.want)
			}
			if got.Before(tt.in) {
				t.Fatalf("RecoveryTime(%v) = %v is earlier than asked", tt.in, got)
			}
		})
	}
}
