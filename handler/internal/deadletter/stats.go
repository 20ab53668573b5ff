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
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Stat is one source and reason's depth: store entries not closed plus messages in Service Bus.
type Stat struct {
	Source dlstore.Source `json:"source"`
	Reason string         `json:"reason"`
	Depth  int            `json:"depth"`
	// OldestAgeSeconds: since the oldest reached the store (or was enqueued).
	OldestAgeSeconds int64 `json:"oldest_age_seconds"`
	// InQueue of Depth are still in Service Bus.
	InQueue int `json:"in_queue"`
	// Left of Depth are left for a human.
	Left int `json:"left"`
	// Stored is how many this run drained into the store.
	Stored int `json:"stored"`
}

// stats measures every source after the run, logs the lines and sets the metrics.
func (r *run) stats(ctx context.Context) error {
	s := r.s
	now := s.Now()
	entries, err := s.store.List(ctx, dlstore.NotClosed())
	if err != nil {
		return fmt.Errorf("deadletter: list open entries for the stats: %w", err)
	}
	queued, _, err := s.PeekSources(ctx)
	if err != nil {
		return err
	}
	r.rep.Stats = Stats(entries, queued, now)
	for i, st := range r.rep.Stats {
		r.rep.Stats[i].Stored = r.stored[statKey{st.Source, st.Reason}]
	}
	for key, n := range r.stored {
		if !slices.ContainsFunc(r.rep.Stats, func(st Stat) bool { return st.Source == key.source && st.Reason == key.reason }) {
			r.rep.Stats = append(r.rep.Stats, Stat{Source: key.source, Reason: key.reason, Stored: n})
		}
	}
	r.rep.Stats = sortStats(r.rep.Stats)
	r.rep.StatsLines = s.emitStats(ctx, r.rep.RunID, r.rep.Stats)
	s.o.Metrics.stats(r.rep.Stats)
	return nil
}

// PeekSources peeks every source without settling; one that cannot be read is named and its error joined.
func (s *Sweeper) PeekSources(ctx context.Context) (map[dlstore.Source][]broker.Received, []string, error) {
	out := make(map[dlstore.Source][]broker.Received, len(dlstore.Sources))
	var bad []string
	var errs error
	for _, k := range dlstore.Sources {
		msgs, err := broker.PeekAll(ctx, s.b, s.o.Queues.Source(k))
		if err != nil {
			bad = append(bad, s.o.Queues.Source(k).String())
			errs = errors.Join(errs, fmt.Errorf("deadletter: %s: %w", k, err))
			continue
		}
		out[k] = msgs
	}
	return out, bad, errs
}

// Stats computes the Stats of entries not closed and of queued messages, sorted as sortStats.
func Stats(entries []dlstore.Entry, queued map[dlstore.Source][]broker.Received, now time.Time) []Stat {
	by := map[statKey]*Stat{}
	get := func(k dlstore.Source, reason string) *Stat {
		st := by[statKey{k, reason}]
		if st == nil {
			st = &Stat{Source: k, Reason: reason}
			by[statKey{k, reason}] = st
		}
		return st
	}
	age := func(t time.Time) int64 { return int64(max(now.Sub(t), 0) / time.Second) }
	for _, e := range entries {
		st := get(e.Source, e.Reason)
		st.Depth++
		if e.State == dlstore.Left {
			st.Left++
		}
		st.OldestAgeSeconds = max(st.OldestAgeSeconds, age(e.StoredAt))
	}
	for k, msgs := range queued {
		for _, m := range msgs {
			st := get(k, m.DeadLetterReason)
			st.Depth++
			st.InQueue++
			st.OldestAgeSeconds = max(st.OldestAgeSeconds, age(m.EnqueuedTime))
		}
	}
	out := make([]Stat, 0, len(by))
	for _, st := range by {
		out = append(out, *st)
	}
	return sortStats(out)
}

// sortStats orders stats by source (dlstore.Sources order) then reason, adding empty sources.
func sortStats(in []Stat) []Stat {
	var out []Stat
	for _, k := range dlstore.Sources {
		start := len(out)
		for _, st := range in {
			if st.Source == k && (st.Reason != "" || st.Depth > 0 || st.Stored > 0) {
				out = append(out, st)
			}
		}
		if len(out) == start {
			out = append(out, Stat{Source: k})
			continue
		}
		slices.SortFunc(out[start:], func(a, b Stat) int { return cmp.Compare(a.Reason, b.Reason) })
	}
	return out
}

// StatsMessage is the msg of the stats line the alerts query.
const StatsMessage = "deadletter_stats"

// emitStats logs a deadletter_stats record per stat and returns them as JSON lines.
func (s *Sweeper) emitStats(ctx context.Context, runID string, stats []Stat) []string {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, nil)
	lines := make([]string, 0, len(stats))
	for _, st := range stats {
		rec := slog.NewRecord(time.Now(), slog.LevelInfo, StatsMessage, 0)
		rec.AddAttrs(slog.String("run_id", runID), slog.String("source", string(st.Source)), slog.String("reason", st.Reason),
			slog.Int("depth", st.Depth), slog.Int64("oldest_age_seconds", st.OldestAgeSeconds),
			slog.Int("in_queue", st.InQueue), slog.Int("left", st.Left), slog.Int("stored", st.Stored))
		if s.log.Handler().Enabled(ctx, slog.LevelInfo) {
			_ = s.log.Handler().Handle(ctx, rec)
		}
		buf.Reset()
		_ = h.Handle(ctx, rec)
		lines = append(lines, strings.TrimSuffix(buf.String(), "\n"))
	}
	return lines
}

func ItemOf(e dlstore.Entry, a Action, why string) Item {
	return Item{EntryID: e.ID, Source: e.Source, SequenceNumber: e.SequenceNumber, MessageID: e.MessageID, OrderID: e.OrderID,
		Reason: e.Reason, State: string(e.State), StoredAt: e.StoredAt, Action: a, Why: why}
}
