// Package dlstore is the port of the dead-letter store that dead-lettered and parked
// messages are drained into: entries, states, audit entries, filters, sentinel errors
// and the Store contract (dlmem, dltable; dlstoretest). Messages are stored, not
// deferred (SessionLockLost, Azure/azure-sdk-for-net #34662); every change of state
// is conditional on the entry's ETag and atomic with its audit entry.
package dlstore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Source names where an entry was drained from (in flags, logs, labels and keys).
type Source string

// The sources, in the order a sweep drains them.
const (
	// DLQ is order-status/$DeadLetterQueue (MaxDeliveryCountExceeded, TTLExpiredException).
	DLQ Source = "dlq"
	// Poison is order-status-poison, where the handler parks poison copies.
	Poison Source = "poison"
	// PoisonDLQ is order-status-poison/$DeadLetterQueue.
	PoisonDLQ Source = "poison-dlq"
)

// Sources lists every source.
var Sources = []Source{DLQ, Poison, PoisonDLQ}

// State is where an entry is in its life.
type State string

// The states. Open, Left and ReplayDue are not closed; the others are purged after the retention.
const (
	// Open: stored, waiting for the policy (a replay's cool-down, say).
	Open State = "open"
	// Left: the policy leaves it for a human.
	Left State = "left"
	// ReplayDue: claimed by an actor to replay it (ClaimedBy, ClaimedAt; see Claim).
	ReplayDue State = "replay-due"
	// Replayed: a copy was sent to the order-status queue.
	Replayed State = "replayed"
	// Archived: kept for reference, off every queue; restore reopens it.
	Archived State = "archived"
	// Discarded: removed by a human; kept until the retention.
	Discarded State = "discarded"
)

// States lists every state.
var States = []State{Open, Left, ReplayDue, Replayed, Archived, Discarded}

// Closed reports whether s is Replayed, Archived or Discarded.
func (s State) Closed() bool { return s == Replayed || s == Archived || s == Discarded }

// ParseState reads a --state value.
func ParseState(s string) (State, bool) {
	if slices.Contains(States, State(s)) {
		return State(s), true
	}
	return "", false
}

// Entry is one dead-lettered or parked message, every field kept, and its state.
type Entry struct {
	// ID is EntryID(Source, SequenceNumber, MessageID), set by Put's caller.
	ID             string
	Source         Source
	SequenceNumber int64
	MessageID      string
	// OrderID is the SessionId (a parked copy's original); maybe empty or no legal key.
	OrderID       string
	SessionID     string
	Subject       string
	ContentType   string
	CorrelationID string
	Body          []byte
	Properties    map[string]any
	Reason        string
	Description   string
	DeliveryCount int32
	EnqueuedTime  time.Time
	// StoredAt is when it reached the store (broker clock), for cool-down and age.
	StoredAt time.Time
	// Group is the failure group (a fingerprint of reason and masked description).
	Group string
	// ReplayCount is its replays so far (its ReplayCount property at Put, then +1 each).
	ReplayCount int
	State       State
	UpdatedAt   time.Time
	// Actions counts its audit entries, "stored" included.
	Actions int
	// ClaimedBy (kept verbatim; see ParseClaim) and ClaimedAt are set in ReplayDue.
	ClaimedBy string
	ClaimedAt time.Time
	// NewMessageID is the MessageId of its last replay.
	NewMessageID string
	// ETag is the version read; Transition is conditional on it.
	ETag string
}

// ActionStored is the audit action of Put; callers name the others.
const ActionStored = "stored"

// AuditEntry is one action on one entry, written atomically with its change.
type AuditEntry struct {
	EntryID string
	OrderID string
	// N numbers the entry's actions from 1 ("stored").
	N              int
	At             time.Time
	Action         string
	From, To       State
	Actor          string
	Source         Source
	SequenceNumber int64
	MessageID      string
	Reason         string
	NewMessageID   string
	Detail         string
}

// Transition is a change of one entry, made by Store.Transition.
type Transition struct {
	To State
	At time.Time
	// Audit is written atomically as action Actions+1; only NeedsNoAudit changes omit it.
	Audit *AuditEntry
	// ReplayCount and NewMessageID, when not zero, replace the entry's.
	ReplayCount  int
	NewMessageID string
	// ClaimedBy is set with To ReplayDue (ClaimedAt = At); others clear the claim.
	ClaimedBy string
}

// NeedsNoAudit reports whether a transition from from to to may omit its audit entry:
// a replay's claim (to ReplayDue) or its release (to a state not closed, or Archived).
func NeedsNoAudit(from, to State) bool {
	return to == ReplayDue || (from == ReplayDue && (!to.Closed() || to == Archived))
}

// Claim is the ClaimedBy of an entry in ReplayDue. Once timed out, anyone may finish a
// claim of the stored body; a Corrected one (a body not stored) is released to From.
type Claim struct {
	By string
	// From is the state claimed from, to which a release returns it ("": Open).
	From State
	// Corrected: the claim carries a body other than the stored one.
	Corrected bool
}

// String is c as ClaimedBy: By, then " (from <state>)" or " (from <state>, corrected)".
func (c Claim) String() string {
	if c.From == "" && !c.Corrected {
		return c.By
	}
	from := cmp.Or(c.From, Open)
	if c.Corrected {
		return fmt.Sprintf("%s (from %s, corrected)", c.By, from)
	}
	return fmt.Sprintf("%s (from %s)", c.By, from)
}

// ParseClaim reads a Claim.String; any other value is a claim By it from Open.
func ParseClaim(claimedBy string) Claim {
	c := Claim{By: claimedBy, From: Open}
	i := strings.LastIndex(claimedBy, " (from ")
	if i < 0 || !strings.HasSuffix(claimedBy, ")") {
		return c
	}
	inner := claimedBy[i+len(" (from ") : len(claimedBy)-1]
	st, corrected := strings.CutSuffix(inner, ", corrected")
	from, ok := ParseState(st)
	if !ok || from == ReplayDue || (from.Closed() && from != Archived) {
		return c
	}
	return Claim{By: claimedBy[:i], From: from, Corrected: corrected}
}

// Filter selects entries; zero fields match everything.
type Filter struct {
	States  []State
	Source  Source
	Reason  string
	Group   string
	OrderID string
	// Since and Until bound StoredAt: Since <= StoredAt < Until.
	Since, Until time.Time
	// Text matches case-insensitively in the MessageId, order id, description or body.
	Text string
	// IDs, when set, restricts the result to these entries.
	IDs []string
}

// Sentinel errors; backends wrap them with %w and the operation and key.
var (
	// ErrNotFound: no entry with that id.
	ErrNotFound = errors.New("dlstore: not found")
	// ErrConflict: the entry changed since it was read (ETag mismatch).
	ErrConflict = errors.New("dlstore: entry changed since it was read")
	// ErrUnavailable: the store is unreachable now (timeout, 5xx, throttling, 403); retry later.
	ErrUnavailable = errors.New("dlstore: unavailable")
	// ErrTooLarge: the message exceeds what Service Bus Standard allows.
	ErrTooLarge = errors.New("dlstore: entry too large")
)

// MaxBody and MaxProperties are Service Bus Standard's limits; Put refuses more.
const (
	MaxBody       = 256 << 10
	MaxProperties = 64 << 10
)

// PropertiesSize is props' size against MaxProperties, never above Service Bus's AMQP count.
func PropertiesSize(props map[string]any) int {
	n := 0
	for k, v := range props {
		n += len(k)
		switch v := v.(type) {
		case string:
			n += len(v)
		case bool:
			n++
		case int64, float64, time.Time:
			n += 8
		}
	}
	return n
}

// Store is the port; methods honour ctx, are concurrency-safe and retry no more than their client.
type Store interface {
	// Put stores e (ID, Source, StoredAt required) as Open with its "stored" audit; false if e.ID exists.
	Put(ctx context.Context, e Entry, actor string) (created bool, err error)
	// Get returns the whole entry, or ErrNotFound.
	Get(ctx context.Context, id string) (Entry, error)
	// List returns the entries matching f, by StoredAt then ID. With f.OnlyNotClosed
	// entries may lack Body, Properties and ETag: Get one before its Transition.
	List(ctx context.Context, f Filter) ([]Entry, error)
	// Transition changes e as t says, with t.Audit, atomically if e.ETag still
	// matches (else ErrConflict; ErrNotFound if gone), and returns it as stored.
	Transition(ctx context.Context, e Entry, t Transition) (Entry, error)
	// History returns the audit entries of one order (all if "") in time order.
	History(ctx context.Context, orderID string) ([]AuditEntry, error)
	// Purge deletes up to max closed entries updated before before, with their audit.
	Purge(ctx context.Context, before time.Time, max int) (int, error)
}

// EntryID is the id of message seq/messageID from src, `<source>-<20-digit seq>-<8 hex
// of SHA-256(messageID)>`: the hash tells a recreated queue's reused numbers apart.
func EntryID(src Source, seq int64, messageID string) string {
	sum := sha256.Sum256([]byte(messageID))
	return fmt.Sprintf("%s-%020d-%s", src, seq, hex.EncodeToString(sum[:4]))
}

// Matches reports whether e matches f: the semantics every backend implements.
func (f Filter) Matches(e Entry) bool {
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, e.State),
		len(f.IDs) > 0 && !slices.Contains(f.IDs, e.ID),
		f.Source != "" && e.Source != f.Source,
		f.Reason != "" && e.Reason != f.Reason,
		f.Group != "" && e.Group != f.Group,
		f.OrderID != "" && e.OrderID != f.OrderID,
		!f.Since.IsZero() && e.StoredAt.Before(f.Since),
		!f.Until.IsZero() && !e.StoredAt.Before(f.Until):
		return false
	}
	return f.Text == "" || matchText(f.Text, e)
}

// matchText is the --text match (Filter.Text).
func matchText(text string, e Entry) bool {
	t := strings.ToLower(text)
	for _, s := range []string{e.MessageID, e.OrderID, e.Description} {
		if strings.Contains(strings.ToLower(s), t) {
			return true
		}
	}
	return bytes.Contains(bytes.ToLower(e.Body), []byte(t))
}

// NeedsBody reports whether f needs an entry's body (a --text filter), which a
// summary index lacks.
func (f Filter) NeedsBody() bool { return f.Text != "" }

// OnlyNotClosed reports whether f selects only states not closed (a bounded query).
func (f Filter) OnlyNotClosed() bool {
	return len(f.States) > 0 && !slices.ContainsFunc(f.States, State.Closed)
}

// NotClosed is the filter of every entry that is not closed.
func NotClosed() Filter { return Filter{States: []State{Open, Left, ReplayDue}} }

// SortEntries orders entries as List does: by StoredAt, then id.
func SortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		return cmp.Or(a.StoredAt.Compare(b.StoredAt), cmp.Compare(a.ID, b.ID))
	})
}

// Stored is e as Put stores it (Open, one action, no claim, no ETag) and its
// "stored" audit entry by actor; an error if Put must refuse e: no ID, Source
// or StoredAt, or ErrTooLarge past MaxBody or MaxProperties.
func Stored(e Entry, actor string) (Entry, AuditEntry, error) {
	if e.ID == "" || e.Source == "" || e.StoredAt.IsZero() {
		return e, AuditEntry{}, errors.New("id, source and stored-at are required")
	}
	if len(e.Body) > MaxBody {
		return e, AuditEntry{}, fmt.Errorf("body of %d bytes (Service Bus allows %d): %w", len(e.Body), MaxBody, ErrTooLarge)
	}
	if n := PropertiesSize(e.Properties); n > MaxProperties {
		return e, AuditEntry{}, fmt.Errorf("properties of %d bytes (Service Bus allows %d): %w", n, MaxProperties, ErrTooLarge)
	}
	e.State, e.UpdatedAt, e.Actions, e.ClaimedBy, e.ClaimedAt, e.ETag = Open, e.StoredAt, 1, "", time.Time{}, ""
	return e, AuditEntry{EntryID: e.ID, OrderID: e.OrderID, N: 1, At: e.StoredAt, Action: ActionStored, To: Open, Actor: actor,
		Source: e.Source, SequenceNumber: e.SequenceNumber, MessageID: e.MessageID, Reason: e.Reason, Detail: e.Description}, nil
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
