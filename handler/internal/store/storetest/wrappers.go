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
	gets, inserts, replaces atomic.Int64
}

var _ store.Backend = (*Counting)(nil)

// NewCounting wraps b.
func NewCounting(b store.Backend) *Counting { return &Counting{Backend: b} }

// Calls returns the number of calls of op so far.
func (c *Counting) Calls(op Op) int64 {
	switch op {
	case OpGet:
		return c.gets.Load()
	case OpInsert:
		return c.inserts.Load()
	case OpReplace:
		return c.replaces.Load()
	}
	return 0
}

// Total returns the number of calls of every operation so far.
func (c *Counting) Total() int64 { return c.gets.Load() + c.inserts.Load() + c.replaces.Load() }

// Get counts and delegates.
func (c *Counting) Get(ctx context.Context, orderID string) (store.Row, error) {
	c.gets.Add(1)
	return c.Backend.Get(ctx, orderID)
}

// Insert counts and delegates.
func (c *Counting) Insert(ctx context.Context, orderID string, s order.State) (store.ETag, error) {
	c.inserts.Add(1)
	return c.Backend.Insert(ctx, orderID, s)
}

// Replace counts and delegates.
func (c *Counting) Replace(ctx context.Context, orderID string, s order.State, etag store.ETag) (store.ETag, error) {
	c.replaces.Add(1)
	return c.Backend.Replace(ctx, orderID, s, etag)
}

// Fault is a failure Faulty injects into one call.
type Fault int

// The faults.
const (
	// FailBefore fails the call with store.ErrTransient without calling the
	// backend: the request never arrived.
	FailBefore Fault = iota + 1
	// FailAfter calls the backend and then fails with store.ErrTransient
	// whatever it answered: the request took effect but the answer was lost.
	FailAfter
)

func (f Fault) String() string {
	switch f {
	case FailBefore:
		return "FailBefore"
	case FailAfter:
		return "FailAfter"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

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

func (f *Faulty) next(op Op) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.armed[op]
	if len(q) == 0 {
		return 0
	}
	f.armed[op] = q[1:]
	return q[0]
}

func injected(op Op, orderID string, fault Fault) error {
	return fmt.Errorf("storetest: %s %s: injected %v: %w", op, orderID, fault, store.ErrTransient)
}

// Get delegates unless a fault is armed.
func (f *Faulty) Get(ctx context.Context, orderID string) (store.Row, error) {
	fault := f.next(OpGet)
	if fault == FailBefore {
		return store.Row{}, injected(OpGet, orderID, fault)
	}
	row, err := f.Backend.Get(ctx, orderID)
	if fault == FailAfter {
		return store.Row{}, injected(OpGet, orderID, fault)
	}
	return row, err
}

// Insert delegates unless a fault is armed.
func (f *Faulty) Insert(ctx context.Context, orderID string, s order.State) (store.ETag, error) {
	fault := f.next(OpInsert)
	if fault == FailBefore {
		return "", injected(OpInsert, orderID, fault)
	}
	etag, err := f.Backend.Insert(ctx, orderID, s)
	if fault == FailAfter {
		return "", injected(OpInsert, orderID, fault)
	}
	return etag, err
}

// Replace delegates unless a fault is armed.
func (f *Faulty) Replace(ctx context.Context, orderID string, s order.State, etag store.ETag) (store.ETag, error) {
	fault := f.next(OpReplace)
	if fault == FailBefore {
		return "", injected(OpReplace, orderID, fault)
	}
	got, err := f.Backend.Replace(ctx, orderID, s, etag)
	if fault == FailAfter {
		return "", injected(OpReplace, orderID, fault)
	}
	return got, err
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
