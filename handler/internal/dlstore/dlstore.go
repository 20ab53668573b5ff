// Package dlstore is the port of the dead-letter store: the Table Storage
// rows that every dead-lettered and parked message is drained into, and on
// which the sweeper and the operators act. It owns the entry, its states,
// the audit entry, the filter, the sentinel errors, and the Store contract
// that every backend (dlmem in memory, dltable on Table Storage) meets and
// the conformance suite in dlstoretest checks.
//
// Why a store and not the dead-letter queues themselves: Service Bus
// deferral does not work in the dead-letter queue of a session-enabled
// queue from another receiver (SessionLockLost, Azure/azure-sdk-for-net
// #34662), deferred messages never expire, and a queue cannot be queried by
// order, reason or time. So the sweeper receives each message, stores it
// here insert-if-absent (idempotent on source, sequence number and
// MessageId), then completes it; everything after that works on rows.
//
// The life of an entry:
//
//	           Put                 Transition (audit entry and state change together)
//	message ------> open ----------------------------> replayed | archived | discarded
//	                 |  \--> left (for a human) --/        ^
//	                 |  \--> replay-due (claimed) --------/
//	archived --restore--> open
//
// Every change of state is conditional on the entry's ETag and writes its
// audit entry in the same atomic step, so no action is ever left without
// its record and two actors never both change one entry.
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

// Source names where an entry was drained from: its value appears in
// flags, log lines, metric labels and keys.
type Source string

// The sources, in the order a sweep drains them.
const (
	// DLQ is order-status/$DeadLetterQueue (MaxDeliveryCountExceeded,
	// TTLExpiredException).
	DLQ Source = "dlq"
	// Poison is order-status-poison, where the handler parks poison copies.
	Poison Source = "poison"
	// PoisonDLQ is order-status-poison/$DeadLetterQueue (a parked message
	// expired or failed its deliveries there).
	PoisonDLQ Source = "poison-dlq"
)

// Sources lists every source.
var Sources = []Source{DLQ, Poison, PoisonDLQ}

// State is where an entry is in its life.
type State string

// The states. Open, Left and ReplayDue are "not closed": they are what the
// sweeper and the stats look at, and they never expire. The closed states
// are purged after the retention.
const (
	// Open: stored, waiting for the policy (a replay's cool-down, say).
	Open State = "open"
	// Left: the policy leaves it for a human.
	Left State = "left"
	// ReplayDue: an actor has claimed it to replay it (ClaimedBy,
	// ClaimedAt); after the claim times out anyone may finish the replay
	// with the stored body, unless the claim is Corrected (see Claim).
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

// Closed reports whether s is a closed state (replayed, archived,
// discarded).
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

// ParseSource reads a --source value.
func ParseSource(s string) (Source, bool) {
	for _, src := range Sources {
		if string(src) == s {
			return src, true
		}
	}
	return "", false
}

// Entry is one dead-lettered or parked message and what has happened to
// it. Every field a message carries is kept, so a replay or a restore
// rebuilds it byte for byte.
type Entry struct {
	// ID identifies the entry (EntryID of source, sequence number and
	// MessageId); it is set by the caller of Put.
	ID             string
	Source         Source
	SequenceNumber int64
	MessageID      string
	// OrderID is the order the message belongs to: its SessionId, or for
	// a parked copy the original's SessionId. It may be empty or not a
	// legal key (a poison message's session); backends cope.
	OrderID       string
	SessionID     string
	Subject       string
	ContentType   string
	CorrelationID string
	Body          []byte
	// Properties are the application properties, with their types
	// (string, bool, int64, float64, time.Time), the dead-letter reason
	// and description included. Up to Service Bus's 64 KB is stored.
	Properties    map[string]any
	Reason        string
	Description   string
	DeliveryCount int32
	EnqueuedTime  time.Time
	// StoredAt is when it reached the store (the broker's clock): the
	// real "dead-lettered at" for the cool-down and the age alert.
	StoredAt time.Time
	// Group is the failure group (a fingerprint of reason and masked
	// description), set by the caller of Put.
	Group string
	// ReplayCount is how many times it has been replayed (from its
	// ReplayCount property at Put, raised by each replay).
	ReplayCount int
	State       State
	UpdatedAt   time.Time
	// Actions counts the audit entries written for it, its "stored" one
	// included; the next audit entry is number Actions+1.
	Actions int
	// ClaimedBy and ClaimedAt are set in state ReplayDue. Backends keep
	// ClaimedBy verbatim; ParseClaim reads it.
	ClaimedBy string
	ClaimedAt time.Time
	// NewMessageID is the MessageId of its last replay.
	NewMessageID string
	// ETag is the version read; Transition is conditional on it.
	ETag string
}

// Audit actions the store itself writes; the others (replayed, archived,
// discarded, left, restored, resubmitted) are named by the caller.
const ActionStored = "stored"

// AuditEntry is one action on one entry, kept with it (the same order, the
// same atomic write as the state change it records).
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
	// At is the time of the change (the broker's clock): UpdatedAt.
	At time.Time
	// Audit, when set, is written in the same atomic step as number
	// Actions+1 (its EntryID, OrderID, N, From and To are filled in).
	// Only a claim (To ReplayDue) and the release of one (from ReplayDue
	// back to the state it was claimed from, after a send that failed or
	// never happened) may go without one: neither is an action
	// (NeedsNoAudit).
	Audit *AuditEntry
	// ReplayCount and NewMessageID, when not zero, replace the entry's.
	ReplayCount  int
	NewMessageID string
	// ClaimedBy is set with To ReplayDue (ClaimedAt = At); any other
	// transition clears the claim.
	ClaimedBy string
}

// NeedsNoAudit reports whether a transition from an entry in state from to
// state to may go without an audit entry: a claim of a replay (to
// ReplayDue) or the release of one (from ReplayDue to a state a replay
// may be claimed from: one that is not closed, or Archived). A claim and
// its release are one step undone, not an action. Every other change is
// an action and is recorded.
func NeedsNoAudit(from, to State) bool {
	return to == ReplayDue || (from == ReplayDue && (!to.Closed() || to == Archived))
}

// Claim is what the ClaimedBy of an entry in state ReplayDue says. A
// claim that is not Corrected is the replay of the stored body: after it
// times out anyone may finish it (send the stored body, record it). A
// Corrected claim was made to send a body other than the stored one (an
// operator's correction, which the store does not keep): no one but its
// claimant may finish it; after it times out it is released to From, never
// finished with the stored body.
type Claim struct {
	// By names the claimant (actor and a nonce).
	By string
	// From is the state the entry was claimed from, to which a release
	// returns it ("" when the claim does not say: Open).
	From State
	// Corrected: the claim carries a body other than the stored one.
	Corrected bool
}

// String is c as ClaimedBy: By, then " (from <state>)", or " (from
// <state>, corrected)".
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

// ParseClaim reads a ClaimedBy written by Claim.String; any other value is
// a claim By it, from Open, not corrected.
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
	// States: any of them (none: every state).
	States  []State
	Source  Source
	Reason  string
	Group   string
	OrderID string
	// Since and Until bound StoredAt: Since <= StoredAt < Until.
	Since, Until time.Time
	// Text matches, case-insensitively, a substring of the MessageId, the
	// order id, the description or the body.
	Text string
	// IDs, when set, restricts the result to these entries.
	IDs []string
}

// Sentinel errors; backends wrap them with %w and the operation and key.
var (
	// ErrNotFound: no entry with that id.
	ErrNotFound = errors.New("dlstore: not found")
	// ErrConflict: the entry changed since it was read (its ETag no
	// longer matches).
	ErrConflict = errors.New("dlstore: entry changed since it was read")
	// ErrUnavailable: the store cannot be reached now (timeout, 5xx,
	// throttling, 403 while a role assignment propagates); retry later.
	ErrUnavailable = errors.New("dlstore: unavailable")
	// ErrTooLarge: the message cannot be stored whatever is tried
	// (beyond the sizes Service Bus Standard allows).
	ErrTooLarge = errors.New("dlstore: entry too large")
)

// Limits the store takes whole: what Service Bus Standard allows (a
// message of 256 KB, application properties of 64 KB). Put refuses more
// with ErrTooLarge; the body counts in bytes, the properties as
// PropertiesSize counts them.
const (
	MaxBody       = 256 << 10
	MaxProperties = 64 << 10
)

// PropertiesSize is the size of application properties as the store
// counts it against MaxProperties: for each property the bytes of its name
// plus those of its value (a string's UTF-8 bytes; 1 for a bool; 8 for an
// int64, a float64 or a time.Time). That is never more than Service Bus
// counts for the same properties (their AMQP encoding adds a type and
// length to each), so what Service Bus accepted is never refused. Any
// other type counts as its name alone: backends refuse it as a type, not
// as a size.
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

// Store is the port. Every method honours ctx and is safe for concurrent
// use; none retries beyond what its client does.
type Store interface {
	// Put stores e in state Open, with Actions 1 and its "stored" audit
	// entry (actor, at), unless an entry with e.ID exists: then it
	// changes nothing and returns created false. e.ID, e.Source and
	// e.StoredAt are required.
	Put(ctx context.Context, e Entry, actor string) (created bool, err error)
	// Get returns the whole entry (body and properties included).
	// ErrNotFound when there is none.
	Get(ctx context.Context, id string) (Entry, error)
	// List returns the entries matching f, ordered by StoredAt then ID.
	// When f.States holds only states that are not closed
	// (f.OnlyNotClosed), a backend may read a bounded set (its index of
	// those) instead of every entry: the entries it lists then may come
	// without Body, Properties and ETag, and after an interrupted write
	// their summary may lag one change behind the entry (an entry closed
	// or missing may still be listed, one not closed may be listed with
	// its former state not closed). An entry that is not closed is always
	// listed by List(NotClosed()); a Get brings its summary up to date.
	// Callers Get an entry before they Transition it (a Transition without
	// the ETag of a read fails with ErrConflict). With any other filter
	// the entries are read whole.
	List(ctx context.Context, f Filter) ([]Entry, error)
	// Transition changes e as t says, conditional on e.ETag, with t.Audit
	// in the same atomic step, and returns the entry as stored.
	// ErrConflict when e changed since it was read; ErrNotFound when it
	// is gone.
	Transition(ctx context.Context, e Entry, t Transition) (Entry, error)
	// History returns the audit entries of one order in time order, or
	// every audit entry when orderID is "" (tests, the dev host).
	History(ctx context.Context, orderID string) ([]AuditEntry, error)
	// Purge deletes up to max closed entries whose UpdatedAt is before
	// before, each with its audit entries, and returns how many it
	// deleted. Entries that are not closed are never purged.
	Purge(ctx context.Context, before time.Time, max int) (int, error)
}

// EntryID is the id of the message with sequence number seq and MessageId
// messageID drained from src: `<source>-<20-digit seq>-<8 hex of the
// MessageId's SHA-256>`. Sequence numbers are unique within a queue; the
// hash keeps a recreated queue's reused number from colliding.
func EntryID(src Source, seq int64, messageID string) string {
	sum := sha256.Sum256([]byte(messageID))
	return fmt.Sprintf("%s-%020d-%s", src, seq, hex.EncodeToString(sum[:4]))
}

// Matches reports whether e matches f (the filter semantics every backend
// implements; backends may use it).
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

// OnlyNotClosed reports whether f selects only states that are not
// closed (a bounded query).
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
