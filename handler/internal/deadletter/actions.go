package deadletter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// errSkipped: the entry changed (or was claimed) since it was listed, by
// another actor; this one leaves it alone.
var errSkipped = errors.New("deadletter: entry changed meanwhile")

// Errors of the operators' actions.
var (
	// ErrNoMessage: no entry with that id.
	ErrNoMessage = errors.New("deadletter: no such message")
	// ErrInvalidBody: the message to send would be parked again; the error
	// says why (it wraps the *order.PoisonError).
	ErrInvalidBody = errors.New("deadletter: the message would be parked again")
	// ErrNotActionable: the entry's state does not allow the action (a
	// discarded entry cannot be replayed, an open one restored).
	ErrNotActionable = errors.New("deadletter: not possible in the entry's state")
)

// apply carries out decision d on the entry with id, as actor, at now: it
// reads the entry (the list may be older than it), checks that the action
// still fits its state, and changes it. A replay is claimed first, sent,
// then recorded; every other action is one transition with its audit
// entry. body replaces the replayed body (an operator's correction).
func (s *Sweeper) apply(ctx context.Context, id string, d Decision, body []byte, actor string, now time.Time) (Item, error) {
	e, err := s.store.Get(ctx, id)
	if err != nil {
		it := Item{EntryID: id, Action: d.Action, Why: d.Why}
		if errors.Is(err, dlstore.ErrNotFound) {
			return it, fmt.Errorf("%w: entry %s", ErrNoMessage, id)
		}
		return it, err
	}
	it := itemOf(e, d.Action, d.Why)
	var next dlstore.Entry
	switch d.Action {
	case ActionReplay, ActionResubmit:
		next, err = s.replay(ctx, e, d, body, actor, now)
	case ActionArchive, ActionDiscard, ActionLeave, ActionRestore:
		next, err = s.transition(ctx, e, d, actor, now)
	default:
		return it, fmt.Errorf("deadletter: %s is not an action on an entry", d.Action)
	}
	if err != nil {
		if errors.Is(err, dlstore.ErrConflict) {
			err = fmt.Errorf("%w: %w", errSkipped, err)
		}
		return it, err
	}
	it.State, it.NewMessageID, it.Done = string(next.State), next.NewMessageID, true
	s.o.Metrics.action(d.Action, e.Reason)
	s.log.Info("deadletter_action", "source", string(e.Source), "sequence", e.SequenceNumber, "message_id", e.MessageID,
		"order_id", e.OrderID, "entry_id", e.ID, "reason", e.Reason, "action", string(d.Action), "new_message_id", next.NewMessageID,
		"actor", actor, "why", d.Why)
	return it, nil
}

// targetOf is the state an action leaves an entry in, and the states it
// may start from.
func targetOf(a Action) (to dlstore.State, from []dlstore.State) {
	switch a {
	case ActionArchive:
		return dlstore.Archived, []dlstore.State{dlstore.Open, dlstore.Left}
	case ActionDiscard:
		return dlstore.Discarded, []dlstore.State{dlstore.Open, dlstore.Left, dlstore.Archived}
	case ActionLeave:
		return dlstore.Left, []dlstore.State{dlstore.Open}
	case ActionRestore:
		return dlstore.Open, []dlstore.State{dlstore.Archived, dlstore.Left}
	case ActionReplay, ActionResubmit:
		// Archived too: an operator corrects an archived message and
		// replays it in one step (a restore first would race the timer,
		// whose policy archives it again).
		return dlstore.Replayed, []dlstore.State{dlstore.Open, dlstore.Left, dlstore.ReplayDue, dlstore.Archived}
	}
	return "", nil
}

func allowed(e dlstore.Entry, a Action) error {
	_, from := targetOf(a)
	for _, s := range from {
		if e.State == s {
			return nil
		}
	}
	return fmt.Errorf("%w: entry %s (%s) is %s; %s works on %v", ErrNotActionable, e.ID, e.MessageID, e.State, a, from)
}

// transition is an action that is only a change of state: the audit entry
// and the new state in one conditional write.
func (s *Sweeper) transition(ctx context.Context, e dlstore.Entry, d Decision, actor string, now time.Time) (dlstore.Entry, error) {
	if err := allowed(e, d.Action); err != nil {
		return e, err
	}
	to, _ := targetOf(d.Action)
	return s.store.Transition(ctx, e, dlstore.Transition{To: to, At: now,
		Audit: &dlstore.AuditEntry{At: now, Action: string(d.Action), Actor: actor, Detail: d.Why}})
}

// replay claims e (so that no other actor sends it at once), sends replay
// number e.ReplayCount+1, then records it: the audit entry and the state
// Replayed in one conditional write. The claim (dlstore.Claim) records the
// state it was made from and whether it carries a corrected body. A send
// that fails releases the claim to that state. A crash after the claim
// leaves it; once it times out, a replay of the stored body is finished by
// any run under the same MessageId (duplicate detection drops a second
// copy) and recorded, while a corrected one (whose body the store does not
// keep) is released, recorded, by a replay without a body, which then
// fails with errSkipped (releaseUnsent): what the operator saw fail never
// happens with other content.
func (s *Sweeper) replay(ctx context.Context, e dlstore.Entry, d Decision, body []byte, actor string, now time.Time) (dlstore.Entry, error) {
	if err := allowed(e, d.Action); err != nil {
		return e, err
	}
	msg := ReplayMessage(e, body)
	if body != nil {
		if err := Validate(msg); err != nil {
			return e, fmt.Errorf("%w: %w", ErrInvalidBody, err)
		}
	}
	from := e.State
	if e.State == dlstore.ReplayDue {
		// A claim is one replay's, never an actor's: two sweeps are both
		// "sweeper", so a fresh claim is always someone else's.
		if now.Sub(e.ClaimedAt) < s.o.ClaimTimeout {
			return e, fmt.Errorf("%w: a replay claimed by %s at %s is under way", errSkipped, e.ClaimedBy, e.ClaimedAt.UTC().Format(time.RFC3339))
		}
		// A stale claim: whoever made it is gone.
		c := dlstore.ParseClaim(e.ClaimedBy)
		if c.Corrected && body == nil {
			return s.releaseUnsent(ctx, e, c, actor, now)
		}
		from = c.From
	}
	claimant := dlstore.Claim{By: actor + "#" + hostproto.NewGUID()[:8], From: from, Corrected: body != nil}.String()
	claimed, err := s.store.Transition(ctx, e, dlstore.Transition{To: dlstore.ReplayDue, At: now, ClaimedBy: claimant})
	if err != nil {
		return e, fmt.Errorf("deadletter: claim %s for a replay: %w", e.ID, err)
	}
	if err := s.b.Send(ctx, s.o.Queues.Queue, msg); err != nil {
		// Nothing was sent: give the entry back as it was.
		if _, rerr := s.store.Transition(context.WithoutCancel(ctx), claimed, dlstore.Transition{To: from, At: now}); rerr != nil {
			s.log.Warn("could not release a replay claim after a failed send; it times out", "entry_id", e.ID, "error", rerr.Error())
		}
		return e, fmt.Errorf("deadletter: replay %s (%s) as %s: %w", e.ID, e.MessageID, msg.MessageID, err)
	}
	t := dlstore.Transition{To: dlstore.Replayed, At: now, ReplayCount: e.ReplayCount + 1, NewMessageID: msg.MessageID,
		Audit: &dlstore.AuditEntry{At: now, Action: string(d.Action), Actor: actor, NewMessageID: msg.MessageID, Detail: d.Why}}
	next, err := s.store.Transition(ctx, claimed, t)
	for try := 0; errors.Is(err, dlstore.ErrConflict) && try < 3; try++ {
		// Someone changed it between our claim and our record (a stale
		// claim taken over): the replay was sent all the same, so record
		// it on whatever the entry is now.
		cur, gerr := s.store.Get(ctx, e.ID)
		if gerr != nil {
			err = gerr
			break
		}
		if cur.State == dlstore.Replayed && cur.NewMessageID == msg.MessageID {
			return cur, nil // the other actor recorded the same replay
		}
		t.To = cur.State
		if cur.State == dlstore.ReplayDue {
			t.To = dlstore.Replayed
		}
		next, err = s.store.Transition(ctx, cur, t)
	}
	if err != nil {
		return e, fmt.Errorf("deadletter: replay %s sent as %s, but recording it failed (the next run sends it again under the same MessageId and records it): %w",
			e.ID, msg.MessageID, err)
	}
	return next, nil
}

// AuditReleased is the audit action of the release of a corrected
// replay's claim that timed out unrecorded.
const AuditReleased = "released"

// releaseUnsent gives back e, whose corrected replay claimed as c timed out
// unrecorded (its claimant is gone, and the correction with it), to the
// state it was claimed from, and fails with errSkipped: nothing is sent.
// Whether the claimant sent the correction before it stopped is unknown,
// so the release is recorded (AuditReleased, naming the MessageId it
// would have had) and does not raise ReplayCount: a replay by hand then
// reuses that MessageId.
func (s *Sweeper) releaseUnsent(ctx context.Context, e dlstore.Entry, c dlstore.Claim, actor string, now time.Time) (dlstore.Entry, error) {
	id := ReplayID(OriginalID(e), e.ReplayCount+1)
	detail := fmt.Sprintf("a replay with a corrected body claimed by %s at %s was never recorded (sent as %s or not at all); %s again, the stored body not sent",
		c.By, e.ClaimedAt.UTC().Format(time.RFC3339), id, c.From)
	if _, err := s.store.Transition(ctx, e, dlstore.Transition{To: c.From, At: now,
		Audit: &dlstore.AuditEntry{At: now, Action: AuditReleased, Actor: actor, NewMessageID: id, Detail: detail}}); err != nil {
		return e, fmt.Errorf("deadletter: release %s, whose corrected replay claimed by %s was never sent: %w", e.ID, c.By, err)
	}
	s.log.Warn("a corrected replay was claimed but never sent; released, not sent with the stored body", "entry_id", e.ID,
		"message_id", e.MessageID, "claimed_by", c.By, "claimed_at", e.ClaimedAt, "state", string(c.From))
	return e, fmt.Errorf("%w: the corrected replay claimed by %s at %s was never sent; the entry is %s again", errSkipped, c.By,
		e.ClaimedAt.UTC().Format(time.RFC3339), c.From)
}

// Allowed reports whether action a may be carried out on e in its state:
// nil, or an error wrapping ErrNotActionable that names the states a takes.
// It lets a dry run or a bulk action say what would be refused before
// anything is done; the action itself checks again on the entry it reads.
func Allowed(e dlstore.Entry, a Action) error {
	if _, from := targetOf(a); from == nil {
		return fmt.Errorf("deadletter: %s is not an action on an entry", a)
	}
	return allowed(e, a)
}
