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
