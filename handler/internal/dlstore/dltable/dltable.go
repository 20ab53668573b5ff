// Package dltable is the Table Storage backend of the dead-letter store
// (dlstore.Store), in one table (default "deadletters", app setting
// DEAD_LETTER_TABLE) that infra creates and the app holds a table-scoped
// role on.
//
// Keys (rows.go): an order's entries and their audit entries share one
// partition, the order key, so "everything about order X" is one
// partition query and a change of state is one entity-group transaction
// with its audit entry: the entry's Replace with If-Match its ETag plus
// the audit row's insert, all or nothing, a 412 anywhere being
// dlstore.ErrConflict. The bounded "not closed" query reads an index
// partition that holds the summary of every entry that is not closed; a
// locator partition maps an entry id to its order key for Get.
//
// The index lives in another partition, so it cannot be in the entry's
// transaction. The order of writes keeps it on the safe side: Put writes
// the locator and the index row first, then the entry (a crash between
// them leaves an index row whose entry is missing: the sweeper repeats
// the Put, as it completes a message only after Put); a transition writes
// the entry first, then updates the index row or, to a closed state,
// deletes it; from a closed state to one not closed (a restore, a claim)
// it writes the index row first, at the version read, then the entry
// (a crash between either pair leaves an index row that says more than
// the truth, never one missing). Index writes are conditional on the
// index row's ETag and carry the entry's version, so a late writer never
// replaces a newer summary. Get repairs the index row of the entry it
// reads when it can prove it stale: the entry is closed (at a newer
// version than the row's, or at the row's and the row older than
// Options.IndexGrace), its version is newer, or the entry is missing and
// the index row older than Options.IndexGrace.
//
// Sizes: the body and the typed application properties are kept in a
// binary record split across Edm.Binary columns (codec.go), so a 256 KB
// body with 64 KB of properties (Service Bus Standard's limits) is stored
// byte for byte; anything beyond is dlstore.ErrTooLarge.
//
// Errors are classified once (errors.go) into the dlstore sentinels, and
// every SDK call has a deadline (Options.CallTimeout).
//
// Round trips, for the sweeper's budget: Put is three (locator, index
// row, the transaction), two or three more when the entry existed (its index row brought up to date); Get three
// reads (locator, entry, index row), plus a write when it repairs;
// Transition five (read, the transaction, index read and write, and a
// read for the new ETag, which a transaction's answer does not carry),
// two more from a closed state to one not closed (the index row first);
// List one query per page; Purge one query, then per entry a query of
// its audit rows, a transaction (one more per further 100 audit rows)
// and two deletes.
package dltable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// DefaultTable is the table's name unless DEAD_LETTER_TABLE says
// otherwise.
const DefaultTable = "deadletters"

// Defaults of Options.
const (
	DefaultCallTimeout = 10 * time.Second
	DefaultIndexGrace  = 15 * time.Minute
)

// Options tune a Store. A nil *Options or the zero value gives defaults.
type Options struct {
	// CallTimeout bounds each SDK call, its retries included; exceeding
	// it is dlstore.ErrUnavailable. 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// IndexGrace is how old an index row whose entry is missing must be
	// before Get deletes it (younger, a Put may be between its two
	// writes). 0 means DefaultIndexGrace.
	IndexGrace time.Duration
	// ClientOptions are passed to the SDK; a zero Retry retries at most
	// twice with short delays, so that the caller's schedule governs.
	ClientOptions *aztables.ClientOptions
	// Logger receives the index updates that failed after the entry was
	// written (the change took effect; Get repairs the index later). nil
	// logs nothing.
	Logger *slog.Logger
	// Now is the clock IndexGrace is measured with; nil is time.Now.
	Now func() time.Time
}

// Store is the dead-letter store on one table. It is safe for concurrent
// use.
type Store struct {
	table   *aztables.Client
	name    string
	timeout time.Duration
	grace   time.Duration
	log     *slog.Logger
	now     func() time.Time
	// crash, when set (tests only), is called at the points between the
	// writes of one operation; an error it returns ends the operation
	// there, as a crash would.
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

// NewFromConnectionString returns a Store for table (DefaultTable if
// empty) in the account of the connection string cs (Azurite, tests). It
// does not contact the service.
func NewFromConnectionString(cs, table string, opts *Options) (*Store, error) {
	svc, err := aztables.NewServiceClientFromConnectionString(cs, clientOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("dltable: connection string: %w", err) // the SDK's message holds no secret
	}
	return newStore(svc, table, opts), nil
}

// NewWithCredential returns a Store for table (DefaultTable if empty) at
// serviceURL (https://<account>.table.core.windows.net), authenticated
// with cred (the app's managed identity). It does not contact the
// service.
func NewWithCredential(serviceURL, table string, cred azcore.TokenCredential, opts *Options) (*Store, error) {
	if u, err := url.Parse(serviceURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("dltable: service URL %q: want https://<account>.table.core.windows.net", serviceURL)
	}
	svc, err := aztables.NewServiceClient(serviceURL, cred, clientOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("dltable: service %s: %w", serviceURL, err)
	}
	return newStore(svc, table, opts), nil
}

func clientOptions(opts *Options) *aztables.ClientOptions {
	var co aztables.ClientOptions
	if opts != nil && opts.ClientOptions != nil {
		co = *opts.ClientOptions
	}
	if r := co.Retry; r.MaxRetries == 0 && r.TryTimeout == 0 && r.RetryDelay == 0 && r.MaxRetryDelay == 0 && r.StatusCodes == nil && r.ShouldRetry == nil {
		co.Retry = policy.RetryOptions{MaxRetries: 2, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second}
	}
	return &co
}

func newStore(svc *aztables.ServiceClient, table string, opts *Options) *Store {
	if table == "" {
		table = DefaultTable
	}
	s := &Store{table: svc.NewClient(table), name: table, timeout: DefaultCallTimeout, grace: DefaultIndexGrace, now: time.Now}
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

// EnsureTable creates the table if it does not exist, best effort: with
// a table-scoped role (as infra grants) the service may refuse CreateTable
// with 403 even when the table exists, so a caller logs the error and
// goes on; the first real read or write then fails clearly if the table
// is missing (dlstore.ErrUnavailable, "table ... does not exist; infra
// creates it"). An existing table is success.
func (s *Store) EnsureTable(ctx context.Context) error {
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	_, err := s.table.CreateTable(callCtx, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == 409 && re.ErrorCode == string(aztables.TableAlreadyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dltable: create table %s: %w", s.name, classify(callCtx, s.name, err))
	}
	return nil
}

func (s *Store) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.timeout, errCallTimeout)
}

func (s *Store) hook(point string) error {
	if s.crash != nil {
		return s.crash(point)
	}
	return nil
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

// query returns every row matching filter (OData), reading page by page,
// each page within the call timeout; yield may stop it by returning
// false.
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

// --- the port.

// Put stores e in state Open with its "stored" audit entry, unless an
// entry with e.ID exists (see dlstore.Store). It writes the locator and
// the index row first (either may exist: a repeated Put), then the entry
// and its audit row in one transaction.
func (s *Store) Put(ctx context.Context, e dlstore.Entry, actor string) (bool, error) {
	if e.ID == "" || e.Source == "" || e.StoredAt.IsZero() {
		return false, fmt.Errorf("dltable: put: id, source and stored-at are required")
	}
	if !legalKey(e.ID) {
		return false, fmt.Errorf("dltable: put %q: the entry id is not a legal key (dlstore.EntryID makes one)", e.ID)
	}
	if len(e.Body) > dlstore.MaxBody {
		return false, fmt.Errorf("dltable: put %s: body of %d bytes (Service Bus allows %d): %w", e.ID, len(e.Body), dlstore.MaxBody, dlstore.ErrTooLarge)
	}
	if n := dlstore.PropertiesSize(e.Properties); n > dlstore.MaxProperties {
		return false, fmt.Errorf("dltable: put %s: properties of %d bytes (Service Bus allows %d): %w", e.ID, n, dlstore.MaxProperties, dlstore.ErrTooLarge)
	}
	e.State, e.UpdatedAt, e.Actions, e.ClaimedBy, e.ClaimedAt, e.ETag = dlstore.Open, e.StoredAt, 1, "", time.Time{}, ""
	entry, err := entryRow(e, 1)
	if err != nil {
		return false, fmt.Errorf("dltable: put %s: %w", e.ID, err)
	}
	audit := auditRow(dlstore.AuditEntry{EntryID: e.ID, OrderID: e.OrderID, N: 1, At: e.StoredAt, Action: dlstore.ActionStored,
		To: dlstore.Open, Actor: actor, Source: e.Source, SequenceNumber: e.SequenceNumber, MessageID: e.MessageID,
		Reason: e.Reason, Detail: e.Description})
	if err := fits(entry, audit); err != nil {
		return false, fmt.Errorf("dltable: put %s: %w", e.ID, err)
	}
	for _, r := range []row{locatorRow(e), indexRow(e, 1)} {
		if err := s.addRow(ctx, r); err != nil && !exists(err) {
			return false, fmt.Errorf("dltable: put %s: %s row: %w", e.ID, r[colKind], err)
		}
	}
	if err := s.hook(pointPutAfterIndex); err != nil {
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
		// Stored before (a repeated Put): the index row this Put found or
		// wrote may be older than the entry; bring it up to date.
		cur, version, gerr := s.readEntry(ctx, orderKey(e.OrderID), e.ID)
		if gerr != nil {
			return false, fmt.Errorf("dltable: put %s: exists; read it: %w", e.ID, gerr)
		}
		if err := s.syncIndex(ctx, cur, version); err != nil {
			return false, fmt.Errorf("dltable: put %s: exists; its index row: %w", e.ID, err)
		}
		return false, nil
	}
	return false, fmt.Errorf("dltable: put %s: %w", e.ID, err)
}

// exists reports an insert that found the row there.
func exists(err error) bool { return codeOf(err) == string(aztables.EntityAlreadyExists) }

// fits refuses rows Table Storage would refuse for their size.
func fits(rows ...row) error {
	for _, r := range rows {
		if n := r.size(); n > maxEntity {
			return fmt.Errorf("%s row of %d bytes (Table Storage allows %d): %w", r[colKind], n, maxEntity, dlstore.ErrTooLarge)
		}
	}
	return nil
}

// readEntry reads the entry row id in partition pk.
func (s *Store) readEntry(ctx context.Context, pk, id string) (dlstore.Entry, int64, error) {
	st, err := s.getRow(ctx, pk, entryRowKey(id))
	if err != nil {
		return dlstore.Entry{}, 0, err
	}
	return st.entry()
}

// Get returns the whole entry id, and repairs its index row when it can
// prove it stale (see the package doc).
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
	if err := s.syncIndex(ctx, e, version); err != nil {
		s.logIndex("get", id, err)
	}
	return e, nil
}

// repairMissing removes the index and locator rows of an entry that is
// missing, once they are older than the grace (younger, a Put may be
// between its writes).
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

// syncIndex brings the index row of e (stored at version) up to date: a
// summary of e when it is not closed, no row when it is. A row of a newer
// version is left alone; every write is conditional, and a lost race is
// read again (a few times).
func (s *Store) syncIndex(ctx context.Context, e dlstore.Entry, version int64) error {
	for range 4 {
		idx, err := s.getRow(ctx, partitionIndex, e.ID)
		found := err == nil
		if err != nil && !errors.Is(err, dlstore.ErrNotFound) {
			return err
		}
		if found {
			// A row of a newer version is a later writer's; one of the
			// same version beside a closed entry is the index row of a
			// reopening that did not happen, once it is older than the
			// grace (younger, the reopening may be under way).
			if _, v, derr := idx.entry(); derr == nil && (v > version || v == version && (!e.State.Closed() || !idx.timestamp.Before(s.now().Add(-s.grace)))) {
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

// reopenIndex writes the index row of e, about to be reopened from
// version, before the entry: a row of a newer version is a later
// writer's and stays; any other is replaced, so that its Timestamp is
// this write's and no Get takes it for the row of an old reopening that
// did not happen (see syncIndex).
func (s *Store) reopenIndex(ctx context.Context, e dlstore.Entry, version int64) error {
	for range 4 {
		idx, err := s.getRow(ctx, partitionIndex, e.ID)
		switch {
		case err == nil:
			if _, v, derr := idx.entry(); derr == nil && v > version {
				return nil
			}
			err = s.replaceRow(ctx, indexRow(e, version), idx.etag)
		case errors.Is(err, dlstore.ErrNotFound):
			err = s.addRow(ctx, indexRow(e, version))
		default:
			return err
		}
		if err == nil {
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

// Transition changes e as t says, conditional on e.ETag, with t.Audit in
// the same transaction (see dlstore.Store). It reads the entry first, so
// the body and properties written are the stored ones, whatever e holds
// (an entry listed from the index has none).
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
	// No comparison of cur.ETag with e.ETag here: the transaction's
	// If-Match e.ETag decides (an ETag read from a query's body and one
	// from a read's header name the same version but need not be spelled
	// alike), and when it holds, cur is the version e was read at.
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
		// Reopened: its index row first (it has none), so that no crash
		// or failure leaves it out of the index. The row carries the
		// version read; the transaction's entry is newer.
		if err := s.reopenIndex(ctx, next, version); err != nil {
			return dlstore.Entry{}, fmt.Errorf("dltable: transition %s to %s: its index row: %w", e.ID, t.To, err)
		}
	}
	if err := s.hook(pointTransitionBeforeWrite); err != nil {
		return dlstore.Entry{}, err
	}
	if err := s.submit(ctx, actions); err != nil {
		if exists(err) {
			// The audit row is there: another actor wrote this number.
			err = fmt.Errorf("audit row %d exists: %w", cur.Actions+1, dlstore.ErrConflict)
		}
		return dlstore.Entry{}, fmt.Errorf("dltable: transition %s to %s: %w", e.ID, t.To, err)
	}
	if err := s.hook(pointTransitionAfterEntry); err != nil {
		return dlstore.Entry{}, err
	}
	if err := s.syncIndex(ctx, next, version+1); err != nil {
		s.logIndex("transition", e.ID, err)
	}
	// The transaction's answer carries no ETag: read it, and hand it out
	// only if nobody changed the entry since.
	if after, v, err := s.readEntry(ctx, pk, e.ID); err == nil && v == version+1 {
		next.ETag = after.ETag
	}
	return next, nil
}
