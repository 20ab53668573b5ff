package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Broker is the part of the broker port the sweeper uses.
type Broker interface {
	Send(ctx context.Context, queue string, msg broker.Message) error
	Receive(ctx context.Context, src broker.Source, max int, wait time.Duration) ([]broker.Received, error)
	Peek(ctx context.Context, src broker.Source, max int, from int64) ([]broker.Received, error)
	Complete(ctx context.Context, src broker.Source, m broker.Received) error
	Abandon(ctx context.Context, src broker.Source, m broker.Received) error
}

var _ Broker = broker.Broker(nil)

// Store is the dead-letter store the sweeper drains into (dlstore.Store).
type Store = dlstore.Store

// Defaults of the bounds (DEAD_LETTER_SWEEP_RATE, DEAD_LETTER_RETENTION) and the policy.
const (
	DefaultRate       = 10.0
	DefaultCooldown   = 10 * time.Minute
	DefaultMaxReplays = 3
	DefaultRetention  = 30 * 24 * time.Hour
	// DefaultBudget fits a run in its 5-minute interval and host.json's functionTimeout;
	// runs never overlap (Microsoft Learn, *Timer trigger for Azure Functions*, "Scale-out").
	DefaultBudget = 4 * time.Minute
	// DefaultClaimTimeout is how long a replay claim holds before anyone may finish it.
	DefaultClaimTimeout = 5 * time.Minute
	// DefaultPurgeBatch bounds the entries one run purges.
	DefaultPurgeBatch = 200
)

// Options configure a Sweeper.
type Options struct {
	Queues Queues
	Policy Policy
	// RatePerSecond bounds actions per second; draining is bounded by Budget only.
	RatePerSecond float64
	// Budget is how long a run may drain and act; it stops cleanly after.
	Budget time.Duration
	// Retention: closed entries older are purged (0: default; negative: never).
	Retention time.Duration
	// PurgeBatch bounds the entries one run purges.
	PurgeBatch int
	// ClaimTimeout: see DefaultClaimTimeout.
	ClaimTimeout time.Duration
	// ReceiveWait is how long a receive waits for a first message (default 1 s).
	ReceiveWait time.Duration
	Metrics     *Metrics
	Logger      *slog.Logger
	// Now is the clock when the broker has none (default time.Now).
	Now func() time.Time
}

// Sweeper drains the three sources into the store and applies the policy; it is safe for
// concurrent use. While the store's probe read fails a run receives nothing (dlstore.ErrUnavailable).
type Sweeper struct {
	b     Broker
	store Store
	o     Options
	log   *slog.Logger
}

// New returns a sweeper over b, draining into st.
func New(b Broker, st Store, o Options) *Sweeper {
	if o.RatePerSecond <= 0 {
		o.RatePerSecond = DefaultRate
	}
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.PurgeBatch <= 0 {
		o.PurgeBatch = DefaultPurgeBatch
	}
	if o.ClaimTimeout <= 0 {
		o.ClaimTimeout = DefaultClaimTimeout
	}
	if o.ReceiveWait <= 0 {
		o.ReceiveWait = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{b: b, store: st, o: o, log: o.Logger}
}

// Store returns the dead-letter store.
func (s *Sweeper) Store() Store { return s.store }

// Now is the sweeper's clock (Options.Now).
func (s *Sweeper) Now() time.Time { return s.o.Now() }

// RatePerSecond bounds actions per second (Options.RatePerSecond).
func (s *Sweeper) RatePerSecond() float64 { return s.o.RatePerSecond }

// Item is one message or entry a run or an operator looked at.
type Item struct {
	EntryID        string         `json:"entry_id,omitempty"`
	Source         dlstore.Source `json:"source"`
	SequenceNumber int64          `json:"sequence_number"`
	MessageID      string         `json:"message_id"`
	OrderID        string         `json:"order_id"`
	Reason         string         `json:"reason"`
	State          string         `json:"state,omitempty"`
	StoredAt       time.Time      `json:"stored_at,omitzero"`
	Action         Action         `json:"action"`
	Why            string         `json:"why"`
	NewMessageID   string         `json:"new_message_id,omitempty"`
	// Done: the action was carried out (false in a dry run, or on Error).
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"`
}

// Report is what a run found and did.
type Report struct {
	RunID  string         `json:"run_id"`
	DryRun bool           `json:"dry_run,omitempty"`
	Stats  []Stat         `json:"stats"`
	Items  []Item         `json:"items"`
	Counts map[Action]int `json:"counts"`
	// Stopped says why a run ended before its work did (its time budget).
	Stopped string `json:"stopped,omitempty"`
	// LockLost counts messages stored whose lock expired first; the next run completes them.
	LockLost int `json:"lock_lost,omitempty"`
	// Failed counts messages not stored and entries not acted on (Items with Error).
	Failed int `json:"failed,omitempty"`
	Purged int `json:"purged,omitempty"`
	// Unreadable names what a dry run (dlops) could not read (a source, the store).
	Unreadable []string `json:"unreadable,omitempty"`
	// StatsLines are the deadletter_stats JSON lines, as logged.
	StatsLines []string `json:"-"`
}

// RunOptions tune one run.
type RunOptions struct {
	// Actor names who acts in audit entries: "sweeper" or "cli:<user>".
	Actor string
	// Progress, if set, is called after each action.
	Progress func(Item)
}

// ActorSweeper is the Actor of the timer function.
const ActorSweeper = "sweeper"

// Run sweeps once (drain, act, purge, log the stats); a failing item never stops the others.
// It errs (wrapping dlstore.ErrUnavailable or a broker sentinel) only if a source or the store is down.
func (s *Sweeper) Run(ctx context.Context, ro RunOptions) (Report, error) {
	if ro.Actor == "" {
		ro.Actor = ActorSweeper
	}
	rep := Report{RunID: uuid.NewString(), Counts: map[Action]int{}, Items: []Item{}}
	r := &run{s: s, ro: ro, rep: &rep, deadline: time.Now().Add(s.o.Budget), stored: map[statKey]int{}}
	var runErr error
	if err := s.probe(ctx); err != nil {
		runErr = err
	} else {
		runErr = r.drainAll(ctx)
	}
	if runErr == nil || !errors.Is(runErr, dlstore.ErrUnavailable) {
		if err := r.act(ctx); err != nil {
			runErr = errors.Join(runErr, err)
		}
	}
	if runErr == nil {
		r.purge(ctx)
	}
	if err := r.stats(ctx); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return rep, runErr
}

// probeID is the probe read's id: a legal table key, never an EntryID.
const probeID = "sweeper-probe"

// probe checks with one point read of a missing entry that the store answers.
func (s *Sweeper) probe(ctx context.Context) error {
	if _, err := s.store.Get(ctx, probeID); err != nil && !errors.Is(err, dlstore.ErrNotFound) {
		return fmt.Errorf("deadletter: the store does not answer, nothing received: %w", err)
	}
	return nil
}

// drainAll drains every source in dlstore.Sources order, stopping at the first store failure.
func (r *run) drainAll(ctx context.Context) error {
	s := r.s
	var runErr error
	// Peek first: a receive on an empty source waits ReceiveWait.
	for _, k := range dlstore.Sources {
		head, err := s.b.Peek(ctx, s.o.Queues.Source(k), 1, 0)
		if err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("deadletter: peek %s: %w", k, err))
			continue
		}
		if len(head) == 0 {
			continue
		}
		if err := r.drain(ctx, k); err != nil {
			runErr = errors.Join(runErr, err)
			if errors.Is(err, dlstore.ErrUnavailable) || ctx.Err() != nil {
				break // the store is down: no more receiving, from any source
			}
		}
	}
	return runErr
}

type run struct {
	s        *Sweeper
	ro       RunOptions
	rep      *Report
	deadline time.Time
	next     time.Time // rate limit: the earliest next action
	stored   map[statKey]int
}

type statKey struct {
	source dlstore.Source
	reason string
}

func (r *run) overBudget() bool {
	if r.rep.Stopped != "" {
		return true
	}
	if !time.Now().Before(r.deadline) {
		r.rep.Stopped = fmt.Sprintf("used its time budget (%s); the next run goes on", r.s.o.Budget)
		return true
	}
	return false
}

// Pace waits for the next slot of the rate limit.
func Pace(ctx context.Context, next *time.Time, rate float64) error {
	now := time.Now()
	if wait := next.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now = *next
	}
	*next = now.Add(time.Duration(float64(time.Second) / rate))
	return nil
}

// maxBatch bounds one receive of a drain.
const maxBatch = 20

// drain receives every message of source k in batches growing to maxBatch, stores it,
// then completes it. An uncompleted message's delivery count rises (Microsoft Learn,
// ServiceBusReceivedMessage.DeliveryCount; *Message transfers, locks, and settlement*) to
// maxDeliveryCount (*Service Bus dead-letter queues*, "Maximum delivery count"), so
// dlstore.ErrUnavailable stops receiving; an unstorable message is held, then abandoned.
func (r *run) drain(ctx context.Context, k dlstore.Source) error {
	s := r.s
	src := s.o.Queues.Source(k)
	var held []broker.Received
	defer func() {
		for _, m := range held {
			_ = s.b.Abandon(context.WithoutCancel(ctx), src, m)
		}
	}()
	failed := map[int64]bool{}
	for n := 1; !r.overBudget(); n = min(2*n, maxBatch) {
		now := s.Now()
		batch, err := s.b.Receive(ctx, src, n, s.o.ReceiveWait)
		if err != nil {
			return fmt.Errorf("deadletter: receive %s: %w", k, err)
		}
		if len(batch) == 0 {
			return nil
		}
		for i, m := range batch {
			e := EntryOf(k, m, now)
			created, err := s.store.Put(ctx, e, r.ro.Actor)
			if err != nil {
				if errors.Is(err, dlstore.ErrUnavailable) || ctx.Err() != nil {
					held = append(held, batch[i:]...)
					return fmt.Errorf("deadletter: store %s seq %d (%s); no more receiving this run: %w", k, m.SequenceNumber, m.MessageID, err)
				}
				held = append(held, m)
				if !failed[m.SequenceNumber] {
					failed[m.SequenceNumber] = true
					r.fail(ItemOf(e, ActionStored, "could not be stored; it stays on "+src.String()+" and the next run tries again"), err)
				}
				continue
			}
			if created {
				r.stored[statKey{k, e.Reason}]++
				s.o.Metrics.action(ActionStored, e.Reason)
				r.rep.Counts[ActionStored]++
				s.log.Info("deadletter_stored", "run_id", r.rep.RunID, "source", string(k), "sequence", m.SequenceNumber,
					"message_id", m.MessageID, "order_id", e.OrderID, "reason", e.Reason, "entry_id", e.ID, "group", e.Group)
			}
			if err := s.b.Complete(ctx, src, m); err != nil {
				if errors.Is(err, broker.ErrLockLost) {
					r.rep.LockLost++
					s.log.Warn("dead-letter message lock expired before the drain completed it; it is stored, and the next run completes it",
						"run_id", r.rep.RunID, "source", string(k), "sequence", m.SequenceNumber, "message_id", m.MessageID)
					continue
				}
				held = append(held, batch[i+1:]...)
				return fmt.Errorf("deadletter: complete %s seq %d after storing it: %w", k, m.SequenceNumber, err)
			}
		}
	}
	return nil
}

// fail counts and reports one message or entry that could not be handled.
func (r *run) fail(it Item, err error) {
	it.Error = err.Error()
	r.rep.Failed++
	r.rep.Counts[ActionFailed]++
	r.rep.Items = append(r.rep.Items, it)
	r.s.log.Error("dead-letter item failed; the others go on", "run_id", r.rep.RunID, "source", string(it.Source),
		"sequence", it.SequenceNumber, "message_id", it.MessageID, "entry_id", it.EntryID, "action", string(it.Action), "error", it.Error)
}

// act applies the policy to entries not closed, oldest first, at the rate, within the budget.
func (r *run) act(ctx context.Context) error {
	s := r.s
	entries, err := s.store.List(ctx, dlstore.NotClosed())
	if err != nil {
		return fmt.Errorf("deadletter: list open entries: %w", err)
	}
	now := s.Now()
	for _, e := range entries {
		if r.overBudget() {
			return nil
		}
		d := s.DecideAt(e, now)
		if s.unsentCorrection(e, now) {
			// A replay without a body releases it (Sweeper.replay).
			d.Action = ActionReplay
		}
		if d.Action == ActionNone || d.Action == ActionWait {
			if d.Action == ActionWait {
				r.rep.Counts[ActionWait]++
			}
			continue
		}
		if err := Pace(ctx, &r.next, s.o.RatePerSecond); err != nil {
			return err
		}
		it, err := s.Apply(ctx, e.ID, d, nil, r.ro.Actor, now)
		if err != nil {
			if errors.Is(err, dlstore.ErrUnavailable) {
				return err
			}
			if errors.Is(err, errSkipped) || errors.Is(err, ErrNotActionable) {
				// Changed, claimed or closed by another actor since the list.
				continue
			}
			r.fail(it, err)
			continue
		}
		r.done(it)
	}
	return nil
}

func (r *run) done(it Item) {
	r.rep.Items = append(r.rep.Items, it)
	r.rep.Counts[it.Action]++
	if r.ro.Progress != nil {
		r.ro.Progress(it)
	}
}

// DecideAt is the policy's decision, except for a claimed replay: a live claim
// is left alone, a stale one finished, a stale corrected one released.
func (s *Sweeper) DecideAt(e dlstore.Entry, now time.Time) Decision {
	if e.State == dlstore.ReplayDue {
		if now.Sub(e.ClaimedAt) < s.o.ClaimTimeout {
			return Decision{ActionNone, fmt.Sprintf("a replay claimed by %s at %s is under way", e.ClaimedBy, e.ClaimedAt.UTC().Format(time.RFC3339))}
		}
		if c := dlstore.ParseClaim(e.ClaimedBy); c.Corrected {
			return Decision{ActionNone, fmt.Sprintf("a corrected replay claimed by %s at %s was never sent: release it to %s (the correction is not stored)",
				c.By, e.ClaimedAt.UTC().Format(time.RFC3339), c.From)}
		}
		return Decision{ActionReplay, fmt.Sprintf("a replay claimed by %s at %s was not recorded: finish it (same MessageId)", e.ClaimedBy, e.ClaimedAt.UTC().Format(time.RFC3339))}
	}
	return s.o.Policy.Decide(e, now)
}

// unsentCorrection reports whether e holds a stale claim of a corrected replay.
func (s *Sweeper) unsentCorrection(e dlstore.Entry, now time.Time) bool {
	return e.State == dlstore.ReplayDue && now.Sub(e.ClaimedAt) >= s.o.ClaimTimeout && dlstore.ParseClaim(e.ClaimedBy).Corrected
}

// purge removes one bounded batch of closed entries past the retention.
func (r *run) purge(ctx context.Context) {
	s := r.s
	if s.o.Retention < 0 || r.overBudget() {
		return
	}
	n, err := s.store.Purge(ctx, s.Now().Add(-s.o.Retention), s.o.PurgeBatch)
	if err != nil {
		s.log.Warn("dead-letter retention purge failed; the next run tries again", "run_id", r.rep.RunID, "error", err.Error())
		return
	}
	if n > 0 {
		r.rep.Purged = n
		r.rep.Counts[ActionPurge] += n
		s.o.Metrics.purged(n)
		s.log.Info("deadletter_purged", "run_id", r.rep.RunID, "entries", n, "retention", s.o.Retention.String(),
			"more_may_remain", n == s.o.PurgeBatch)
	}
}
