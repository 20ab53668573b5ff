package devhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/child"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/logging"
)

// MaxInstances bounds the running instances of one group (and Options.Instances).
const MaxInstances = 16

// Instance states (InstanceSummary.State).
const (
	InstanceRunning = "running"
	InstanceRemoved = "removed" // scaled in gracefully (SIGTERM)
	InstanceKilled  = "killed"  // lost without warning (SIGKILL)
)

// Errors of the scale operations.
var (
	// ErrLastInstance: a group's only running instance cannot be removed or killed.
	ErrLastInstance = errors.New("devhost: the last running instance of a group cannot be removed")
	// ErrNoInstance: no running instance has that id.
	ErrNoInstance = errors.New("devhost: no such running instance")
	// ErrTooManyInstances: MaxInstances run already.
	ErrTooManyInstances = fmt.Errorf("devhost: at most %d instances of a group run at once", MaxInstances)
)

// instance is one instance of the app as Flex Consumption runs it: its
// group's functions, its own session slots and its own handler process.
type instance struct {
	g    *group
	n    int    // 1-based within its group, in start order; never reused
	id   string // <group key>-<n>, such as OrderStatus-1 or http-1
	proc *child.Process
	inv  *invoker
	// acceptCtx ends when the instance stops taking work; callCtx cuts its calls.
	acceptCtx, callCtx    context.Context
	stopAccept, stopCalls context.CancelFunc
	workers               sync.WaitGroup // its Service Bus dispatchers
	state                 atomic.Value   // string: one of the Instance* states
	retired               atomic.Bool    // removed, killed or closed: its exit is no failure
	counts                instanceCounts
}

func (in *instance) killed() bool      { return in.state.Load() == InstanceKilled }
func (in *instance) stateName() string { return in.state.Load().(string) }

// instanceCounts is what one instance did, as the host and its handler's log saw it.
type instanceCounts struct {
	mu          sync.Mutex
	invocations int // Service Bus trigger calls
	timerRuns   int // timer function calls
	results     map[string]int
	roundTrips  int
	conflicts   int
	cacheHits   int
}

// bump adds one to the count n points at, under the lock.
func (c *instanceCounts) bump(n *int) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

func (c *instanceCounts) result(r string) {
	c.mu.Lock()
	c.results[r]++
	c.mu.Unlock()
}

// InstanceSummary is what one instance did during the run.
type InstanceSummary struct {
	ID string `json:"id"`
	// Group is http, or function:<NAME> (see group.go).
	Group         string         `json:"group"`
	State         string         `json:"state"`
	Invocations   int            `json:"invocations"`
	TimerRuns     int            `json:"timerRuns"`
	Results       map[string]int `json:"results"`
	RoundTrips    int            `json:"roundTrips"`
	ETagConflicts int            `json:"etagConflicts"`
	CacheHits     int            `json:"cacheHits"`
	// HandlerStarts counts the instance's handler processes, restarts included.
	HandlerStarts int `json:"handlerStarts"`
}

// logTap passes a handler's output on and counts its settled lines' work.
type logTap struct {
	w       io.Writer
	c       *instanceCounts
	mu      sync.Mutex
	pending []byte
}

func (t *logTap) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, p...)
	for {
		i := bytes.IndexByte(t.pending, '\n')
		if i < 0 {
			break
		}
		t.line(t.pending[:i])
		t.pending = t.pending[i+1:]
	}
	if len(t.pending) > 1<<20 { // not a log line: drop it
		t.pending = nil
	}
	return n, err
}

func (t *logTap) line(l []byte) {
	if !bytes.Contains(l, []byte(`"round_trips"`)) {
		return
	}
	rec, ok := parseSettled(l)
	if !ok {
		return
	}
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.c.roundTrips += rec.roundTrips
	t.c.conflicts += rec.conflicts
	if rec.cacheHit {
		t.c.cacheHits++
	}
}

// pool is the app's instances. Its methods are safe for concurrent use.
type pool struct {
	mu      sync.Mutex
	all     []*instance          // every instance started, in start order
	rr      int                  // round-robin position of the front
	holders map[string]*instance // session id -> the instance holding it
	fail    chan struct{}        // closed when a running instance's handler failed for good
	failErr error
	// orphans are killed instances' session locks, until they run out.
	orphans []orphan
}

// orphan is a session lock a killed instance left behind.
type orphan struct {
	queue    string
	until    time.Time
	messages int
}

func (p *pool) orphaned(o orphan) {
	p.mu.Lock()
	p.orphans = append(p.orphans, o)
	p.mu.Unlock()
}

// orphansOf returns queue's live orphans, their messages and the first end.
func (p *pool) orphansOf(queue string, now time.Time) (sessions, messages int, first time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.orphans[:0]
	for _, o := range p.orphans {
		if !now.Before(o.until) {
			continue
		}
		kept = append(kept, o)
		if o.queue != queue {
			continue
		}
		sessions++
		messages += o.messages
		if first.IsZero() || o.until.Before(first) {
			first = o.until
		}
	}
	p.orphans = kept
	return sessions, messages, first
}

func newPool() *pool {
	return &pool{holders: map[string]*instance{}, fail: make(chan struct{})}
}

// runningIn returns g's running instances (all for nil) in start order.
func (p *pool) runningIn(g *group) []*instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(p.all), func(in *instance) bool {
		return in.stateName() != InstanceRunning || (g != nil && in.g != g)
	})
}

// first is g's oldest running instance, which runs g's timers; nil if none.
func (p *pool) first(g *group) *instance {
	if r := p.runningIn(g); len(r) > 0 {
		return r[0]
	}
	return nil
}

// groupReadier spreads callers over one group's running instances, round robin.
type groupReadier struct {
	p *pool
	g *group
}

// Ready returns the chosen instance's handler base URL once it answers.
func (r groupReadier) Ready(ctx context.Context) (string, error) {
	running := r.p.runningIn(r.g)
	if len(running) == 0 {
		return "", errors.New("devhost: no instance is running")
	}
	r.p.mu.Lock()
	in := running[r.p.rr%len(running)]
	r.p.rr++
	r.p.mu.Unlock()
	return in.proc.Ready(ctx)
}

var _ readier = groupReadier{}

// hold records that in holds session id; release forgets it.
func (p *pool) hold(id string, in *instance) {
	p.mu.Lock()
	p.holders[id] = in
	p.mu.Unlock()
}

func (p *pool) release(id string, in *instance) {
	p.mu.Lock()
	if p.holders[id] == in {
		delete(p.holders, id)
	}
	p.mu.Unlock()
}

func (p *pool) holder(id string) *instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holders[id]
}

// failed records that a running instance's handler is no longer supervised.
func (p *pool) failed(in *instance, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failErr == nil {
		p.failErr = fmt.Errorf("%s: %w", in.id, err)
		close(p.fail)
	}
}

// startInstance starts an instance of g: its handler and g's Service Bus dispatchers.
func (h *Host) startInstance(ctx context.Context, g *group) (*instance, error) {
	h.pool.mu.Lock()
	g.started++
	n := g.started // reserved, so that instances started at once get distinct ids
	h.pool.mu.Unlock()
	in := &instance{g: g, n: n, id: g.instanceID(n), counts: instanceCounts{results: map[string]int{}}}
	in.state.Store(InstanceRunning)
	env := append(slices.Clone(h.handlerEnv), logging.EnvContainerName+"="+in.id)
	var err error
	in.proc, err = child.Start(ctx, child.Options{
		Path:   h.handlerPath,
		Args:   h.app.Host.Arguments,
		Dir:    h.app.Host.WorkingDirectory,
		Env:    env,
		Stdout: &logTap{w: h.opts.Stdout, c: &in.counts},
		Stderr: &logTap{w: h.opts.Stderr, c: &in.counts},
		Logger: h.log.With(slog.String("instance", in.id)),
	})
	if err != nil {
		return nil, fmt.Errorf("devhost: start the handler of %s: %w", in.id, err)
	}
	in.inv = newInvoker(in.proc, h.app.Host.FunctionTimeout, h.log)
	in.acceptCtx, in.stopAccept = context.WithCancel(h.acceptCtx)
	in.callCtx, in.stopCalls = context.WithCancel(h.callCtx)
	h.pool.mu.Lock()
	h.pool.all = append(h.pool.all, in)
	h.pool.mu.Unlock()
	go func() {
		<-in.proc.Done()
		if !in.retired.Load() {
			h.pool.failed(in, in.proc.Err())
		}
	}()
	for _, d := range g.sessions {
		d.start(in)
	}
	return in, nil
}

// resolve reads a scale target: a group key or "" (id ""), a number or an id.
func (h *Host) resolve(target string) (*group, string, error) {
	if g := h.group(target); g != nil {
		return g, "", nil
	}
	if n, err := strconv.Atoi(target); err == nil {
		g := h.defaultGroup()
		return g, g.instanceID(n), nil
	}
	for _, g := range h.groups {
		if n, ok := strings.CutPrefix(target, g.key+"-"); ok {
			if _, err := strconv.Atoi(n); err == nil {
				return g, target, nil
			}
		}
	}
	return nil, "", fmt.Errorf("%w: %q is neither a group (%s) nor an instance id such as %s",
		ErrNoInstance, target, h.groupKeys(), h.defaultGroup().instanceID(1))
}

// pick returns the running instance target names, or ErrLastInstance.
func (h *Host) pick(target string) (*instance, error) {
	g, id, err := h.resolve(target)
	if err != nil {
		return nil, err
	}
	r := h.pool.runningIn(g)
	var in *instance
	for _, x := range r {
		if id == "" || x.id == id {
			in = x
		}
	}
	switch {
	case in == nil:
		return nil, fmt.Errorf("%w: %q (running in %s: %s)", ErrNoInstance, id, g.name, strings.Join(ids(r), ", "))
	case len(r) == 1:
		return nil, fmt.Errorf("%w (%s, the last of %s)", ErrLastInstance, in.id, g.name)
	}
	return in, nil
}

// ids returns the instances' ids.
func ids(r []*instance) []string {
	var s []string
	for _, in := range r {
		s = append(s, in.id)
	}
	return s
}

// AddInstance scales group ("": the default) out by one and returns the new id.
func (h *Host) AddInstance(ctx context.Context, group string) (string, error) {
	if !h.started.Load() || h.closing.Load() {
		return "", errors.New("devhost: AddInstance on a host that is not running")
	}
	g := h.group(group)
	if g == nil {
		return "", fmt.Errorf("%w: %q (the app's groups: %s)", ErrUnknownGroup, group, h.groupKeys())
	}
	if len(h.pool.runningIn(g)) >= MaxInstances {
		return "", ErrTooManyInstances
	}
	in, err := h.startInstance(ctx, g)
	if err != nil {
		return "", err
	}
	h.log.Info("scaled out", slog.String("instance", in.id), slog.String("group", g.name), slog.Int("running", len(h.pool.runningIn(g))))
	return in.id, nil
}

// RemoveInstance scales in gracefully, as Flex Consumption does: the
// instance (id, or the newest for "") takes no new work, its handler gets
// SIGTERM and finishes its calls, and its sessions are closed.
func (h *Host) RemoveInstance(ctx context.Context, id string) (string, error) {
	return h.retire(ctx, id, InstanceRemoved)
}

// KillInstance loses an instance (id, or the newest for "") without warning:
// its handler gets SIGKILL, nothing is settled and its locks run out.
func (h *Host) KillInstance(id string) (string, error) {
	return h.retire(context.Background(), id, InstanceKilled)
}

// retire removes or kills the instance id names, leaving it in state.
func (h *Host) retire(ctx context.Context, id, state string) (string, error) {
	h.scaleMu.Lock()
	defer h.scaleMu.Unlock()
	in, err := h.pick(id)
	if err != nil {
		return "", err
	}
	in.retired.Store(true)
	in.state.Store(state)
	in.stopAccept() // a dead machine takes no new work either; what it held stays locked
	if state == InstanceKilled {
		in.proc.Kill()
		in.stopCalls()
		in.workers.Wait()
	} else {
		in.proc.Stop() // SIGTERM; SIGKILL only after the grace period
		done := make(chan struct{})
		go func() { in.workers.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(h.opts.DrainTimeout):
		case <-ctx.Done():
		}
		in.stopCalls()
		<-done
	}
	in.inv.close()
	h.log.Info("instance "+state, slog.String("instance", in.id), slog.String("group", in.g.name), slog.Int("running", len(h.pool.runningIn(in.g))))
	return in.id, nil
}

// Scale applies a scale action to target and returns the instance's id.
func (h *Host) Scale(ctx context.Context, action, target string) (string, error) {
	switch action {
	case scenario.ScaleAdd:
		return h.AddInstance(ctx, target)
	case scenario.ScaleRemove:
		return h.RemoveInstance(ctx, target)
	case scenario.ScaleKill:
		return h.KillInstance(target)
	}
	return "", fmt.Errorf("devhost: unknown scale action %q", action)
}

// Instances returns what each instance started so far did, in start order.
func (h *Host) Instances() []InstanceSummary {
	h.pool.mu.Lock()
	all := slices.Clone(h.pool.all)
	h.pool.mu.Unlock()
	out := make([]InstanceSummary, 0, len(all))
	for _, in := range all {
		in.counts.mu.Lock()
		s := InstanceSummary{
			ID: in.id, Group: in.g.name, State: in.stateName(), Invocations: in.counts.invocations, TimerRuns: in.counts.timerRuns,
			Results: maps.Clone(in.counts.results), RoundTrips: in.counts.roundTrips,
			ETagConflicts: in.counts.conflicts, CacheHits: in.counts.cacheHits,
			HandlerStarts: in.proc.Starts(),
		}
		in.counts.mu.Unlock()
		out = append(out, s)
	}
	return out
}

// RunningInstances returns the running instances' ids, oldest first.
func (h *Host) RunningInstances() []string { return ids(h.pool.runningIn(nil)) }

// InstancesIn returns Instances of group (a key, "" for the default group).
func (h *Host) InstancesIn(group string) []InstanceSummary {
	g := h.group(group)
	if g == nil {
		return nil
	}
	return slices.DeleteFunc(h.Instances(), func(in InstanceSummary) bool { return in.Group != g.name })
}

// RunningIn returns group's running instances' ids, oldest first (nil: no such group).
func (h *Host) RunningIn(group string) []string {
	if g := h.group(group); g != nil {
		return ids(h.pool.runningIn(g))
	}
	return nil
}

// InstanceURL returns instance id's handler base URL, for its own GET /api/metrics.
func (h *Host) InstanceURL(ctx context.Context, id string) (string, error) {
	for _, in := range h.pool.runningIn(nil) {
		if in.id == id {
			return in.proc.Ready(ctx)
		}
	}
	return "", fmt.Errorf("%w: %q (running: %s)", ErrNoInstance, id, strings.Join(h.RunningInstances(), ", "))
}

// HandlerPIDFor returns the pid of the handler holding session id, or 0.
func (h *Host) HandlerPIDFor(sessionID string) int {
	if in := h.pool.holder(sessionID); in != nil {
		return in.proc.PID()
	}
	return 0
}

// ParseScale reads the --scale flag, comma-separated ACTION[:TARGET]@AFTER
// events such as "add@30s,kill:2@3m" (ACTION add, remove or kill; TARGET as
// Scale takes it; AFTER a Go duration since the workload started), into
// scenario lines. Host.CheckScale checks them against the app.
func ParseScale(s string) ([]ScenarioLine, error) {
	var out []ScenarioLine
	for _, ev := range strings.Split(s, ",") {
		ev = strings.TrimSpace(ev)
		what, after, ok := strings.Cut(ev, "@")
		if !ok {
			return nil, fmt.Errorf("scale event %q: want ACTION[:TARGET]@AFTER, such as add@30s", ev)
		}
		action, id, _ := strings.Cut(what, ":")
		if !scenario.IsScaleAction(action) {
			return nil, fmt.Errorf("scale event %q: action %q: want add, remove or kill", ev, action)
		}
		if _, err := strconv.Atoi(id); err == nil && action == scenario.ScaleAdd {
			return nil, fmt.Errorf("scale event %q: add takes a group, not an instance (a new instance gets the next id)", ev)
		}
		d, err := time.ParseDuration(after)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("scale event %q: %q is not a Go duration such as 30s or 2m", ev, after)
		}
		out = append(out, ScenarioLine{Scale: action, Instance: id, SendAfter: d, Pos: "--scale " + ev})
	}
	return out, nil
}

// CheckScale plays the workload's scale events on paper, from each group's
// starting instances, and reports the first that could not happen.
func (h *Host) CheckScale(lines []ScenarioLine) error {
	counts, err := h.startCounts()
	if err != nil {
		return err
	}
	running := map[*group][]string{}
	next := map[*group]int{}
	for g, n := range counts {
		for i := 1; i <= n; i++ {
			running[g] = append(running[g], g.instanceID(i))
		}
		next[g] = n + 1
	}
	for _, l := range lines {
		if l.Scale == "" {
			continue
		}
		at := fmt.Sprintf("%s (at %s)", l.Pos, l.SendAfter)
		if l.Scale == scenario.ScaleAdd {
			g := h.group(l.Instance)
			if g == nil {
				return fmt.Errorf("%s: add: %q is not a group of the app (%s)", at, l.Instance, h.groupKeys())
			}
			if len(running[g]) >= MaxInstances {
				return fmt.Errorf("%s: add: %d instances of %s would be running, at most %d", at, len(running[g])+1, g.name, MaxInstances)
			}
			running[g] = append(running[g], g.instanceID(next[g]))
			next[g]++
			continue
		}
		g, id, err := h.resolve(l.Instance)
		if err != nil {
			return fmt.Errorf("%s: %s: %v", at, l.Scale, err)
		}
		r := running[g]
		i := len(r) - 1 // the newest running one, by default
		if id != "" {
			i = slices.Index(r, id)
		}
		switch {
		case i < 0:
			return fmt.Errorf("%s: %s: %s is not running then (running in %s: %s)", at, l.Scale, id, g.name, strings.Join(r, ", "))
		case len(r) == 1:
			return fmt.Errorf("%s: %s: %s is the last running instance of %s (add one first)", at, l.Scale, r[0], g.name)
		}
		running[g] = slices.Delete(r, i, i+1)
	}
	return nil
}

// mergeScale inserts each event before the first line held longer than it.
func mergeScale(lines, events []ScenarioLine) []ScenarioLine {
	out := slices.Clone(lines)
	for _, ev := range events {
		i := slices.IndexFunc(out, func(l ScenarioLine) bool { return l.SendAfter > ev.SendAfter })
		if i < 0 {
			i = len(out)
		}
		out = slices.Insert(out, i, ev)
	}
	return out
}

// messages counts the lines that send a message.
func messages(lines []ScenarioLine) int {
	n := 0
	for _, l := range lines {
		if l.IsMessage() {
			n++
		}
	}
	return n
}

// newLoopbackClient is an HTTP client for the handlers on loopback.
func newLoopbackClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	tr.Proxy = nil // loopback only
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
