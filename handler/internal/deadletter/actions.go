package deadletter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// errSkipped: another actor changed or claimed the entry since it was listed.
var errSkipped = errors.New("deadletter: entry changed meanwhile")

// Errors of the operators' actions.
var (
	// ErrNoMessage: no entry with that id.
	ErrNoMessage = errors.New("deadletter: no such message")
	// ErrInvalidBody: the edited message would be parked again; wraps the *order.PoisonError.
	ErrInvalidBody = errors.New("deadletter: the message would be parked again")
	// ErrNotActionable: the entry's state does not allow the action.
	ErrNotActionable = errors.New("deadletter: not possible in the entry's state")
)

// Edit changes a replay's message before it is checked and sent (a corrected replay).
type Edit func(*broker.Message) error

// Apply carries out d on entry id as actor at now, on the entry read again and if the
// action still fits its state; a non-nil edit changes the replayed message.
func (s *Sweeper) Apply(ctx context.Context, id string, d Decision, edit Edit, actor string, now time.Time) (Item, error) {
	e, err := s.store.Get(ctx, id)
	if err != nil {
		it := Item{EntryID: id, Action: d.Action, Why: d.Why}
		if errors.Is(err, dlstore.ErrNotFound) {
			return it, fmt.Errorf("%w: entry %s", ErrNoMessage, id)
		}
		return it, err
	}
	it := ItemOf(e, d.Action, d.Why)
	var next dlstore.Entry
	switch d.Action {
	case ActionReplay, ActionResubmit:
		next, err = s.replay(ctx, e, d, edit, actor, now)
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

// targetOf is the state action a leaves an entry in, and the states it may start from.
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
		// Archived too: corrected and replayed in one step (a restore would race the timer).
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

// transition writes the new state and its audit entry in one conditional write.
func (s *Sweeper) transition(ctx context.Context, e dlstore.Entry, d Decision, actor string, now time.Time) (dlstore.Entry, error) {
	if err := allowed(e, d.Action); err != nil {
		return e, err
	}
	to, _ := targetOf(d.Action)
	return s.store.Transition(ctx, e, dlstore.Transition{To: to, At: now,
		Audit: &dlstore.AuditEntry{At: now, Action: string(d.Action), Actor: actor, Detail: d.Why}})
}

// replay claims e (dlstore.Claim), sends replay e.ReplayCount+1, then records it with
// its audit entry; a failed send releases the claim. Any run finishes a timed-out claim
// under the same MessageId, unless corrected (releaseUnsent).
func (s *Sweeper) replay(ctx context.Context, e dlstore.Entry, d Decision, edit Edit, actor string, now time.Time) (dlstore.Entry, error) {
	if err := allowed(e, d.Action); err != nil {
		return e, err
	}
	msg := ReplayMessage(e, nil)
	if edit != nil {
		if err := edit(&msg); err != nil {
			return e, err
		}
		if err := Validate(msg); err != nil {
			return e, fmt.Errorf("%w: %w", ErrInvalidBody, err)
		}
	}
	from := e.State
	if e.State == dlstore.ReplayDue {
		// A fresh claim is always another replay's (two sweeps are both "sweeper").
		if now.Sub(e.ClaimedAt) < s.o.ClaimTimeout {
			return e, fmt.Errorf("%w: a replay claimed by %s at %s is under way", errSkipped, e.ClaimedBy, e.ClaimedAt.UTC().Format(time.RFC3339))
		}
		c := dlstore.ParseClaim(e.ClaimedBy)
		if c.Corrected && edit == nil {
			return s.releaseUnsent(ctx, e, c, actor, now)
		}
		from = c.From
	}
	claimant := dlstore.Claim{By: actor + "#" + uuid.NewString()[:8], From: from, Corrected: edit != nil}.String()
	claimed, err := s.store.Transition(ctx, e, dlstore.Transition{To: dlstore.ReplayDue, At: now, ClaimedBy: claimant})
	if err != nil {
		return e, fmt.Errorf("deadletter: claim %s for a replay: %w", e.ID, err)
	}
	if err := s.b.Send(ctx, s.o.Queues.Queue, msg); err != nil {
		if _, rerr := s.store.Transition(context.WithoutCancel(ctx), claimed, dlstore.Transition{To: from, At: now}); rerr != nil {
			s.log.Warn("could not release a replay claim after a failed send; it times out", "entry_id", e.ID, "error", rerr.Error())
		}
		return e, fmt.Errorf("deadletter: replay %s (%s) as %s: %w", e.ID, e.MessageID, msg.MessageID, err)
	}
	t := dlstore.Transition{To: dlstore.Replayed, At: now, ReplayCount: e.ReplayCount + 1, NewMessageID: msg.MessageID,
		Audit: &dlstore.AuditEntry{At: now, Action: string(d.Action), Actor: actor, NewMessageID: msg.MessageID, Detail: d.Why}}
	next, err := s.store.Transition(ctx, claimed, t)
	for try := 0; errors.Is(err, dlstore.ErrConflict) && try < 3; try++ {
		// Our claim was taken over, but the replay was sent: record it on the entry as it is.
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

// AuditReleased is the audit action releasing a timed-out corrected replay's claim.
const AuditReleased = "released"

// releaseUnsent returns e, whose corrected replay claim c timed out, to c.From, audited
// (AuditReleased, the maybe-sent MessageId, ReplayCount kept), and fails with errSkipped.
func (s *Sweeper) releaseUnsent(ctx context.Context, e dlstore.Entry, c dlstore.Claim, actor string, now time.Time) (dlstore.Entry, error) {
	id := ReplayID(OriginalID(e), e.ReplayCount+1)
	detail := fmt.Sprintf("a corrected replay claimed by %s at %s was never recorded (sent as %s or not at all); %s again, the stored body not sent",
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

// Allowed reports whether action a may be carried out on e in its state: nil,
// or an error wrapping ErrNotActionable naming the states a accepts.
func Allowed(e dlstore.Entry, a Action) error {
	if _, from := targetOf(a); from == nil {
		return fmt.Errorf("deadletter: %s is not an action on an entry", a)
	}
	return allowed(e, a)
}
