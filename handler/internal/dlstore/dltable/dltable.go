// Package dltable is the Table Storage backend of dlstore.Store, in one table
// (default "deadletters", DEAD_LETTER_TABLE). An order's entries and audit rows
// share a partition (rows.go), so a change and its audit row are one entity-group
// transaction If-Match the entry's ETag (a 412 is dlstore.ErrConflict). An index
// partition summarises every entry not closed; a crash leaves an index row saying
// more than the truth, never one missing, which Get repairs. Entries are kept byte
// for byte (codec.go); errors map to dlstore sentinels (classify).
package dltable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// DefaultTable is the table's name unless DEAD_LETTER_TABLE says otherwise.
const DefaultTable = "deadletters"

// Defaults of Options.
const (
	DefaultCallTimeout = 10 * time.Second
	DefaultIndexGrace  = 15 * time.Minute
)

// Options tune a Store. A nil *Options or the zero value gives defaults.
type Options struct {
	// CallTimeout bounds each SDK call with its retries; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// IndexGrace: Get deletes a missing entry's index row once this old (0: DefaultIndexGrace).
	IndexGrace time.Duration
	// Logger, if not nil, receives index updates that failed after the entry's write.
	Logger *slog.Logger
	// Now is the clock IndexGrace is measured with; nil is time.Now.
	Now func() time.Time
}

// Store is the dead-letter store on one table. It is safe for concurrent use.
type Store struct {
	table   *aztables.Client
	name    string
	timeout time.Duration
	grace   time.Duration
	log     *slog.Logger
	now     func() time.Time
	// crash (tests set it) is called between writes; an error ends the operation there.
	crash func(point string) error
}

var _ dlstore.Store = (*Store)(nil)

// Crash points.
const (
	pointPutAfterIndex          = "put: after the index row, before the entry"
	pointTransitionBeforeWrite  = "transition: after the read, before the transaction"
	pointTransitionAfterEntry   = "transition: after the entry, before the index row"
	pointPurgeBeforeDelete      = "purge: after the audit keys are read, before the first delete"
	pointPurgeAfterEntryDeleted = "purge: after the entry, before the index and locator rows"
)

// New returns a Store for table (DefaultTable if empty) on the caller's service
// client, without contacting the service.
func New(svc *aztables.ServiceClient, table string, opts *Options) *Store {
	if table == "" {
		table = DefaultTable
	}
	s := &Store{table: svc.NewClient(table), name: table, timeout: DefaultCallTimeout, grace: DefaultIndexGrace, now: time.Now,
		crash: func(string) error { return nil }}
	if opts != nil {
		if opts.CallTimeout > 0 {
			s.timeout = opts.CallTimeout
		}
		if opts.IndexGrace > 0 {
			s.grace = opts.IndexGrace
		}
		if opts.Now != nil {
			s.now = opts.Now
		}
		s.log = opts.Logger
	}
	return s
}

// Table is the table's name.
func (s *Store) Table() string { return s.name }

// EnsureTable creates the table unless it exists. A table-scoped role may get
// 403 even when it exists, so callers log the error and go on.
func (s *Store) EnsureTable(ctx context.Context) error {
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	_, err := s.table.CreateTable(callCtx, nil)
	if err = classify(callCtx, s.name, err); err != nil && tableerr.CodeOf(err) != string(aztables.TableAlreadyExists) {
		return fmt.Errorf("dltable: create table %s: %w", s.name, err)
	}
	return nil
}

func (s *Store) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.timeout, tableerr.ErrCallTimeout)
}

// --- calls: each one SDK request with a deadline, its error classified.

func (s *Store) getRow(ctx context.Context, pk, rk string) (stored, error) {
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	resp, err := s.table.GetEntity(callCtx, pk, rk, nil)
	if err != nil {
		return stored{}, classify(callCtx, s.name, err)
	}
	return parseStored(resp.Value, string(resp.ETag))
}

func (s *Store) addRow(ctx context.Context, r row) error {
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	_, err := s.table.AddEntity(callCtx, r.json(), nil)
	return classify(callCtx, s.name, err)
}

func (s *Store) replaceRow(ctx context.Context, r row, etag string) error {
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	ifMatch := azcore.ETag(etag)
	_, err := s.table.UpdateEntity(callCtx, r.json(), &aztables.UpdateEntityOptions{IfMatch: &ifMatch, UpdateMode: aztables.UpdateModeReplace})
	return classify(callCtx, s.name, err)
}

func (s *Store) deleteRow(ctx context.Context, pk, rk, etag string) error {
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	ifMatch := azcore.ETag(etag)
	_, err := s.table.DeleteEntity(callCtx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &ifMatch})
	return classify(callCtx, s.name, err)
}

func (s *Store) submit(ctx context.Context, actions []aztables.TransactionAction) error {
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	_, err := s.table.SubmitTransaction(callCtx, actions, nil)
	return classify(callCtx, s.name, err)
}

// query yields every row matching filter (OData), page by page; yield returns false to stop.
func (s *Store) query(ctx context.Context, filter, sel string, yield func(stored) (bool, error)) error {
	opts := &aztables.ListEntitiesOptions{Filter: &filter}
	if sel != "" {
		opts.Select = &sel
	}
	pager := s.table.NewListEntitiesPager(opts)
	for pager.More() {
		callCtx, cancel := s.callContext(ctx)
		page, err := pager.NextPage(callCtx)
		err = classify(callCtx, s.name, err)
		cancel()
		if err != nil {
			return err
		}
		for _, b := range page.Entities {
			st, err := parseStored(b, "")
			if err != nil {
				return err
			}
			more, err := yield(st)
			if err != nil || !more {
				return err
			}
		}
	}
	return nil
}

// Put stores e as Open with its "stored" audit entry unless e.ID exists: the
// locator and index rows first, then the entry and audit row in one transaction.
func (s *Store) Put(ctx context.Context, e dlstore.Entry, actor string) (bool, error) {
	e, a, err := dlstore.Stored(e, actor)
	if err == nil && !legalKey(e.ID) {
		err = errors.New("the entry id is not a legal key (dlstore.EntryID makes one)")
	}
	var entry, audit row
	if err == nil {
		entry, err = entryRow(e, 1)
		audit = auditRow(a)
	}
	if err == nil {
		err = fits(entry, audit)
	}
	if err != nil {
		return false, fmt.Errorf("dltable: put %q: %w", e.ID, err)
	}
	for _, r := range []row{locatorRow(e), indexRow(e, 1)} {
		if err := s.addRow(ctx, r); err != nil && !exists(err) {
			return false, fmt.Errorf("dltable: put %s: %s row: %w", e.ID, r[colKind], err)
		}
	}
	if err := s.crash(pointPutAfterIndex); err != nil {
		return false, err
	}
	err = s.submit(ctx, []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeAdd, Entity: entry.json()},
		{ActionType: aztables.TransactionTypeAdd, Entity: audit.json()},
	})
	switch {
	case err == nil:
		return true, nil
	case exists(err):
		cur, version, gerr := s.readEntry(ctx, orderKey(e.OrderID), e.ID)
		if gerr != nil {
			return false, fmt.Errorf("dltable: put %s: exists; read it: %w", e.ID, gerr)
		}
		if err := s.syncIndex(ctx, cur, version, false); err != nil {
			return false, fmt.Errorf("dltable: put %s: exists; its index row: %w", e.ID, err)
		}
		return false, nil
	}
	return false, fmt.Errorf("dltable: put %s: %w", e.ID, err)
}

// fits refuses rows Table Storage would refuse for their size.
func fits(rows ...row) error {
	for _, r := range rows {
		if n := r.size(); n > maxEntity {
			return fmt.Errorf("%s row of %d bytes (Table Storage allows %d): %w", r[colKind], n, maxEntity, dlstore.ErrTooLarge)
		}
	}
	return nil
}

func (s *Store) readEntry(ctx context.Context, pk, id string) (dlstore.Entry, int64, error) {
	st, err := s.getRow(ctx, pk, entryRowKey(id))
	if err != nil {
		return dlstore.Entry{}, 0, err
	}
	return st.entry()
}

// Get returns the whole entry id and repairs its index row when provably stale.
func (s *Store) Get(ctx context.Context, id string) (dlstore.Entry, error) {
	if !legalKey(id) {
		return dlstore.Entry{}, fmt.Errorf("dltable: get %q: %w", id, dlstore.ErrNotFound)
	}
	loc, err := s.getRow(ctx, partitionLocator, id)
	if err != nil {
		return dlstore.Entry{}, fmt.Errorf("dltable: get %s: %w", id, err)
	}
	e, version, err := s.readEntry(ctx, loc.string(colPartition), id)
	if errors.Is(err, dlstore.ErrNotFound) {
		s.repairMissing(ctx, id, loc)
	}
	if err != nil {
		return dlstore.Entry{}, fmt.Errorf("dltable: get %s: %w", id, err)
	}
	if err := s.syncIndex(ctx, e, version, false); err != nil {
		s.logIndex("get", id, err)
	}
	return e, nil
}

// repairMissing removes a missing entry's index and locator rows once older than the grace.
func (s *Store) repairMissing(ctx context.Context, id string, loc stored) {
	cutoff := s.now().Add(-s.grace)
	idx, err := s.getRow(ctx, partitionIndex, id)
	switch {
	case err == nil && idx.timestamp.Before(cutoff):
		if err := s.deleteRow(ctx, partitionIndex, id, idx.etag); err != nil && !errors.Is(err, dlstore.ErrNotFound) {
			s.logIndex("get", id, err)
			return
		}
	case err == nil:
		return // a Put may still be writing the entry
	case !errors.Is(err, dlstore.ErrNotFound):
		s.logIndex("get", id, err)
		return
	}
	if loc.timestamp.Before(cutoff) {
		if err := s.deleteRow(ctx, partitionLocator, id, loc.etag); err != nil && !errors.Is(err, dlstore.ErrNotFound) {
			s.logIndex("get", id, err)
		}
	}
}

// syncIndex brings e's index row up to date (a summary, or none when e is
// closed), leaving a newer version's row; a lost race is retried a few times.
// With reopen (e is reopened from version) a row of that version is rewritten:
// its fresh Timestamp keeps a later sync from taking it for a stale one.
func (s *Store) syncIndex(ctx context.Context, e dlstore.Entry, version int64, reopen bool) error {
	for range 4 {
		idx, err := s.getRow(ctx, partitionIndex, e.ID)
		found := err == nil
		if err != nil && !errors.Is(err, dlstore.ErrNotFound) {
			return err
		}
		if found {
			// The same version beside a closed entry, past the grace: a reopening that did not happen.
			if _, v, derr := idx.entry(); derr == nil && (v > version || !reopen && v == version && (!e.State.Closed() || !idx.timestamp.Before(s.now().Add(-s.grace)))) {
				return nil
			}
		}
		switch {
		case e.State.Closed() && !found:
			return nil
		case e.State.Closed():
			err = s.deleteRow(ctx, partitionIndex, e.ID, idx.etag)
		case found:
			err = s.replaceRow(ctx, indexRow(e, version), idx.etag)
		default:
			err = s.addRow(ctx, indexRow(e, version))
		}
		if err == nil || (e.State.Closed() && errors.Is(err, dlstore.ErrNotFound)) {
			return nil
		}
		if !errors.Is(err, dlstore.ErrConflict) && !errors.Is(err, dlstore.ErrNotFound) {
			return err
		}
	}
	return fmt.Errorf("index row of %s: changed at every try: %w", e.ID, dlstore.ErrConflict)
}

func (s *Store) logIndex(op, id string, err error) {
	if s.log != nil {
		s.log.Warn("dead-letter index row not updated; Get repairs it", "op", op, "entry_id", id, "table", s.name, "error", err)
	}
}

// Transition changes e as t says (see dlstore.Store), keeping the stored body and
// properties. The index row is written after the entry, or before it on a reopen.
func (s *Store) Transition(ctx context.Context, e dlstore.Entry, t dlstore.Transition) (dlstore.Entry, error) {
	if t.Audit == nil && !dlstore.NeedsNoAudit(e.State, t.To) {
		return dlstore.Entry{}, fmt.Errorf("dltable: transition %s to %s: an audit entry is required", e.ID, t.To)
	}
	if e.ETag == "" {
		return dlstore.Entry{}, fmt.Errorf("dltable: transition %s: no ETag (Get the entry first): %w", e.ID, dlstore.ErrConflict)
	}
	if !legalKey(e.ID) {
		return dlstore.Entry{}, fmt.Errorf("dltable: transition %q: %w", e.ID, dlstore.ErrNotFound)
	}
	pk := orderKey(e.OrderID)
	cur, version, err := s.readEntry(ctx, pk, e.ID)
	if err != nil {
		return dlstore.Entry{}, fmt.Errorf("dltable: transition %s: %w", e.ID, err)
	}
	// If-Match e.ETag decides, not cur.ETag: a query's and a read's may be spelled apart.
	next := dlstore.Apply(cur, t)
	next.ETag = ""
	entry, err := entryRow(next, version+1)
	if err == nil {
		err = fits(entry)
	}
	if err != nil {
		return dlstore.Entry{}, fmt.Errorf("dltable: transition %s: %w", e.ID, err)
	}
	ifMatch := azcore.ETag(e.ETag)
	actions := []aztables.TransactionAction{{ActionType: aztables.TransactionTypeUpdateReplace, Entity: entry.json(), IfMatch: &ifMatch}}
	if t.Audit != nil {
		audit := auditRow(dlstore.AuditFor(cur, t))
		if err := fits(audit); err != nil {
			return dlstore.Entry{}, fmt.Errorf("dltable: transition %s: %w", e.ID, err)
		}
		actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: audit.json()})
	}
	if cur.State.Closed() && !next.State.Closed() {
		if err := s.syncIndex(ctx, next, version, true); err != nil {
			return dlstore.Entry{}, fmt.Errorf("dltable: transition %s to %s: its index row: %w", e.ID, t.To, err)
		}
	}
	if err := s.crash(pointTransitionBeforeWrite); err != nil {
		return dlstore.Entry{}, err
	}
	if err := s.submit(ctx, actions); err != nil {
		if exists(err) {
			err = fmt.Errorf("audit row %d exists: %w", cur.Actions+1, dlstore.ErrConflict)
		}
		return dlstore.Entry{}, fmt.Errorf("dltable: transition %s to %s: %w", e.ID, t.To, err)
	}
	if err := s.crash(pointTransitionAfterEntry); err != nil {
		return dlstore.Entry{}, err
	}
	if err := s.syncIndex(ctx, next, version+1, false); err != nil {
		s.logIndex("transition", e.ID, err)
	}
	// A transaction's answer has no ETag: read it, if the entry is unchanged.
	if after, v, err := s.readEntry(ctx, pk, e.ID); err == nil && v == version+1 {
		next.ETag = after.ETag
	}
	return next, nil
}

// ErrStorage matches a failure neither a dlstore sentinel nor the caller's context (HTTP 400...).
var ErrStorage = errors.New("dltable: request failed")

// classify sorts err, from an SDK call on table under callCtx (the caller's context
// plus the per-call deadline), into the dlstore sentinels through tableerr.Classify.
func classify(callCtx context.Context, table string, err error) error {
	e := tableerr.Classify(callCtx, table, err)
	if e == nil {
		return nil
	}
	switch e.Kind {
	case tableerr.Conflict:
		return e.Wrap(dlstore.ErrConflict)
	case tableerr.Exists:
		if e.Code == string(aztables.EntityAlreadyExists) {
			return e.Wrap(dlstore.ErrConflict)
		}
	case tableerr.NotFound:
		return e.Wrap(dlstore.ErrNotFound)
	case tableerr.TableNotFound, tableerr.Forbidden, tableerr.Unavailable:
		return e.Wrap(dlstore.ErrUnavailable)
	case tableerr.TooLarge:
		return e.Wrap(dlstore.ErrTooLarge)
	case tableerr.Canceled:
		return e.Wrap(callCtx.Err())
	}
	return e.Wrap(ErrStorage)
}

// exists reports an insert that found its row.
func exists(err error) bool { return tableerr.CodeOf(err) == string(aztables.EntityAlreadyExists) }
