package dltable

import (
	"crypto/rand"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

func TestOrderKey(t *testing.T) {
	tests := []struct {
		orderID string
		want    string
	}{
		{"o-1", "o~o-1"},
		{"o'1 ü", "o~o'1 ü"},
		{strings.Repeat("a", 256), "o~" + strings.Repeat("a", 256)},
		// Hashed: hex SHA-256 of the order id.
		// Hashed: the hex SHA-256 of the empty string.
		{"", "h~e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	for _, tt := range tests {
		if got := orderKey(tt.orderID); got != tt.want {
			t.Errorf("orderKey(%q) = %q, want %q", tt.orderID, got, tt.want)
		}
	}
	for _, id := range []string{"a/b", `a\b`, "a#b", "a?b", "a\tb", "a\x00b", "a\x7fb", "a\u0085b", strings.Repeat("a", 257), "\xff"} {
		got := orderKey(id)
		if !strings.HasPrefix(got, "h~") || len(got) != 2+64 || !legalKey(got) {
			t.Errorf("orderKey(%q) = %q, want h~ and 64 hex digits", id, got)
		}
	}
	if orderKey("a/b") == orderKey("a\\b") {
		t.Error("two illegal order ids share a key")
	}
}

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		status int
		code   string
		want   error
	}{
		{412, "UpdateConditionNotSatisfied", dlstore.ErrConflict},
		{409, "EntityAlreadyExists", dlstore.ErrConflict},
		{404, "ResourceNotFound", dlstore.ErrNotFound},
		{404, "TableNotFound", dlstore.ErrUnavailable},
		{403, "AuthorizationPermissionMismatch", dlstore.ErrUnavailable},
		{408, "", dlstore.ErrUnavailable},
		{429, "", dlstore.ErrUnavailable},
		{500, "InternalError", dlstore.ErrUnavailable},
		{503, "ServerBusy", dlstore.ErrUnavailable},
		{413, "RequestBodyTooLarge", dlstore.ErrTooLarge},
		{400, "EntityTooLarge", dlstore.ErrTooLarge},
		{400, "PropertyValueTooLarge", dlstore.ErrTooLarge},
		{400, "InvalidInput", ErrStorage},
		{409, "TableBeingDeleted", dlstore.ErrUnavailable},
		{409, "SomethingElse", ErrStorage},
	}
	for _, tt := range tests {
		err := classify(t.Context(), "deadletters", &azcore.ResponseError{StatusCode: tt.status, ErrorCode: tt.code})
		if !errors.Is(err, tt.want) {
			t.Errorf("classify(HTTP %d %s) = %v, want %v", tt.status, tt.code, err, tt.want)
		}
	}
}

// TestTransactionErrorsOnAzurite checks that the failures of real
// transactions are classified from the failed operation inside the
// answer, not from its outer 202.
func TestTransactionErrorsOnAzurite(t *testing.T) {
	s, err := Open(testenv.Azurite(t), "dlbatch"+rand.Text(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.EnsureTable(ctx); err != nil {
		t.Fatal(err)
	}
	r := row{"PartitionKey": "p", "RowKey": "r", colKind: "x"}
	add := aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: r.json()}
	if err := s.submit(ctx, []aztables.TransactionAction{add}); err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	stale := azcore.ETag(`W/"datetime'2000-01-01T00%3A00%3A00.0000000Z'"`)
	other := row{"PartitionKey": "p", "RowKey": "s", colKind: "x"}
	tests := []struct {
		name    string
		actions []aztables.TransactionAction
		want    error
		code    string
	}{
		{"insert of an existing row", []aztables.TransactionAction{
			{ActionType: aztables.TransactionTypeAdd, Entity: other.json()}, add}, dlstore.ErrConflict, "EntityAlreadyExists"},
		{"replace with a stale ETag", []aztables.TransactionAction{
			{ActionType: aztables.TransactionTypeAdd, Entity: other.json()},
			{ActionType: aztables.TransactionTypeUpdateReplace, Entity: r.json(), IfMatch: &stale}}, dlstore.ErrConflict, "UpdateConditionNotSatisfied"},
		{"replace of a missing row", []aztables.TransactionAction{
			{ActionType: aztables.TransactionTypeUpdateReplace, Entity: row{"PartitionKey": "p", "RowKey": "gone"}.json(), IfMatch: &stale}}, dlstore.ErrNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.submit(ctx, tt.actions)
			if !errors.Is(err, tt.want) || (tt.code != "" && tableerr.CodeOf(err) != tt.code) {
				t.Fatalf("submit: %v (code %q); want %v, code %q", err, tableerr.CodeOf(err), tt.want, tt.code)
			}
			// All or nothing: the other row of the transaction is not there.
			if _, err := s.getRow(ctx, "p", "s"); !errors.Is(err, dlstore.ErrNotFound) {
				t.Errorf("row s after the failed transaction: %v, want ErrNotFound", err)
			}
		})
	}
}

func fullEntry() dlstore.Entry {
	return dlstore.Entry{ID: "dlq-00000000000000000001-abcdef01", Source: dlstore.DLQ, SequenceNumber: -1 << 63, MessageID: "m\x00",
		OrderID: "o/1", SessionID: "s", Subject: "Sub", ContentType: "ct", CorrelationID: "c", Body: []byte{0, 1, 0xff},
		Properties: map[string]any{"s": "v\x00ü", "b": true, "f": false, "i": int64(math.MinInt64), "x": math.Inf(-1),
			"nan": math.NaN(), "t": time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), "t2": time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
			"t3": time.Unix(-5, 7).UTC(), "empty": ""},
		Reason: "R", Description: "D\nE", DeliveryCount: math.MaxInt32, EnqueuedTime: time.Unix(1, 2).UTC(),
		StoredAt: time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.UTC), Group: "G", ReplayCount: 3, State: dlstore.ReplayDue,
		UpdatedAt: time.Date(2026, 12, 1, 9, 1, 0, 0, time.UTC), Actions: 4, ClaimedBy: "me", ClaimedAt: time.Date(2026, 12, 1, 9, 1, 0, 0, time.UTC),
		NewMessageID: "n"}
}

func TestCodecRoundTrip(t *testing.T) {
	e := fullEntry()
	b, err := encodeEntry(e, 42, formatEntry)
	if err != nil {
		t.Fatal(err)
	}
	got, v, err := decodeEntry(b)
	if err != nil || v != 42 {
		t.Fatalf("decodeEntry = version %d, %v", v, err)
	}
	nan := got.Properties["nan"].(float64)
	if !math.IsNaN(nan) {
		t.Errorf("nan read back as %v", nan)
	}
	delete(got.Properties, "nan")
	delete(e.Properties, "nan")
	if !reflect.DeepEqual(got, e) {
		t.Errorf("decodeEntry(encodeEntry(e)) =\n%+v\nwant\n%+v", got, e)
	}
	summary, err := encodeEntry(e, 7, formatSummary)
	if err != nil {
		t.Fatal(err)
	}
	got, v, err = decodeEntry(summary)
	want := e
	want.Body, want.Properties = nil, nil
	if err != nil || v != 7 || !reflect.DeepEqual(got, want) {
		t.Errorf("summary read back = %+v, %d, %v; want %+v", got, v, err, want)
	}
	a := dlstore.AuditEntry{EntryID: e.ID, OrderID: "o/1", N: 2, At: e.StoredAt, Action: "replayed", From: dlstore.ReplayDue,
		To: dlstore.Replayed, Actor: "x", Source: dlstore.Poison, SequenceNumber: 9, MessageID: "m", Reason: "r", NewMessageID: "n", Detail: "d"}
	if got, err := decodeAudit(encodeAudit(a)); err != nil || got != a {
		t.Errorf("decodeAudit(encodeAudit(a)) = %+v, %v; want %+v", got, err, a)
	}
	// Every cut record is refused, never misread.
	for i := range len(b) {
		if _, _, err := decodeEntry(b[:i]); !errors.Is(err, errCorrupt) {
			t.Fatalf("decodeEntry of the first %d of %d bytes: %v, want errCorrupt", i, len(b), err)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	b, _ := encodeEntry(fullEntry(), 1, formatEntry)
	f.Add(b)
	s, _ := encodeEntry(fullEntry(), 1, formatSummary)
	f.Add(s)
	f.Add(encodeAudit(dlstore.AuditEntry{EntryID: "x", N: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, v, err := decodeEntry(b)
		if err != nil {
			_, _ = decodeAudit(b)
			return
		}
		// What decodes encodes back to the same record.
		again, err := encodeEntry(e, v, b[0])
		if err != nil {
			t.Fatalf("encodeEntry of a decoded entry: %v", err)
		}
		e2, v2, err := decodeEntry(again)
		if err != nil || v2 != v || !reflect.DeepEqual(stripNaN(e2), stripNaN(e)) {
			t.Fatalf("round trip changed the entry: %+v, %v", e2, err)
		}
	})
}

func stripNaN(e dlstore.Entry) dlstore.Entry {
	for k, v := range e.Properties {
		if f, ok := v.(float64); ok && math.IsNaN(f) {
			e.Properties[k] = "NaN"
		}
	}
	return e
}

// TestLargestRowFits: the entry row of the largest message Service Bus
// allows fits Table Storage's entity limit, chunk by chunk.
func TestLargestRowFits(t *testing.T) {
	e := fullEntry()
	e.Body = make([]byte, dlstore.MaxBody)
	e.Properties = map[string]any{"p": strings.Repeat("x", dlstore.MaxProperties-1)}
	r, err := entryRow(e, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := fits(r); err != nil {
		t.Fatalf("largest message: %v", err)
	}
	for k, v := range r {
		if b, ok := v.([]byte); ok && len(b) > 64<<10 {
			t.Errorf("column %s holds %d bytes, more than a property may", k, len(b))
		}
	}
	if n := r.size(); n < dlstore.MaxBody+dlstore.MaxProperties || n > maxEntity {
		t.Errorf("entity size %d, want between %d and %d", n, dlstore.MaxBody+dlstore.MaxProperties, maxEntity)
	}
}

func TestClassifyResponseError(t *testing.T) {
	resp := &http.Response{StatusCode: 404, Header: http.Header{"X-Ms-Error-Code": {"TableNotFound"}}, Request: &http.Request{Method: "GET"}}
	err := classify(t.Context(), "deadletters", &azcore.ResponseError{StatusCode: 404, ErrorCode: "TableNotFound", RawResponse: resp})
	if !errors.Is(err, dlstore.ErrUnavailable) || !strings.Contains(err.Error(), "table deadletters does not exist; infra creates it") {
		t.Errorf("classify(TableNotFound) = %v", err)
	}
}
