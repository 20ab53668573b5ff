// Package store defines what every order-row backend shares: the row, the opaque
// ETag and the sentinel errors; every backend passes the storetest conformance suite.
package store

import (
	"context"
	"errors"

	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Backend is an order-row store: a conditional insert, a conditional replace
// (on the ETag of a read) and a read, each answering the sentinels below.
type Backend interface {
	Get(ctx context.Context, orderID string) (Row, error)
	Insert(ctx context.Context, orderID string, s order.State) (ETag, error)
	Replace(ctx context.Context, orderID string, s order.State, etag ETag) (ETag, error)
}

// Sentinel errors. Adapters wrap them with %w and the operation and key.
var (
	// ErrConflict: a conditional write lost (409 on insert, 412 on replace).
	ErrConflict = errors.New("store: condition failed")
	// ErrNotFound: the row does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrTransient: timeout, throttling, 5xx or connection failure; retry later.
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
