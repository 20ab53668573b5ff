package dltable

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// List returns the entries matching f by StoredAt then ID (dlstore.Store), read from
// f.OrderID's partition, else the index when f.OnlyNotClosed, else every entry row.
func (s *Store) List(ctx context.Context, f dlstore.Filter) ([]dlstore.Entry, error) {
	index := f.OnlyNotClosed() && f.OrderID == ""
	conds := []string{colKind + " eq " + odataString(kindEntry)}
	switch {
	case index:
		conds = []string{"PartitionKey eq " + odataString(partitionIndex)}
	case f.OrderID != "":
		conds = append([]string{"PartitionKey eq " + odataString(orderKey(f.OrderID))}, conds...)
	}
	out := []dlstore.Entry{}
	err := s.query(ctx, strings.Join(append(conds, filterConds(f)...), " and "), "", func(st stored) (bool, error) {
		e, _, err := st.entry()
		if err != nil {
			return false, err
		}
		if index && f.NeedsBody() {
			whole, _, err := s.readEntry(ctx, orderKey(e.OrderID), e.ID)
			if errors.Is(err, dlstore.ErrNotFound) {
				return true, nil // the index row of an interrupted Put
			}
			if err != nil {
				return false, err
			}
			e = whole // a closed one no longer matches f
		}
		if f.Matches(e) {
			out = append(out, e)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("dltable: list: %w", err)
	}
	dlstore.SortEntries(out)
	return out, nil
}

// filterConds are OData conditions for f, never narrower (StoredAt widened by 1 ms).
func filterConds(f dlstore.Filter) []string {
	var conds []string
	if len(f.States) > 0 {
		var or []string
		for _, st := range f.States {
			or = append(or, colState+" eq "+odataString(string(st)))
		}
		conds = append(conds, "("+strings.Join(or, " or ")+")")
	}
	for col, v := range map[string]string{colSource: string(f.Source), colReason: f.Reason, colGroup: f.Group} {
		if v != "" && len(v) <= maxFilterColumn {
			conds = append(conds, col+" eq "+odataString(v))
		}
	}
	if !f.Since.IsZero() {
		if lit := odataTime(f.Since.Add(-time.Millisecond)); lit != "" {
			conds = append(conds, colStoredAt+" ge "+lit)
		}
	}
	if !f.Until.IsZero() {
		if lit := odataTime(f.Until.Add(time.Millisecond)); lit != "" {
			conds = append(conds, colStoredAt+" lt "+lit)
		}
	}
	return conds
}

// History returns the audit entries of orderID (all when ""), in time order.
func (s *Store) History(ctx context.Context, orderID string) ([]dlstore.AuditEntry, error) {
	conds := []string{colKind + " eq " + odataString(kindAudit)}
	if orderID != "" {
		conds = append([]string{"PartitionKey eq " + odataString(orderKey(orderID))}, conds...)
	}
	out := []dlstore.AuditEntry{}
	err := s.query(ctx, strings.Join(conds, " and "), "", func(st stored) (bool, error) {
		a, err := st.audit()
		if err != nil {
			return false, err
		}
		if orderID == "" || a.OrderID == orderID {
			out = append(out, a)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("dltable: history %q: %w", orderID, err)
	}
	dlstore.SortAudit(out)
	return out, nil
}

// maxBatch is Table Storage's limit of operations in one transaction.
const maxBatch = 100

// Purge deletes and counts up to max closed entries updated before before, with all their rows.
func (s *Store) Purge(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		return 0, nil
	}
	closed := dlstore.Filter{States: []dlstore.State{dlstore.Replayed, dlstore.Archived, dlstore.Discarded}}
	conds := append([]string{colKind + " eq " + odataString(kindEntry)}, filterConds(closed)...)
	if lit := odataTime(before.Add(time.Millisecond)); lit != "" {
		conds = append(conds, colUpdatedAt+" lt "+lit)
	}
	var victims []dlstore.Entry
	err := s.query(ctx, strings.Join(conds, " and "), "", func(st stored) (bool, error) {
		e, _, err := st.entry()
		if err != nil {
			return false, err
		}
		if e.State.Closed() && e.UpdatedAt.Before(before) {
			victims = append(victims, e)
		}
		return len(victims) < max, nil
	})
	if err != nil {
		return 0, fmt.Errorf("dltable: purge: %w", err)
	}
	n := 0
	for _, e := range victims {
		done, err := s.purgeOne(ctx, e)
		if err != nil {
			return n, fmt.Errorf("dltable: purge %s: %w", e.ID, err)
		}
		if done {
			n++
		}
	}
	return n, nil
}

// purgeOne deletes e and its rows; done is false when e changed or went meanwhile.
func (s *Store) purgeOne(ctx context.Context, e dlstore.Entry) (bool, error) {
	pk := orderKey(e.OrderID)
	from, to := auditRange(e.ID)
	var keys []string
	err := s.query(ctx, "PartitionKey eq "+odataString(pk)+" and RowKey gt "+odataString(from)+" and RowKey lt "+odataString(to),
		"PartitionKey,RowKey", func(st stored) (bool, error) {
			keys = append(keys, st.string("RowKey"))
			return true, nil
		})
	if err != nil {
		return false, err
	}
	del := func(rk string, etag azcore.ETag) aztables.TransactionAction {
		return aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, IfMatch: &etag,
			Entity: row{"PartitionKey": pk, "RowKey": rk}.json()}
	}
	if err := s.crash(pointPurgeBeforeDelete); err != nil {
		return false, err
	}
	// The entry (If-Match) and what audit rows fit first, the rest after: a restore keeps its history.
	first := min(len(keys), maxBatch-1)
	batch := []aztables.TransactionAction{del(entryRowKey(e.ID), azcore.ETag(e.ETag))}
	for _, rk := range keys[:first] {
		batch = append(batch, del(rk, azcore.ETagAny))
	}
	if err := s.submit(ctx, batch); err != nil {
		if errors.Is(err, dlstore.ErrConflict) || errors.Is(err, dlstore.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if err := s.crash(pointPurgeAfterEntryDeleted); err != nil {
		return true, err
	}
	for keys = keys[first:]; len(keys) > 0; {
		k := min(len(keys), maxBatch)
		batch = batch[:0]
		for _, rk := range keys[:k] {
			batch = append(batch, del(rk, azcore.ETagAny))
		}
		if err := s.submit(ctx, batch); err != nil && !errors.Is(err, dlstore.ErrNotFound) {
			return true, err
		}
		keys = keys[k:]
	}
	for _, pk := range []string{partitionIndex, partitionLocator} {
		if err := s.deleteRow(ctx, pk, e.ID, string(azcore.ETagAny)); err != nil && !errors.Is(err, dlstore.ErrNotFound) {
			return true, err
		}
	}
	return true, nil
}
