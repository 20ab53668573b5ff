package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// Op names a backend operation.
type Op string

// The operations of a store.Backend.
const (
	OpGet     Op = "get"
	OpInsert  Op = "insert"
	OpReplace Op = "replace"
)

// Counting is a store.Backend that counts the calls made through it, failed ones
// included. It is safe for concurrent use.
type Counting struct {
	store.Backend
	calls map[Op]*atomic.Int64
}

var _ store.Backend = (*Counting)(nil)

// NewCounting wraps b.
func NewCounting(b store.Backend) *Counting {
	return &Counting{Backend: b, calls: map[Op]*atomic.Int64{OpGet: {}, OpInsert: {}, OpReplace: {}}}
}

// Calls returns the number of calls of op so far.
func (c *Counting) Calls(op Op) int64 { return c.calls[op].Load() }

// Total returns the number of calls of every operation so far.
func (c *Counting) Total() int64 { return c.Calls(OpGet) + c.Calls(OpInsert) + c.Calls(OpReplace) }

// Get counts and delegates.
func (c *Counting) Get(ctx context.Context, orderID string) (store.Row, error) {
	c.calls[OpGet].Add(1)
	return c.Backend.Get(ctx, orderID)
}

// Insert counts and delegates.
func (c *Counting) Insert(ctx context.Context, orderID string, s order.State) (store.ETag, error) {
	c.calls[OpInsert].Add(1)
	return c.Backend.Insert(ctx, orderID, s)
}

// Replace counts and delegates.
func (c *Counting) Replace(ctx context.Context, orderID string, s order.State, etag store.ETag) (store.ETag, error) {
	c.calls[OpReplace].Add(1)
	return c.Backend.Replace(ctx, orderID, s, etag)
}

// Fault is a failure Faulty injects into one call ("": none).
type Fault string

// The faults.
const (
	// FailBefore fails the call with store.ErrTransient without calling the
	// backend: the request never arrived.
	FailBefore Fault = "FailBefore"
	// FailAfter calls the backend and then fails with store.ErrTransient
	// whatever it answered: the request took effect but the answer was lost.
	FailAfter Fault = "FailAfter"
)

// Faulty is a store.Backend that fails armed calls. It is safe for concurrent use.
type Faulty struct {
	store.Backend
	mu    sync.Mutex
	armed map[Op][]Fault
}

var _ store.Backend = (*Faulty)(nil)

// NewFaulty wraps b with nothing armed.
func NewFaulty(b store.Backend) *Faulty { return &Faulty{Backend: b, armed: map[Op][]Fault{}} }

// Arm makes the next call of op fail with f. Arming several faults queues
// them for successive calls.
func (f *Faulty) Arm(op Op, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed[op] = append(f.armed[op], fault)
}

// Pending returns how many armed faults of op have not fired.
func (f *Faulty) Pending(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed[op])
}

// faulted runs do unless the next fault armed for op fails it before or after.
func faulted[T any](f *Faulty, op Op, orderID string, do func() (T, error)) (T, error) {
	f.mu.Lock()
	var fault Fault
	if q := f.armed[op]; len(q) > 0 {
		fault, f.armed[op] = q[0], q[1:]
	}
	f.mu.Unlock()
	var zero T
	if fault == FailBefore {
		return zero, fmt.Errorf("storetest: %s %s: injected %v: %w", op, orderID, fault, store.ErrTransient)
	}
	v, err := do()
	if fault == FailAfter {
		return zero, fmt.Errorf("storetest: %s %s: injected %v: %w", op, orderID, fault, store.ErrTransient)
	}
	return v, err
}

// Get delegates unless a fault is armed.
func (f *Faulty) Get(ctx context.Context, orderID string) (store.Row, error) {
	return faulted(f, OpGet, orderID, func() (store.Row, error) { return f.Backend.Get(ctx, orderID) })
}

// Insert delegates unless a fault is armed.
func (f *Faulty) Insert(ctx context.Context, orderID string, s order.State) (store.ETag, error) {
	return faulted(f, OpInsert, orderID, func() (store.ETag, error) { return f.Backend.Insert(ctx, orderID, s) })
}

// Replace delegates unless a fault is armed.
func (f *Faulty) Replace(ctx context.Context, orderID string, s order.State, etag store.ETag) (store.ETag, error) {
	return faulted(f, OpReplace, orderID, func() (store.ETag, error) { return f.Backend.Replace(ctx, orderID, s, etag) })
}

// Write is one successful write seen by Recording.
type Write struct {
	Op      Op
	OrderID string
	IfMatch store.ETag // the condition; empty for an insert
	ETag    store.ETag // the version the write created
	State   order.State
}

// Recording is a store.Backend that records every successful write, in the order
// the answers arrived. Several Recording wrappers may share one *WriteLog.
type Recording struct {
	store.Backend
	Log *WriteLog
}

var _ store.Backend = (*Recording)(nil)

// WriteLog collects writes; safe for concurrent use.
type WriteLog struct {
	mu     sync.Mutex
	writes []Write
}

// Writes returns a copy of the writes recorded so far.
func (l *WriteLog) Writes() []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Write(nil), l.writes...)
}

func (l *WriteLog) add(w Write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

// Insert delegates and records a success.
func (r *Recording) Insert(ctx context.Context, orderID string, s order.State) (store.ETag, error) {
	etag, err := r.Backend.Insert(ctx, orderID, s)
	if err == nil {
		r.Log.add(Write{Op: OpInsert, OrderID: orderID, ETag: etag, State: s})
	}
	return etag, err
}

// Replace delegates and records a success.
func (r *Recording) Replace(ctx context.Context, orderID string, s order.State, etag store.ETag) (store.ETag, error) {
	got, err := r.Backend.Replace(ctx, orderID, s, etag)
	if err == nil {
		r.Log.add(Write{Op: OpReplace, OrderID: orderID, IfMatch: etag, ETag: got, State: s})
	}
	return got, err
}
