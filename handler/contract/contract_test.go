package contract_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
)

func TestIDs(t *testing.T) {
	long := strings.Repeat("a", contract.MaxIDLength)
	sum := sha256.Sum256([]byte(long))
	hashed := "sha256-" + hex.EncodeToString(sum[:])
	fits := strings.Repeat("é", contract.MaxIDLength-len(":payment-timeout")) // 112 characters, 224 bytes
	tests := []struct{ got, want string }{
		{contract.StatusMessageID("o-1", 2), "o-1:2"},
		{contract.StatusMessageID("o-1", 9000000000), "o-1:9000000000"},
		{contract.TimeoutMessageID("o-1", 1), "o-1:payment-timeout-1"},
		{contract.TimeoutMessageID("o-1", 3), "o-1:payment-timeout-3"},
		// No Created named: the id of an older producer's or handler's check.
		{contract.TimeoutMessageID("o-1", 0), "o-1:payment-timeout"},
		// The longest order id: hashed, within 128 characters.
		{contract.StatusMessageID(long, 2), hashed + ":2"},
		{contract.TimeoutMessageID(long, 9000000000), hashed + ":payment-timeout-9000000000"},
		// Counted in characters as Service Bus counts them, not bytes.
		{contract.TimeoutMessageID(fits, 0), fits + ":payment-timeout"},
		{contract.TimeoutMessageID(fits, 1), contract.DeriveMessageID(fits, ":payment-timeout-1")},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestStatusChangedJSON(t *testing.T) {
	tests := []struct {
		c    contract.StatusChanged
		want string
	}{
		{contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2, OccurredAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
			`{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}`},
		{contract.StatusChanged{OrderID: "o-1", Status: contract.Created, Sequence: 1}, `{"orderId":"o-1","status":"Created","sequence":1}`},
	}
	for _, tc := range tests {
		got, err := json.Marshal(tc.c)
		if err != nil || string(got) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.c, got, err, tc.want)
		}
	}
	got, _ := json.Marshal(contract.PaymentTimeoutCheck{OrderID: "o-1"})
	if string(got) != `{"orderId":"o-1"}` {
		t.Errorf("Marshal(PaymentTimeoutCheck) = %s", got)
	}
	got, _ = json.Marshal(contract.PaymentTimeoutCheck{OrderID: "o-1", CreatedSequence: 2})
	if string(got) != `{"orderId":"o-1","createdSequence":2}` {
		t.Errorf("Marshal(PaymentTimeoutCheck with its Created) = %s", got)
	}
}

func TestValidate(t *testing.T) {
	ok := contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 1}
	tests := []struct {
		name string
		c    contract.StatusChanged
		ok   bool
	}{
		{"valid", ok, true},
		{"at the lower bound", contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 1, OccurredAt: contract.MinOccurredAt}, true},
		{"at the upper bound", contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 1, OccurredAt: contract.MaxOccurredAt}, true},
		{"below", contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 1, OccurredAt: contract.MinOccurredAt.Add(-time.Nanosecond)}, false},
		{"lower-case status", contract.StatusChanged{OrderID: "o-1", Status: "paid", Sequence: 1}, false},
		{"sequence 0", contract.StatusChanged{OrderID: "o-1", Status: contract.Paid}, false},
		{"bad id", contract.StatusChanged{OrderID: "o/1", Status: contract.Paid, Sequence: 1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, contract.ErrInvalid)) {
				t.Errorf("Validate(%+v) = %v, want ok = %v (errors wrap ErrInvalid)", tc.c, err, tc.ok)
			}
		})
	}
	if st, ok := contract.ParseStatus("dELIVERED"); !ok || st != contract.Delivered {
		t.Errorf("ParseStatus(dELIVERED) = %q, %v", st, ok)
	}
}

// TestTimeoutIDsAreDistinct: duplicate detection is queue-wide, so no two
// messages of different orders or kinds may share a MessageId: a check's
// id is no status change's (an order id may contain ":payment-timeout"),
// no check's of another Created or order, and no older check's (an order
// id may end in ":<digits>").
func TestTimeoutIDsAreDistinct(t *testing.T) {
	seen := map[string]string{}
	add := func(id, what string) {
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share MessageId %q", other, what, id)
		}
		seen[id] = what
	}
	for _, o := range []string{"a", "a:1", "a:payment-timeout", "a:payment-timeout-1", "a:payment-timeout:1", "a-1"} {
		for _, seq := range []int64{1, 2, 11} {
			add(contract.StatusMessageID(o, seq), fmt.Sprintf("status %q seq %d", o, seq))
			add(contract.TimeoutMessageID(o, seq), fmt.Sprintf("check of %q Created %d", o, seq))
		}
		add(contract.TimeoutMessageID(o, 0), fmt.Sprintf("older check of %q", o))
	}
}
