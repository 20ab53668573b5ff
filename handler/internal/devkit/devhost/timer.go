package devhost

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/funcapp"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/ncrontab"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// timerDispatcher runs a timerTrigger function on its schedule, on the host's
// clock, one invocation at a time (the host's singleton lock).
type timerDispatcher struct {
	h       *Host
	g       *group // the instances that run fn
	fn      string
	binding funcapp.Binding
	sched   *ncrontab.Schedule

	mu          sync.Mutex // one invocation at a time; guards the status
	last        time.Time  // when it last ran
	lastUpdated time.Time  // when the status was last written
}

// run runs the schedule until scheduleCtx ends; invocations run on
// callCtx, so one that started finishes.
func (d *timerDispatcher) run(scheduleCtx, callCtx context.Context) {
	if d.binding.RunOnStartup {
		_ = d.fire(callCtx, false)
	}
	for {
		now := d.h.clock.Now()
		next := d.sched.Next(now.UTC())
		if next.IsZero() {
			d.h.log.Warn("timer schedule never fires", slog.String("function", d.fn), slog.String("schedule", d.sched.String()))
			return
		}
		if clock.Sleep(scheduleCtx, d.h.clock, next.Sub(now)) != nil || scheduleCtx.Err() != nil {
			return // stopped, perhaps while the timer fired
		}
		_ = d.fire(callCtx, false)
	}
}

// fire invokes the function once, now, with the schedule status when the
// binding uses the monitor and the function ran before (else null).
func (d *timerDispatcher) fire(ctx context.Context, pastDue bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.h.stats.callStarted()
	defer d.h.stats.callDone()
	now := d.h.clock.Now().UTC()
	info := hostproto.TimerInfo{AdjustForDST: true, IsPastDue: pastDue}
	if d.binding.Monitor() && !d.last.IsZero() {
		info.Last, info.Next, info.LastUpdated = d.last, d.sched.Next(now), d.lastUpdated
	}
	body, err := hostenc.EncodeTimer(info, d.binding.Name, d.fn, now)
	if err != nil {
		return fmt.Errorf("devhost: timer %s: %w", d.fn, err)
	}
	// The singleton lock: the oldest running instance of its group runs it.
	in := d.h.pool.first(d.g)
	if in == nil {
		return fmt.Errorf("devhost: timer %s: no instance is running", d.fn)
	}
	in.counts.bump(&in.counts.timerRuns)
	start := time.Now()
	a, err := in.inv.invoke(ctx, d.fn, body)
	d.last, d.lastUpdated = now, d.h.clock.Now().UTC()
	log := d.h.log.With(slog.String("function", d.fn), slog.String("instance", in.id), slog.Duration("duration", time.Since(start)))
	switch {
	case err != nil:
		log.Warn("timer invocation failed", slog.Any("error", err))
		return fmt.Errorf("devhost: timer %s: %w", d.fn, err)
	case !a.OK():
		log.Warn("timer invocation failed", slog.Int("status", a.Status), slog.Any("logs", a.Logs))
		return fmt.Errorf("devhost: timer %s: status %d", d.fn, a.Status)
	}
	log.Info("timer function ran", slog.Any("logs", a.Logs))
	return nil
}
