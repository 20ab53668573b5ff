package deadletter_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
)

// repoFile reads a file of the repository from this package's directory.
func repoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// everyMinutes is the interval of a six-field NCRONTAB schedule that fires
// at second 0 every n minutes ("0 */5 * * * *").
func everyMinutes(t *testing.T, where, schedule string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`^0 \*/(\d+) \* \* \* \*$`).FindStringSubmatch(schedule)
	if m == nil {
		t.Fatalf("%s: schedule %q: want 0 */N * * * *", where, schedule)
	}
	n, _ := strconv.Atoi(m[1])
	return time.Duration(n) * time.Minute
}

// The budget lets a run work nearly its whole interval and keeps it well
// inside the function timeout (a minute for the action under way, the
// stats and the answer), for the timeout in host.json and the schedule
// infra and the local settings give the timer.
func TestDefaultBudgetFitsTheTimerAndTheFunctionTimeout(t *testing.T) {
	var host struct {
		FunctionTimeout string `json:"functionTimeout"`
	}
	if err := json.Unmarshal([]byte(repoFile(t, "host.json")), &host); err != nil {
		t.Fatal(err)
	}
	var h, m, s int
	if _, err := fmt.Sscanf(host.FunctionTimeout, "%d:%d:%d", &h, &m, &s); err != nil {
		t.Fatalf("host.json functionTimeout %q: %v", host.FunctionTimeout, err)
	}
	timeout := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second
	if tail := timeout - deadletter.DefaultBudget; tail < time.Minute {
		t.Errorf("DefaultBudget %s leaves %s of the %s functionTimeout; want at least a minute", deadletter.DefaultBudget, tail, timeout)
	}
	var settings struct {
		Values map[string]string `json:"Values"`
	}
	if err := json.Unmarshal([]byte(repoFile(t, "local.settings.json.template")), &settings); err != nil {
		t.Fatal(err)
	}
	schedules := map[string]string{"local.settings.json.template": settings.Values["DEAD_LETTER_SWEEP_SCHEDULE"]}
	param := regexp.MustCompile(`param deadLetterSweepSchedule string = '([^']*)'`)
	for _, f := range []string{"infra/main.bicep", "infra/app/functionapp.bicep"} {
		if m := param.FindStringSubmatch(repoFile(t, f)); m != nil {
			schedules[f] = m[1]
		} else {
			t.Errorf("%s: no default of deadLetterSweepSchedule", f)
		}
	}
	for where, sched := range schedules {
		interval := everyMinutes(t, where, sched)
		if b := deadletter.DefaultBudget; b >= interval || b < interval*3/4 {
			t.Errorf("%s: DefaultBudget %s for a run every %s: want at least 3/4 of the interval and less than all of it", where, b, interval)
		}
	}
}

// A run acts at its rate until its budget ends: about rate × budget
// entries, and the next runs go on where it stopped.
func TestARunActsOnAboutRateTimesBudget(t *testing.T) {
	f := newFixture(t)
	const n, rate, budget = 60, 100.0, 300 * time.Millisecond
	for i := range n {
		f.park(t, fmt.Sprintf("o-%d:1", i), "InvalidPayload")
	}
	s := f.sweeper(deadletter.Options{RatePerSecond: rate, Budget: budget})
	perRun := int(rate * budget.Seconds()) // 30
	rep := f.run(t, s)
	if got := rep.Counts[deadletter.ActionArchive]; got > perRun+1 || got < perRun/3 || rep.Stopped == "" {
		t.Fatalf("one run at %v/s with a %s budget archived %d (stopped %q); want about %d, then a stop", rate, budget, got, rep.Stopped, perRun)
	}
	runs := 1
	for f.actions(t)["archived"] < n && runs < 10 {
		f.run(t, s)
		runs++
	}
	if got := f.actions(t)["archived"]; got != n || runs > 6 {
		t.Errorf("%d runs archived %d of %d; want all within a few runs of about %d each", runs, got, n, perRun)
	}
}
