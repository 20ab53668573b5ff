package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/publish"
)

// Defaults of RelayOptions.
const (
	DefaultBatchSize  = 100
	DefaultInterval   = time.Second
	DefaultMaxBackoff = 30 * time.Second
	// DefaultRetention is the queue's message TTL: cancels need the records.
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultPurgeEvery = time.Hour
)

// RelayOptions tune a Relay. The zero value (or nil) gives the defaults.
type RelayOptions struct {
	// BatchSize is the most records a pass reads (default DefaultBatchSize).
	BatchSize int
	// Interval is Run's wait after a short pass (default DefaultInterval).
	Interval time.Duration
	// MaxBackoff caps Run's wait after failures (default DefaultMaxBackoff).
	MaxBackoff time.Duration
	// Retention is how long Sent records are kept (default DefaultRetention);
	// keep it above the duplicate detection window and the payment timeout.
	Retention time.Duration
	// PurgeEvery is how often Run purges (default DefaultPurgeEvery).
	PurgeEvery time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger gets failed passes, parked records and purges (nil: none).
	Logger *slog.Logger
	// Registerer gets the relay's metrics (the Metric* names); nil: none.
	Registerer prometheus.Registerer
}

// Relay sends a Store's pending records through a publish.Publisher and marks
// them sent. Relays may share a Store: duplicates are dropped.
type Relay struct {
	store Store
	pub   *publish.Publisher
	o     RelayOptions
	m     *relayMetrics
}

// NewRelay returns a relay from s through p.
func NewRelay(s Store, p *publish.Publisher, opts *RelayOptions) *Relay {
	var o RelayOptions
	if opts != nil {
		o = *opts
	}
	orDefault(&o.BatchSize, DefaultBatchSize)
	orDefault(&o.Interval, DefaultInterval)
	orDefault(&o.MaxBackoff, DefaultMaxBackoff)
	orDefault(&o.Retention, DefaultRetention)
	orDefault(&o.PurgeEvery, DefaultPurgeEvery)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{store: s, pub: p, o: o, m: newRelayMetrics(o.Registerer)}
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// PassResult counts what one pass did.
type PassResult struct {
	Read      int // pending records read
	Sent      int // status changes sent (duplicates within the pass counted once)
	Scheduled int // timeouts scheduled
	Cancelled int // cancel records done (cancelled, or nothing left to cancel)
	Parked    int // records Service Bus refused for good, marked Failed
	Waiting   int // cancels left pending: their schedule is not sent yet
}

// Pass reads up to BatchSize pending records and sends them (statuses,
// schedules, cancels), marking each once sent. One refused for good
// (publish.ErrRefused) is marked Failed; any other failure ends the pass.
func (r *Relay) Pass(ctx context.Context) (PassResult, error) {
	recs, err := r.store.Pending(ctx, r.o.BatchSize)
	res := PassResult{Read: len(recs)}
	if err != nil {
		err = fmt.Errorf("outbox: relay: pending: %w", err)
	} else {
		err = r.work(ctx, recs, &res)
	}
	r.m.pass(res, err, recs, r.o.Now())
	return res, err
}

func (r *Relay) work(ctx context.Context, recs []Record, res *PassResult) error {
	var statuses, schedules, cancels []Record
	for _, rec := range recs {
		switch rec.Kind {
		case KindStatus:
			statuses = append(statuses, rec)
		case KindSchedule:
			schedules = append(schedules, rec)
		case KindCancel:
			cancels = append(cancels, rec)
		default:
			if err := r.park(ctx, rec, fmt.Sprintf("unknown record kind %q", rec.Kind), res); err != nil {
				return err
			}
		}
	}
	if err := r.sendStatuses(ctx, statuses, res); err != nil {
		return err
	}
	for _, rec := range schedules {
		if err := r.schedule(ctx, rec, res); err != nil {
			return err
		}
	}
	for _, rec := range cancels {
		if err := r.cancel(ctx, rec, res); err != nil {
			return err
		}
	}
	return nil
}

// sendStatuses sends recs through Publisher.Statuses, in an order it keeps.
func (r *Relay) sendStatuses(ctx context.Context, recs []Record, res *PassResult) error {
	var (
		changes []contract.StatusChanged
		sent    []Record                // aligned with changes
		dups    = map[string][]Record{} // MessageId -> later records of the same message
		first   = map[string]bool{}
	)
	for _, rec := range recs {
		c, err := statusChange(rec)
		if err != nil {
			if err := r.park(ctx, rec, err.Error(), res); err != nil {
				return err
			}
			continue
		}
		if first[rec.Message.MessageID] {
			dups[rec.Message.MessageID] = append(dups[rec.Message.MessageID], rec)
			continue
		}
		first[rec.Message.MessageID] = true
		changes, sent = append(changes, c), append(sent, rec)
	}
	sortEachOrder(changes, sent)
	withDups := func(rs []Record) []Record {
		var out []Record
		for _, rec := range rs {
			out = append(out, rec)
			out = append(out, dups[rec.Message.MessageID]...)
		}
		return out
	}
	n, err := r.pub.Statuses(ctx, changes, nil)
	if merr := r.markSent(ctx, withDups(sent[:n])); merr != nil {
		return merr
	}
	res.Sent += n
	if err == nil {
		return nil
	}
	if !errors.Is(err, publish.ErrRefused) {
		return fmt.Errorf("outbox: relay: %w", err)
	}
	// A batch was refused for good: park only the refused messages.
	for i := n; i < len(changes); i++ {
		err := r.pub.Status(ctx, changes[i])
		switch {
		case err == nil:
			if err := r.markSent(ctx, withDups(sent[i:i+1])); err != nil {
				return err
			}
			res.Sent++
		case errors.Is(err, publish.ErrRefused):
			for _, rec := range withDups(sent[i : i+1]) {
				if err := r.park(ctx, rec, err.Error(), res); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("outbox: relay: %w", err)
		}
	}
	return nil
}

// sortEachOrder sorts each order's changes and records by sequence, within
// the order's places.
func sortEachOrder(changes []contract.StatusChanged, recs []Record) {
	slots := map[string][]int{}
	for i, c := range changes {
		slots[c.OrderID] = append(slots[c.OrderID], i)
	}
	cs, rs := slices.Clone(changes), slices.Clone(recs)
	for _, idx := range slots {
		byseq := slices.SortedStableFunc(slices.Values(idx), func(a, b int) int { return cmp.Compare(cs[a].Sequence, cs[b].Sequence) })
		for k, i := range idx {
			changes[i], recs[i] = cs[byseq[k]], rs[byseq[k]]
		}
	}
}

// markSent marks recs Sent, one Store.Mark per partition and MaxMarks.
func (r *Relay) markSent(ctx context.Context, recs []Record) error {
	now := r.o.Now().UTC()
	byPart := map[string][]Mark{}
	var parts []string
	for _, rec := range recs {
		if _, ok := byPart[rec.Partition]; !ok {
			parts = append(parts, rec.Partition)
		}
		byPart[rec.Partition] = append(byPart[rec.Partition], Mark{ID: rec.ID, State: Sent, DoneAt: now})
	}
	for _, p := range parts {
		for ms := range slices.Chunk(byPart[p], MaxMarks) {
			if err := r.store.Mark(ctx, p, ms); err != nil {
				return fmt.Errorf("outbox: relay: mark %d sent in %s: %w", len(ms), p, err)
			}
		}
	}
	return nil
}

// park marks rec Failed with why and counts it.
func (r *Relay) park(ctx context.Context, rec Record, why string, res *PassResult) error {
	why = truncate(why, 1024)
	r.o.Logger.Error("outbox record parked", slog.String("partition", rec.Partition), slog.String("record", rec.ID),
		slog.String("message_id", rec.Message.MessageID), slog.String("order_id", rec.OrderID), slog.String("reason", why))
	if err := r.store.Mark(ctx, rec.Partition, []Mark{{ID: rec.ID, State: Failed, DoneAt: r.o.Now().UTC(), Error: why}}); err != nil {
		return fmt.Errorf("outbox: relay: park %s/%s: %w", rec.Partition, rec.ID, err)
	}
	res.Parked++
	return nil
}

// schedule schedules rec's timeout for the time left and marks it if
// unchanged; a relay losing that race leaves its (dropped) copy.
func (r *Relay) schedule(ctx context.Context, rec Record, res *PassResult) error {
	left := max(rec.CommittedAt.Add(rec.After).Sub(r.o.Now()), time.Millisecond) // due already: as soon as possible
	var s publish.Scheduled
	c, err := timeoutCheck(rec)
	if err == nil {
		s, err = r.pub.ScheduleTimeoutFor(ctx, c.OrderID, c.CreatedSequence, left)
	}
	switch {
	case errors.Is(err, publish.ErrRefused), errors.Is(err, contract.ErrInvalid):
		return r.park(ctx, rec, err.Error(), res)
	case err != nil:
		return fmt.Errorf("outbox: relay: %w", err)
	}
	err = r.store.Mark(ctx, rec.Partition, []Mark{{ID: rec.ID, Version: rec.Version, State: Sent, DoneAt: r.o.Now().UTC(), SequenceNumber: s.SequenceNumber}})
	if errors.Is(err, ErrConflict) {
		r.o.Logger.Info("outbox timeout marked by another relay first", slog.String("partition", rec.Partition),
			slog.String("message_id", s.MessageID), slog.Int64("sequence_number", s.SequenceNumber))
		return nil
	}
	if err != nil {
		return fmt.Errorf("outbox: relay: mark %s/%s scheduled (seq %d): %w", rec.Partition, rec.ID, s.SequenceNumber, err)
	}
	res.Scheduled++
	return nil
}

// cancel cancels the timeouts of rec's order, or waits while one is unsent.
func (r *Relay) cancel(ctx context.Context, rec Record, res *PassResult) error {
	ts, err := r.store.Timeouts(ctx, rec.Partition, rec.OrderID)
	if err != nil {
		return fmt.Errorf("outbox: relay: cancel %s: %w", rec.OrderID, err)
	}
	if len(ts) == 0 {
		r.o.Logger.Warn("outbox cancel found no timeout", slog.String("partition", rec.Partition), slog.String("order_id", rec.OrderID))
	}
	if slices.ContainsFunc(ts, func(t Record) bool { return t.State == Pending }) {
		res.Waiting++
		return nil
	}
	for _, t := range ts {
		if t.State != Sent || t.SequenceNumber <= 0 {
			continue
		}
		if err := r.pub.CancelTimeout(ctx, t.SequenceNumber); err != nil && !errors.Is(err, publish.ErrNotScheduled) {
			return fmt.Errorf("outbox: relay: cancel %s (%s): %w", rec.OrderID, t.Message.MessageID, err)
		}
	}
	if err := r.markSent(ctx, []Record{rec}); err != nil {
		return err
	}
	res.Cancelled++
	return nil
}

// Purge deletes Sent records older than Retention and returns how many.
func (r *Relay) Purge(ctx context.Context) (int, error) {
	before := r.o.Now().Add(-r.o.Retention)
	total := 0
	for {
		n, err := r.store.Purge(ctx, before, r.o.BatchSize)
		total += n
		r.m.purged.Add(float64(n))
		if err != nil {
			return total, fmt.Errorf("outbox: relay: purge: %w", err)
		}
		if n < r.o.BatchSize {
			return total, nil
		}
	}
}

// Run runs passes until ctx ends, then returns nil: at once after a full
// batch, else after Interval, backing off up to MaxBackoff on failures
// (logged). It purges every PurgeEvery.
func (r *Relay) Run(ctx context.Context) error {
	wait := r.o.Interval
	nextPurge := r.o.Now()
	for {
		if !r.o.Now().Before(nextPurge) {
			if n, err := r.Purge(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				r.o.Logger.Warn("outbox purge failed", slog.Int("purged", n), slog.String("error", err.Error()))
			} else if n > 0 {
				r.o.Logger.Info("outbox purged", slog.Int("purged", n))
			}
			nextPurge = r.o.Now().Add(r.o.PurgeEvery)
		}
		res, err := r.Pass(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			r.o.Logger.Warn("outbox relay pass failed", slog.Int("sent", res.Sent), slog.String("error", err.Error()),
				slog.Duration("retry_in", wait))
		case res.Read >= r.o.BatchSize && res.Waiting < res.Read: // a full batch: more may be pending
			wait = r.o.Interval
			continue
		default:
			wait = r.o.Interval
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if err != nil {
			wait = min(2*wait, r.o.MaxBackoff)
		}
	}
}

// truncate cuts s to at most n bytes, dropping a character cut in two.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
