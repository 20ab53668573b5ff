package dlstore

import (
	"cmp"
	"slices"
	"time"
)

// SortEntries orders entries as List does: by StoredAt, then id.
func SortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		return cmp.Or(a.StoredAt.Compare(b.StoredAt), cmp.Compare(a.ID, b.ID))
	})
}

// Apply is cur after t (without a new ETag), for backends to share.
func Apply(cur Entry, t Transition) Entry {
	next := cur
	next.State, next.UpdatedAt = t.To, t.At
	if t.ReplayCount != 0 {
		next.ReplayCount = t.ReplayCount
	}
	if t.NewMessageID != "" {
		next.NewMessageID = t.NewMessageID
	}
	next.ClaimedBy, next.ClaimedAt = "", time.Time{}
	if t.To == ReplayDue {
		next.ClaimedBy, next.ClaimedAt = t.ClaimedBy, t.At
	}
	if t.Audit != nil {
		next.Actions = cur.Actions + 1
	}
	return next
}

// AuditFor is t's audit entry, numbered and keyed for cur.
func AuditFor(cur Entry, t Transition) AuditEntry {
	a := *t.Audit
	a.EntryID, a.OrderID, a.N, a.From, a.To = cur.ID, cur.OrderID, cur.Actions+1, cur.State, t.To
	if a.At.IsZero() {
		a.At = t.At
	}
	if a.Source == "" {
		a.Source, a.SequenceNumber, a.MessageID, a.Reason = cur.Source, cur.SequenceNumber, cur.MessageID, cur.Reason
	}
	return a
}

// SortAudit orders audit entries as History does: by time, entry and number.
func SortAudit(as []AuditEntry) {
	slices.SortFunc(as, func(a, b AuditEntry) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.EntryID, b.EntryID), cmp.Compare(a.N, b.N))
	})
}
