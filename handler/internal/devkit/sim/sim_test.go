package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// The simulation's knobs (environment variables).
const (
	// envSeed runs the one schedule of that seed (the replay command).
	envSeed = "SIM_SEED"
	// envSchedules is how many schedules run (default defaultSchedules,
	// 20 with -short); seeds are envFirstSeed, envFirstSeed+1, ...
	envSchedules = "SIM_SCHEDULES"
	envFirstSeed = "SIM_FIRST_SEED"
	// envParallel is how many schedules run at once (default defaultParallel).
	envParallel = "SIM_PARALLEL"
	// envOutages is how many outage schedules of each kind (shorter and
	// longer than the retry window, GenerateOutage) run besides (default
	// defaultOutages, 1 with -short, 0 when SIM_SEED is set unless this is
	// set too); envOutageSeed runs the one pair of that seed.
	envOutages     = "SIM_OUTAGES"
	envOutageSeed  = "SIM_OUTAGE_SEED"
	defaultOutages = 3

	// Seeds 1 to defaultSchedules draw every fault at least 10 times
	// (TestGenerateCoversEveryFault); make soak runs 2,000.
	defaultSchedules = 90
	defaultParallel  = 8
)

// built is the handler binary and the app folder, made once per test
// binary (see setUp) and removed by TestMain.
var built struct {
	once    sync.Once
	dir     string
	handler string
	app     string
	idleApp string // app with sessionIdleTimeout ShortSessionIdle
	err     error
}

func TestMain(m *testing.M) {
	code := testenv.Main(m)
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// statSources stats every Go file under dir (and go.mod and go.sum above
// it), so that go test's cache, which records the files a test stats,
// reruns the simulation when the handler it builds has changed.
func statSources(dir string) error {
	for _, f := range []string{"go.mod", "go.sum"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), f)); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		_, err = os.Stat(path)
		return err
	})
}

// setUp builds the handler from the current sources (never a possibly
// stale bin/handler) and lays out the app (host.json, the function
// folders, the settings template) in a fresh folder, so a developer's
// local.settings.json does not leak in. It runs once per test binary.
func setUp(t *testing.T) (handler, app string) {
	t.Helper()
	built.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			built.err = err
			return
		}
		if built.dir, err = os.MkdirTemp("", "sim-"); err != nil {
			built.err = err
			return
		}
		built.handler = filepath.Join(built.dir, "handler")
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		// go test caches a passing run by the test binary and the files
		// the test itself looked at; the handler built below is neither,
		// so without this a change to its sources would replay the last
		// result. Stat'ing them makes them part of the cache key.
		if err := statSources(filepath.Join(root, "handler")); err != nil {
			built.err = err
			return
		}
		cmd := exec.Command(goTool, "build", "-o", built.handler, "./handler/cmd/orderstatus-dev")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./handler/cmd/orderstatus-dev: %v\n%s", err, out)
			return
		}
		built.app = filepath.Join(built.dir, "app")
		built.idleApp = filepath.Join(built.dir, "app-short-idle")
		files, _ := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
		files = append(files, filepath.Join(root, "host.json"), filepath.Join(root, "local.settings.json.template"))
		for _, app := range []string{built.app, built.idleApp} {
			for _, f := range files {
				rel, _ := filepath.Rel(root, f)
				data, err := os.ReadFile(f)
				if err == nil && app == built.idleApp && rel == "host.json" {
					data, err = withSessionIdle(data, ShortSessionIdle)
				}
				if err == nil {
					err = os.MkdirAll(filepath.Join(app, filepath.Dir(rel)), 0o755)
				}
				if err == nil {
					err = os.WriteFile(filepath.Join(app, rel), data, 0o644)
				}
				if err != nil {
					built.err = err
					return
				}
			}
		}
	})
	if built.err != nil {
		t.Fatalf("set up the simulation: %v", built.err)
	}
	return built.handler, built.app
}

// withSessionIdle returns host.json with extensions.serviceBus.
// sessionIdleTimeout set to d (whole milliseconds, as a TimeSpan).
func withSessionIdle(hostJSON []byte, d time.Duration) ([]byte, error) {
	var host map[string]any
	if err := json.Unmarshal(hostJSON, &host); err != nil {
		return nil, fmt.Errorf("host.json: %w", err)
	}
	ext, _ := host["extensions"].(map[string]any)
	sb, _ := ext["serviceBus"].(map[string]any)
	if sb == nil {
		return nil, fmt.Errorf("host.json has no extensions.serviceBus")
	}
	sb["sessionIdleTimeout"] = fmt.Sprintf("00:00:%02d.%03d", int(d/time.Second), int(d%time.Second/time.Millisecond))
	return json.MarshalIndent(host, "", "  ")
}

// storageAddr returns host:port of the TableEndpoint of an Azurite
// connection string.
func storageAddr(cs string) (string, error) {
	for _, part := range strings.Split(cs, ";") {
		if v, ok := strings.CutPrefix(part, "TableEndpoint="); ok {
			rest, ok := strings.CutPrefix(v, "http://")
			if !ok {
				break
			}
			host, _, _ := strings.Cut(rest, "/")
			return host, nil
		}
	}
	return "", fmt.Errorf("no http TableEndpoint in the Azurite connection string")
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return n
}

// seeds returns the seeds to run: SIM_SEED alone, or SIM_SCHEDULES seeds
// from SIM_FIRST_SEED on.
func seeds(t *testing.T) []uint64 {
	if os.Getenv(envSeed) != "" {
		return []uint64{uint64(envInt(t, envSeed, 0))}
	}
	def := defaultSchedules
	if testing.Short() {
		def = 20
	}
	n, first := envInt(t, envSchedules, def), envInt(t, envFirstSeed, 1)
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(first + i)
	}
	return out
}

// TestSimulation runs the schedules of the seeds, several at once, each
// against its own development host, handler process, fault proxy and
// table, and checks the invariants after each (see Check). A failure
// prints the seed, the fault mix, the violations, the handler's stderr and
// the command that replays it.
func TestSimulation(t *testing.T) {
	handler, app := setUp(t)
	cs := testenv.Azurite(t)
	addr, err := storageAddr(cs)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := aztables.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{HandlerPath: handler, AppRoot: app, ShortIdleAppRoot: built.idleApp, Storage: addr, Tables: tables,
		ProcessEnv: []string{"PATH=" + os.Getenv("PATH")}}

	type job struct {
		name   string
		seed   uint64
		replay string
		gen    func() Schedule
	}
	// The outage schedules run longest: they start first.
	var jobs []job
	for _, seed := range outageSeeds(t) {
		for _, long := range []bool{false, true} {
			kind := "short"
			if long {
				kind = "long"
			}
			jobs = append(jobs, job{fmt.Sprintf("outage-%s/seed=%d", kind, seed), seed, fmt.Sprintf("%s=0 %s=%d", envSchedules, envOutageSeed, seed),
				func() Schedule { return GenerateOutage(seed, long) }})
		}
	}
	for _, seed := range seeds(t) {
		jobs = append(jobs, job{fmt.Sprintf("seed=%d", seed), seed, fmt.Sprintf("%s=%d", envSeed, seed), func() Schedule { return Generate(seed) }})
	}
	parallel := max(1, envInt(t, envParallel, defaultParallel))
	var (
		mu     sync.Mutex
		totals totalStats
		next   = make(chan job)
		wg     sync.WaitGroup
	)
	start := time.Now()
	for range min(parallel, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				// t.Run may be called from several goroutines at once;
				// this pool, not -parallel, bounds the concurrency.
				t.Run(j.name, func(t *testing.T) {
					st := runSchedule(t, env, j.seed, j.gen(), j.replay)
					mu.Lock()
					totals.add(st)
					mu.Unlock()
				})
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	t.Logf("%d schedules in %s (%d at once): %s", len(jobs), time.Since(start).Round(time.Second), parallel, totals)
}

// outageSeeds returns the seeds of the outage schedules to run.
func outageSeeds(t *testing.T) []uint64 {
	if os.Getenv(envOutageSeed) != "" {
		return []uint64{uint64(envInt(t, envOutageSeed, 0))}
	}
	def := defaultOutages
	switch {
	case os.Getenv(envSeed) != "":
		def = 0
	case testing.Short():
		def = 1
	}
	out := make([]uint64, envInt(t, envOutages, def))
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// runSchedule runs one schedule and reports its violations; replay is
// the environment that runs it again.
func runSchedule(t *testing.T, env Env, seed uint64, s Schedule, replay string) Stats {
	res, err := Run(context.Background(), env, s)
	t.Logf("seed %d: %s; %s", seed, s.Mix(), statsLine(res.Stats))
	if err == nil && len(res.Violations) == 0 {
		return res.Stats
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d failed\nfault mix: %s\nfaults fired: %s\n", seed, s.Mix(), statsLine(res.Stats))
	if err != nil {
		fmt.Fprintf(&b, "run error: %v\n", err)
	}
	if len(res.Violations) > 0 {
		fmt.Fprintf(&b, "%d violations:\n", len(res.Violations))
		for _, v := range res.Violations {
			fmt.Fprintf(&b, "  - %s\n", v)
		}
	}
	fmt.Fprintf(&b, "handler stderr (last lines):\n%s\n", Tail(res.HandlerStderr, 12, 400))
	if path, err := saveLogs(seed, s, res); err == nil {
		fmt.Fprintf(&b, "full logs: %s\n", path)
	}
	fmt.Fprintf(&b, "replay: %s go test -race -run TestSimulation ./handler/internal/devkit/sim/", replay)
	t.Error(b.String())
	return res.Stats
}

// saveLogs writes everything a failed run saw to a file for diagnosis.
func saveLogs(seed uint64, s Schedule, res Result) (string, error) {
	f, err := os.CreateTemp("", fmt.Sprintf("sim-seed%d-*.log", seed))
	if err != nil {
		return "", err
	}
	defer f.Close()
	fmt.Fprintf(f, "# schedule (seed %d): %s\n", seed, s.Mix())
	for _, m := range s.Messages {
		fmt.Fprintf(f, "%8s %-14s %-36s %s after=%s\n", m.Line.SendAfter, m.Kind, m.Line.MessageID, m.Line.Body, m.Line.ScheduleAfter)
	}
	fmt.Fprintf(f, "\n# writes on the wire\n")
	for _, w := range res.Observation.Writes {
		fmt.Fprintf(f, "%s if-match=%s etag=%s\n", w, w.IfMatch, w.ETag)
	}
	fmt.Fprintf(f, "\n# rows\n")
	for _, id := range slices.Sorted(maps.Keys(res.Observation.Rows)) {
		fmt.Fprintf(f, "%s %s\n", id, res.Observation.Rows[id])
	}
	fmt.Fprintf(f, "\n# parked\n")
	for _, p := range res.Observation.Parked {
		fmt.Fprintf(f, "%s %s\n", p.OriginalMessageID, p.Reason)
	}
	fmt.Fprintf(f, "\n# dead-lettered\n")
	for _, d := range res.Observation.DeadLettered {
		fmt.Fprintf(f, "%s %s delivery %d\n", d.MessageID, d.Reason, d.DeliveryCount)
	}
	fmt.Fprintf(f, "\n# violations\n%s\n", strings.Join(res.Violations, "\n"))
	fmt.Fprintf(f, "\n# handler stdout\n%s\n# handler stderr\n%s\n# host log\n%s\n", res.HandlerStdout, res.HandlerStderr, res.HostLog)
	return f.Name(), nil
}

func statsLine(s Stats) string {
	return fmt.Sprintf("kills=%d lost_answers=%d outage_requests=%d lock_lost=%d concurrent_calls=%d abandoned=%d restarts=%d dead_lettered=%d replays=%d races_paid=%d races_cancelled=%d writes=%d answers=%d "+
		"instances=%d scale_events=%d session_moves=%d redelivered_elsewhere=%d etag_conflicts=%d stale_cache_conflicts=%d stale_cache_round_trips=%d round_trips=%d applied=%d",
		s.Kills, s.LostAnswers, s.OutageRequests, s.LockLost, s.ConcurrentCalls, s.Abandoned, s.Restarts, s.DeadLettered, s.Replays,
		s.RacesPaid, s.RacesCancelled, s.Writes, s.Answers,
		s.Instances, s.ScaleEvents, s.Moves, s.Elsewhere, s.Conflicts, s.StaleConflicts, s.StaleRoundTrips, s.RoundTrips, s.Applied)
}

// totalStats sums Stats over schedules, counting schedules where each
// fault fired.
type totalStats struct {
	schedules                                                int
	kills, lostAnswers, outageRequests, lockLost, concurrent int64
	shortOutages, longOutages, lockExpiryWindows, restarts   int
	deadLettered, replays, abandoned, writes, answers        int
	withKills, withLostAnswers, withConcurrent, withReplays  int
	withOutageHits, racesPaid, racesCancelled                int
	// Scale-out: schedules with more than one instance, scale events,
	// session moves and what stale caches cost there.
	multi, scaleEvents, moves, conflicts, staleConflicts int
	staleRoundTrips, roundTrips, applied, multiAnswers   int
	elsewhere, withElsewhere                             int
}

func (t *totalStats) add(s Stats) {
	t.schedules++
	t.kills += int64(s.Kills)
	t.lostAnswers += s.LostAnswers
	t.outageRequests += s.OutageRequests
	t.lockLost += int64(s.LockLost)
	t.concurrent += int64(s.ConcurrentCalls)
	t.shortOutages += s.ShortOutages
	t.longOutages += s.LongOutages
	if s.LockExpiry {
		t.lockExpiryWindows++
	}
	t.restarts += s.Restarts
	t.deadLettered += s.DeadLettered
	t.replays += s.Replays
	t.abandoned += s.Abandoned
	t.writes += s.Writes
	t.answers += s.Answers
	t.racesPaid += s.RacesPaid
	t.racesCancelled += s.RacesCancelled
	count := func(n *int, fired bool) {
		if fired {
			*n++
		}
	}
	count(&t.withKills, s.Kills > 0)
	count(&t.withLostAnswers, s.LostAnswers > 0)
	count(&t.withConcurrent, s.ConcurrentCalls > 0)
	count(&t.withReplays, s.Replays > 0)
	count(&t.withOutageHits, s.OutageRequests > 0)
	t.scaleEvents += s.ScaleEvents
	t.elsewhere += s.Elsewhere
	count(&t.withElsewhere, s.Elsewhere > 0)
	t.conflicts += s.Conflicts
	if s.Instances > 1 {
		t.multi++
		t.moves += s.Moves
		t.staleConflicts += s.StaleConflicts
		t.staleRoundTrips += s.StaleRoundTrips
		t.roundTrips += s.RoundTrips
		t.applied += s.Applied
		t.multiAnswers += s.Answers
	}
}

func (t totalStats) String() string {
	return fmt.Sprintf("kills %d (in %d schedules), handler restarts %d; lost answers %d (in %d); outages %d short + %d long, %d requests failed (in %d schedules); "+
		"lock-expiry windows %d, answers after a lost lock %d, concurrent calls of one message %d (in %d); abandoned %d; dead-lettered %d, replayed %d (in %d); "+
		"timeout races won by Paid %d, by the timeout %d; writes %d, answers %d; "+
		"scale-out: %d schedules ran more than one instance, %d scale events, %d messages answered again on another instance (in %d), ETag conflicts %d in all; in the multi-instance schedules %d session moves, "+
		"stale-cache conflicts %d costing %d extra round trips over %d answers (%.3f per answer, %.3f per applied; %d round trips for %d applied)",
		t.kills, t.withKills, t.restarts, t.lostAnswers, t.withLostAnswers, t.shortOutages, t.longOutages, t.outageRequests, t.withOutageHits,
		t.lockExpiryWindows, t.lockLost, t.concurrent, t.withConcurrent, t.abandoned, t.deadLettered, t.replays, t.withReplays,
		t.racesPaid, t.racesCancelled, t.writes, t.answers,
		t.multi, t.scaleEvents, t.elsewhere, t.withElsewhere, t.conflicts, t.moves, t.staleConflicts, t.staleRoundTrips, t.multiAnswers,
		ratio(t.staleRoundTrips, t.multiAnswers), ratio(t.staleRoundTrips, t.applied), t.roundTrips, t.applied)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
