// Package dlstore is the port of the dead-letter store that dead-lettered and parked
// messages are drained into: entries, states, audit entries, filters, sentinel errors
// and the Store contract (dlmem, dltable; dlstoretest). Messages are stored, not
// deferred (SessionLockLost, Azure/azure-sdk-for-net #34662); every change of state
// is conditional on the entry's ETag and atomic with its audit entry.
package dlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
	for _, st := range States {
		if string(st) == s {
			return st, true
		}
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
	from := c.From
	if from == "" {
		from = Open
	}
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
	if len(f.States) > 0 && !containsState(f.States, e.State) {
		return false
	}
	if len(f.IDs) > 0 && !containsString(f.IDs, e.ID) {
		return false
	}
	switch {
	case f.Source != "" && e.Source != f.Source,
		f.Reason != "" && e.Reason != f.Reason,
		f.Group != "" && e.Group != f.Group,
		f.OrderID != "" && e.OrderID != f.OrderID,
		!f.Since.IsZero() && e.StoredAt.Before(f.Since),
		!f.Until.IsZero() && !e.StoredAt.Before(f.Until):
		return false
	}
	return f.Text == "" || matchText(f.Text, e)
}

// OnlyNotClosed reports whether f selects only states not closed (a bounded query).
func (f Filter) OnlyNotClosed() bool {
	if len(f.States) == 0 {
		return false
	}
	for _, s := range f.States {
		if s.Closed() {
			return false
		}
	}
	return true
}

// NotClosed is the filter of every entry that is not closed.
func NotClosed() Filter { return Filter{States: []State{Open, Left, ReplayDue}} }

func containsState(ss []State, s State) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
