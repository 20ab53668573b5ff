// Package store defines what every order-row backend shares: the row, the
// opaque ETag, and the sentinel errors that adapters classify their SDK
// errors into once, so callers only ever use errors.Is.
//
// Backends (memstore, tablestore) return concrete types; their consumers
// declare the small interfaces they need. The conformance suite in storetest
// runs against every backend.
package store

import (
	"errors"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Sentinel errors. Adapters wrap them with %w and the operation and key.
var (
	// ErrConflict: a conditional write lost: insert of a row that exists
	// (HTTP 409) or replace with an ETag that no longer matches (HTTP 412).
	ErrConflict = errors.New("store: condition failed")
	// ErrNotFound: the row does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrTransient: a timeout, throttling, 5xx or connection failure; the
	// same call may succeed later.
	ErrTransient = errors.New("store: transient failure")
)

// ETag identifies one version of a row. The zero value matches nothing.
type ETag string

// Row is one order's stored state and the version it was read at.
type Row struct {
	OrderID string
	State   order.State
	ETag    ETag
}

// The recovery marker: one row of the order table, outside every order's
// partition, that says until when the fleet is recovering from an outage
// of the table (see package recovery). Backends implement it with
// RecoveringUntil, which reads it (the zero time when there is none), and
// RaiseRecovering, which moves it later and never earlier: a conditional
// write (insert-if-absent, else replace If-Match the ETag read) that
// rereads and decides again when another writer won, so two writers leave
// the later of their two times.
const (
	// RecoveryPartitionKey is the marker's PartitionKey. It is longer than
	// any order id (contract.MaxIDLength: an order id is a Service Bus
	// SessionId, at most 128 characters) and within Table Storage's 1 KiB
	// keys, so no order can take its partition; it says what it is to
	// anyone who browses the table.
	RecoveryPartitionKey = "orderstatus-recovery-marker.not-an-order.its-partition-key-is-longer-than-any-order-id-which-is-a-service-bus-session-id-of-at-most-128-characters"
	// RecoveryRowKey is the marker's RowKey; an order's row is "status".
	RecoveryRowKey = "recovering"
)

// MaxRecoveryConflicts bounds how often RaiseRecovering rereads after a
// lost conditional write before it gives up with an error matching
// ErrConflict and ErrTransient.
const MaxRecoveryConflicts = 10

// RecoveryTime is the time a backend stores for a marker raised to t: t in
// UTC rounded up to the whole millisecond (the precision every backend
// keeps), so that the stored marker is never earlier than the one asked for.
func RecoveryTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	t = t.UTC().Round(0)
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}
