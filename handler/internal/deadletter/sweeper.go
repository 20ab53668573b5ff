package deadletter

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// Broker is the part of the broker port the sweeper uses.
type Broker interface {
	Send(ctx context.Context, queue string, msg broker.Message) error
	Receive(ctx context.Context, src broker.Source, max int, wait time.Duration) ([]broker.Received, error)
	Peek(ctx context.Context, src broker.Source, max int, from int64) ([]broker.Received, error)
	Complete(ctx context.Context, src broker.Source, m broker.Received) error
	Abandon(ctx context.Context, src broker.Source, m broker.Received) error
	Defer(ctx context.Context, src broker.Source, m broker.Received) error
	ReceiveDeferred(ctx context.Context, src broker.Source, sequenceNumbers []int64) ([]broker.Received, error)
}

var _ Broker = broker.Broker(nil)

// BrokerClock is implemented by a broker whose clock is not the caller's
// (the development host's loopback broker runs a scaled clock). The
// sweeper then measures ages and the cool-down on it, so both are on the
// clock that stamped EnqueuedTime.
type BrokerClock interface {
	Now(ctx context.Context) (time.Time, error)
}

// Defaults of the bounds (app settings DEAD_LETTER_SWEEP_MAX,
// DEAD_LETTER_SWEEP_RATE) and of the policy.
const (
	DefaultMaxPerRun  = 100
	DefaultRate       = 10.0
	DefaultCooldown   = 10 * time.Minute
	DefaultMaxReplays = 3
	// DefaultBudget keeps a run well inside host.json's 5 min
	// functionTimeout.
	DefaultBudget = 2 * time.Minute
)

// Options configure a Sweeper.
type Options struct {
	Queues Queues
	Policy Policy
	// MaxPerRun bounds the messages acted on per run (replayed, archived,
	// set aside); RatePerSecond the actions per second.
	MaxPerRun     int
	RatePerSecond float64
	// Budget is how long a run may act; it stops cleanly after.
	Budget time.Duration
	// ReceiveWait is how long a receive waits for the messages a peek
	// showed (default 1 s).
	ReceiveWait time.Duration
	Metrics     *Metrics
	Logger      *slog.Logger
	// Now is the clock when the broker has none (default time.Now).
	Now func() time.Time
}

// Sweeper applies the policy to the three sources. Safe for concurrent
// use; runs do not coordinate (each takes what it receives).
type Sweeper struct {
	b       Broker
	records Records
	o       Options
	log     *slog.Logger
}

// New returns a sweeper over b, keeping records in r.
func New(b Broker, r Records, o Options) *Sweeper {
	if o.MaxPerRun <= 0 {
		o.MaxPerRun = DefaultMaxPerRun
	}
	if o.RatePerSecond <= 0 {
		o.RatePerSecond = DefaultRate
	}
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
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
	return &Sweeper{b: b, records: r, o: o, log: o.Logger}
}

// Queues returns the queues the sweeper works on.
func (s *Sweeper) Queues() Queues { return s.o.Queues }

// Policy returns the sweeper's policy.
func (s *Sweeper) Policy() Policy { return s.o.Policy }

// now is the broker's time if it has a clock of its own, else the local.
func (s *Sweeper) now(ctx context.Context) (time.Time, error) {
	if c, ok := s.b.(BrokerClock); ok {
		t, err := c.Now(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("deadletter: broker clock: %w", err)
		}
		return t, nil
	}
	return s.o.Now(), nil
}

// Stat is the depth and oldest age of one source and reason.
type Stat struct {
	Source           Kind   `json:"source"`
	Reason           string `json:"reason"`
	Depth            int    `json:"depth"`
	OldestAgeSeconds int64  `json:"oldest_age_seconds"`
}

// Item is one message a run looked at.
type Item struct {
	Source         Kind   `json:"source"`
	SequenceNumber int64  `json:"sequence_number"`
	MessageID      string `json:"message_id"`
	SessionID      string `json:"session_id"`
	Reason         string `json:"reason"`
	Action         Action `json:"action"`
	Why            string `json:"why"`
	NewMessageID   string `json:"new_message_id,omitempty"`
	// Done: the action was carried out (false in a dry run).
	Done bool `json:"done"`
}

// Report is what a run found and did.
type Report struct {
	RunID  string         `json:"run_id"`
	DryRun bool           `json:"dry_run,omitempty"`
	Stats  []Stat         `json:"stats"`
	Items  []Item         `json:"items"`
	Counts map[Action]int `json:"counts"`
	// Stopped says why a run ended before it ran out of messages: the
	// per-run maximum or the time budget.
	Stopped string `json:"stopped,omitempty"`
	// LockLost counts messages whose lock expired before the run settled
	// them: each is back on its queue as it was, and a later run takes it
	// again (a replay already sent is sent again under the same MessageId,
	// which duplicate detection drops; an archive row is written once).
	LockLost int `json:"lock_lost,omitempty"`
	// StatsLines are the deadletter_stats JSON lines, as logged.
	StatsLines []string `json:"-"`
}

// RunOptions tune one run.
type RunOptions struct {
	// DryRun peeks only: it reports what the policy would do and changes
	// nothing (no receive, no table write).
	DryRun bool
	// Actor names who acts in audit rows: "sweeper" or "cli:<user>".
	Actor string
	// Progress, if set, is called after each action.
	Progress func(Item)
}

// ActorSweeper is the Actor of the timer function.
const ActorSweeper = "sweeper"

// Run sweeps once: it peeks every source, logs one deadletter_stats line
// per source and reason (one with reason "" and depth 0 for an empty
// source), sets the metrics, then applies the policy within the bounds.
// It returns the report and, if a call failed, an error wrapping
// ErrUnavailable or a broker sentinel; whatever it had started is then
// left as it was (a message it could not finish is set aside again).
func (s *Sweeper) Run(ctx context.Context, ro RunOptions) (Report, error) {
	if ro.Actor == "" {
		ro.Actor = ActorSweeper
	}
	rep := Report{RunID: hostproto.NewGUID(), DryRun: ro.DryRun, Counts: map[Action]int{}, Items: []Item{}}
	now, err := s.now(ctx)
	if err != nil {
		return rep, err
	}
	peeked := make(map[Kind][]broker.Received, len(Kinds))
	for _, k := range Kinds {
		msgs, err := broker.PeekAll(ctx, s.b, s.o.Queues.Source(k))
		if err != nil {
			return rep, fmt.Errorf("deadletter: %s: %w", k, err)
		}
		peeked[k] = msgs
	}
	rep.Stats = Stats(peeked, now)
	rep.StatsLines = s.emitStats(ctx, rep.RunID, rep.Stats)
	s.o.Metrics.stats(rep.Stats)

	if ro.DryRun {
		for _, k := range Kinds {
			seen := map[int64]Seen{}
			if k == DLQ && len(peeked[k]) > 0 {
				if seen, err = s.records.SeenAll(ctx, k); err != nil {
					return rep, err
				}
			}
			for _, m := range peeked[k] {
				if r, ok := seen[m.SequenceNumber]; k == DLQ && (!ok || r.MessageID != m.MessageID) {
					// A real run would record it as seen now first.
					seen[m.SequenceNumber] = Seen{MessageID: m.MessageID, At: now}
				}
				d := s.decide(k, m, seen, now)
				if m.Deferred && (d.Action == ActionLeave || d.Action == ActionWait) {
					d.Why = "set aside (deferred): " + d.Why
				}
				rep.Items = append(rep.Items, item(k, m, d))
				rep.Counts[d.Action]++
			}
		}
		return rep, nil
	}

	r := &run{s: s, ro: ro, rep: &rep, deadline: time.Now().Add(s.o.Budget)}
	for _, k := range []Kind{DLQ, Poison} {
		if err := r.source(ctx, k, peeked[k]); err != nil {
			return rep, err
		}
		if rep.Stopped != "" {
			break
		}
	}
	// poison-dlq: counted and reported above, never touched.
	for _, m := range peeked[PoisonDLQ] {
		rep.Items = append(rep.Items, item(PoisonDLQ, m, s.o.Policy.Decide(PoisonDLQ, m, time.Time{}, now)))
		rep.Counts[ActionUntouched]++
	}
	return rep, nil
}

func (s *Sweeper) decide(k Kind, m broker.Received, seen map[int64]Seen, now time.Time) Decision {
	var at time.Time
	if r, ok := seen[m.SequenceNumber]; ok && r.MessageID == m.MessageID {
		at = r.At
	}
	return s.o.Policy.Decide(k, m, at, now)
}

func item(k Kind, m broker.Received, d Decision) Item {
	return Item{Source: k, SequenceNumber: m.SequenceNumber, MessageID: m.MessageID, SessionID: sessionOf(m),
		Reason: m.DeadLetterReason, Action: d.Action, Why: d.Why}
}

// Stats computes depth and oldest age per source and reason, sorted;
// a source without messages gets one entry with reason "" and depth 0.
func Stats(peeked map[Kind][]broker.Received, now time.Time) []Stat {
	var out []Stat
	for _, k := range Kinds {
		by := map[string]*Stat{}
		for _, m := range peeked[k] {
			st := by[m.DeadLetterReason]
			if st == nil {
				st = &Stat{Source: k, Reason: m.DeadLetterReason}
				by[m.DeadLetterReason] = st
			}
			st.Depth++
			age := int64(max(now.Sub(m.EnqueuedTime), 0) / time.Second)
			st.OldestAgeSeconds = max(st.OldestAgeSeconds, age)
		}
		if len(by) == 0 {
			out = append(out, Stat{Source: k})
			continue
		}
		start := len(out)
		for _, st := range by {
			out = append(out, *st)
		}
		slices.SortFunc(out[start:], func(a, b Stat) int { return cmp.Compare(a.Reason, b.Reason) })
	}
	return out
}

// StatsMessage is the msg of the stats line the alerts query.
const StatsMessage = "deadletter_stats"

// emitStats logs one deadletter_stats record per stat through the
// injected logger (stdout) and returns the same records rendered as JSON
// lines, for the invocation answer's Logs.
func (s *Sweeper) emitStats(ctx context.Context, runID string, stats []Stat) []string {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, nil)
	lines := make([]string, 0, len(stats))
	for _, st := range stats {
		rec := slog.NewRecord(time.Now(), slog.LevelInfo, StatsMessage, 0)
		rec.AddAttrs(slog.String("run_id", runID), slog.String("source", string(st.Source)), slog.String("reason", st.Reason),
			slog.Int("depth", st.Depth), slog.Int64("oldest_age_seconds", st.OldestAgeSeconds))
		if s.log.Handler().Enabled(ctx, slog.LevelInfo) {
			_ = s.log.Handler().Handle(ctx, rec)
		}
		buf.Reset()
		_ = h.Handle(ctx, rec)
		lines = append(lines, strings.TrimSuffix(buf.String(), "\n"))
	}
	return lines
}

// run is the state of one acting run.
type run struct {
	s        *Sweeper
	ro       RunOptions
	rep      *Report
	deadline time.Time
	acted    int
	next     time.Time // rate limit: the earliest next action
}

// stop reports whether the bounds end the run, and records why.
func (r *run) stop() bool {
	switch {
	case r.rep.Stopped != "":
		return true
	case r.acted >= r.s.o.MaxPerRun:
		r.rep.Stopped = fmt.Sprintf("reached DEAD_LETTER_SWEEP_MAX (%d messages)", r.s.o.MaxPerRun)
	case !time.Now().Before(r.deadline):
		r.rep.Stopped = fmt.Sprintf("used its time budget (%s)", r.s.o.Budget)
	default:
		return false
	}
	return true
}

// pace waits for the next slot of the rate limit.
func (r *run) pace(ctx context.Context) error {
	now := time.Now()
	if wait := r.next.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now = r.next
	}
	r.next = now.Add(time.Duration(float64(time.Second) / r.s.o.RatePerSecond))
	return nil
}

// source works one source: first the deferred messages whose time has
// come (a cool-down that ended, an archive that failed before), then the
// rest from the head of the queue, setting aside what is to be left.
func (r *run) source(ctx context.Context, k Kind, peeked []broker.Received) error {
	s := r.s
	src := s.o.Queues.Source(k)
	seen := map[int64]Seen{}
	if len(peeked) == 0 {
		return nil
	}
	var err error
	now, err := s.now(ctx)
	if err != nil {
		return err
	}
	if k == DLQ {
		if seen, err = s.records.SeenAll(ctx, k); err != nil {
			return err
		}
		// Start the cool-down of every message on sight, whatever the
		// bounds let this run act on.
		for _, m := range peeked {
			if sr, ok := seen[m.SequenceNumber]; (ok && sr.MessageID == m.MessageID) || time.Now().After(r.deadline) {
				continue
			}
			at, err := s.records.MarkSeen(ctx, k, m, now, r.ro.Actor)
			if err != nil {
				return err
			}
			seen[m.SequenceNumber] = Seen{MessageID: m.MessageID, At: at}
			s.o.Metrics.action(ActionSeen, m.DeadLetterReason)
		}
	}
	waiting := 0
	for _, m := range peeked {
		if m.Deferred {
			waiting++
		}
	}
	for _, m := range peeked {
		if !m.Deferred || r.stop() {
			continue
		}
		if d := s.decide(k, m, seen, now); d.Action != ActionReplay && d.Action != ActionArchive {
			continue
		}
		got, err := s.b.ReceiveDeferred(ctx, src, []int64{m.SequenceNumber})
		if errors.Is(err, broker.ErrNotFound) || errors.Is(err, broker.ErrLockLost) {
			continue // settled or taken by someone else meanwhile
		}
		if err != nil {
			return fmt.Errorf("deadletter: receive deferred %s seq %d: %w", k, m.SequenceNumber, err)
		}
		if err := r.act(ctx, k, got[0], seen, now); err != nil {
			return err
		}
	}
	if len(peeked) == waiting {
		return nil // nothing receivable was there at the peek
	}
	handled := map[int64]bool{}
	for !r.stop() {
		n := min(s.o.MaxPerRun-r.acted, 20)
		batch, err := s.b.Receive(ctx, src, n, s.o.ReceiveWait)
		if err != nil {
			return fmt.Errorf("deadletter: receive %s: %w", k, err)
		}
		if len(batch) == 0 {
			return nil
		}
		for i, m := range batch {
			if handled[m.SequenceNumber] || r.stop() {
				// Wrap-around: a message this run handled came back (its
				// lock expired, or its deferral failed), so everything
				// left in this source was seen already; or the bounds
				// ended the run. Give back the rest of the batch
				// untouched; a wrap-around ends this source only.
				for _, rest := range batch[i:] {
					_ = s.b.Abandon(ctx, src, rest)
				}
				return nil
			}
			handled[m.SequenceNumber] = true
			if err := r.act(ctx, k, m, seen, now); err != nil {
				for _, rest := range batch[i+1:] {
					_ = s.b.Abandon(ctx, src, rest)
				}
				return err
			}
		}
	}
	return nil
}

// act carries out the policy on a received (locked) message. On failure
// it sets the message aside again, so it waits for the next run without
// a raised delivery count.
func (r *run) act(ctx context.Context, k Kind, m broker.Received, seen map[int64]Seen, now time.Time) error {
	s := r.s
	src := s.o.Queues.Source(k)
	if k == DLQ {
		if sr, ok := seen[m.SequenceNumber]; !ok || sr.MessageID != m.MessageID {
			at, err := s.records.MarkSeen(ctx, k, m, now, r.ro.Actor)
			if err != nil {
				_ = s.b.Defer(ctx, src, m)
				return err
			}
			seen[m.SequenceNumber] = Seen{MessageID: m.MessageID, At: at}
			if at.Equal(now) {
				s.o.Metrics.action(ActionSeen, m.DeadLetterReason)
			}
		}
	}
	d := s.decide(k, m, seen, now)
	it := item(k, m, d)
	giveBack := func(err error) error {
		if derr := s.b.Defer(context.WithoutCancel(ctx), src, m); derr != nil {
			s.log.Warn("could not set a dead-letter message aside after a failure; its lock will expire",
				"source", string(k), "sequence", m.SequenceNumber, "error", derr.Error())
		}
		return err
	}
	if err := r.pace(ctx); err != nil {
		return giveBack(err)
	}
	r.acted++
	// audit records the action once it has taken effect, and before the
	// dead-letter copy is completed: a crash can then repeat an action
	// (sent again under the same MessageId, which duplicate detection
	// drops; archived once) but never leave one without its row.
	audit := func() error {
		return s.records.Audit(ctx, AuditRow{At: now, Action: d.Action, Source: k, Reason: m.DeadLetterReason,
			MessageID: m.MessageID, SessionID: sessionOf(m), SequenceNumber: m.SequenceNumber,
			NewMessageID: it.NewMessageID, Actor: r.ro.Actor, Detail: d.Why})
	}
	switch d.Action {
	case ActionReplay:
		msg := ReplayMessage(m, nil)
		if err := s.b.Send(ctx, s.o.Queues.Queue, msg); err != nil {
			return giveBack(fmt.Errorf("deadletter: replay %s seq %d as %s: %w", k, m.SequenceNumber, msg.MessageID, err))
		}
		it.NewMessageID = msg.MessageID
		if err := audit(); err != nil {
			// Sent: the next run sends it again under the same MessageId.
			return giveBack(err)
		}
		if err := s.b.Complete(ctx, src, m); err != nil {
			// Sent but not completed: the next run replays it again under
			// the same MessageId, which duplicate detection drops.
			if !r.lockLost(k, m, "complete the replayed copy", err) {
				return fmt.Errorf("deadletter: complete replayed %s seq %d: %w", k, m.SequenceNumber, err)
			}
			it.Why += "; its lock expired before it was completed: the next run replays it again under the same MessageId, which duplicate detection drops"
		}
	case ActionArchive:
		if err := s.records.Archive(ctx, k, m, now, r.ro.Actor, ActionArchive); err != nil {
			return giveBack(err)
		}
		if err := audit(); err != nil {
			return giveBack(err)
		}
		if err := s.b.Complete(ctx, src, m); err != nil {
			if !r.lockLost(k, m, "complete the archived message", err) {
				return fmt.Errorf("deadletter: complete archived %s seq %d: %w", k, m.SequenceNumber, err)
			}
			it.Why += "; its lock expired before it was completed: the next run completes it (its archive row is kept, once)"
		}
	default: // wait, left: set aside, keeping the delivery count
		if err := s.b.Defer(ctx, src, m); err != nil {
			if r.lockLost(k, m, "set it aside", err) {
				return nil // back on its queue, untouched; a later run sets it aside
			}
			return fmt.Errorf("deadletter: set aside %s seq %d: %w", k, m.SequenceNumber, err)
		}
		if d.Action != ActionWait {
			if err := audit(); err != nil {
				return err
			}
		}
	}
	it.Done = true
	s.o.Metrics.action(d.Action, m.DeadLetterReason)
	s.log.Info("deadletter_action", "run_id", r.rep.RunID, "source", string(k), "sequence", m.SequenceNumber,
		"message_id", m.MessageID, "reason", m.DeadLetterReason, "action", string(d.Action), "new_message_id", it.NewMessageID, "why", d.Why)
	r.rep.Items = append(r.rep.Items, it)
	r.rep.Counts[d.Action]++
	if r.ro.Progress != nil {
		r.ro.Progress(it)
	}
	return nil
}

// lockLost reports whether err is a lost lock (the message is back on its
// queue, and the run goes on), and if so counts and logs it. Slow storage
// or a short lock duration makes this normal, not a failure of the run.
func (r *run) lockLost(k Kind, m broker.Received, step string, err error) bool {
	if !errors.Is(err, broker.ErrLockLost) {
		return false
	}
	r.rep.LockLost++
	r.s.log.Warn("dead-letter message lock expired before the sweeper could "+step+"; a later run takes it again",
		"run_id", r.rep.RunID, "source", string(k), "sequence", m.SequenceNumber, "message_id", m.MessageID, "error", err.Error())
	return true
}

// Peek returns the messages of the given sources and the time on the
// broker's clock, changing nothing.
func (s *Sweeper) Peek(ctx context.Context, kinds ...Kind) (map[Kind][]broker.Received, time.Time, error) {
	now, err := s.now(ctx)
	if err != nil {
		return nil, now, err
	}
	out := make(map[Kind][]broker.Received, len(kinds))
	for _, k := range kinds {
		msgs, err := broker.PeekAll(ctx, s.b, s.o.Queues.Source(k))
		if err != nil {
			return nil, now, fmt.Errorf("deadletter: %s: %w", k, err)
		}
		out[k] = msgs
	}
	return out, now, nil
}
