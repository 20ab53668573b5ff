package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlmem"
)

// statsLine is one deadletter_stats line as the alerts read it.
type statsLine struct {
	Msg              string `json:"msg"`
	RunID            string `json:"run_id"`
	Source           string `json:"source"`
	Reason           string `json:"reason"`
	Depth            int    `json:"depth"`
	OldestAgeSeconds int64  `json:"oldest_age_seconds"`
	InQueue          int    `json:"in_queue"`
	Left             int    `json:"left"`
	Stored           int    `json:"stored"`
}

// statsLineKeys are the keys of the line, which alerts/alerts.bicep
// describes and the alerts, the workbook and the runbooks' KQL read.
var statsLineKeys = []string{"time", "level", "msg", "run_id", "source", "reason", "depth", "oldest_age_seconds", "in_queue", "left", "stored"}

// statsGolden holds the lines of every scenario below, as the sweeper
// logs them (time and run_id made fixed): infra/check evaluates the
// dead-letter alerts' queries over them offline, so the alerts are checked
// against what the sweeper writes, not against a hand-written sample.
const statsGolden = "../../../alerts/testdata/deadletter-stats.json"

var updateStatsGolden = flag.Bool("update-stats-golden", false, "rewrite "+statsGolden+" from the sweeper's lines")

// goldenScenario is one scenario of statsGolden: its runs' lines.
type goldenScenario struct {
	Name string     `json:"name"`
	Runs [][]string `json:"runs"`
}

var (
	lineTime  = regexp.MustCompile(`"time":"[^"]*"`)
	lineRunID = regexp.MustCompile(`"run_id":"[^"]*"`)
)

// The order-status-dead-lettered and order-status-poison-parked alerts fire
// on a line with stored > 0 or depth > 0: a message the sweeper drained in
// the same run that found it (so no per-minute metric sample may have seen
// it) is counted in stored, and one it closed at once (an InvalidPayload,
// archived) still logs its line, with depth 0. A second run counts nothing
// again: stored is what that run drained.
func TestStatsLinesCountWhatEachRunDrained(t *testing.T) {
	type want struct{ depth, inQueue, left, stored int }
	cases := []struct {
		name   string
		put    func(t *testing.T, mb *membroker.Broker, q deadletter.Queues)
		first  map[string]want // by source/reason
		second map[string]want
	}{
		{
			name: "dead-lettered by the broker, drained and waiting for its cool-down",
			put: func(t *testing.T, mb *membroker.Broker, q deadletter.Queues) {
				deadLetterFiveTimes(t, mb, q.Queue, "o-1:2", "o-1")
			},
			first:  map[string]want{"dlq/MaxDeliveryCountExceeded": {1, 0, 0, 1}, "poison/": {}, "poison-dlq/": {}},
			second: map[string]want{"dlq/MaxDeliveryCountExceeded": {1, 0, 0, 0}, "poison/": {}, "poison-dlq/": {}},
		},
		{
			name: "parked InvalidPayload, archived by the run that drained it",
			put: func(t *testing.T, mb *membroker.Broker, q deadletter.Queues) {
				parkCopy(t, mb, q.PoisonQueue, "o-2:1", "InvalidPayload")
			},
			first:  map[string]want{"dlq/": {}, "poison/InvalidPayload": {0, 0, 0, 1}, "poison-dlq/": {}},
			second: map[string]want{"dlq/": {}, "poison/": {}, "poison-dlq/": {}},
		},
		{
			name: "parked InvalidTransition, left for a human",
			put: func(t *testing.T, mb *membroker.Broker, q deadletter.Queues) {
				parkCopy(t, mb, q.PoisonQueue, "o-3:4", "InvalidTransition")
			},
			first:  map[string]want{"dlq/": {}, "poison/InvalidTransition": {1, 0, 1, 1}, "poison-dlq/": {}},
			second: map[string]want{"dlq/": {}, "poison/InvalidTransition": {1, 0, 1, 0}, "poison-dlq/": {}},
		},
		{
			name: "parked, then dead-lettered on the poison queue, left for a human",
			put: func(t *testing.T, mb *membroker.Broker, q deadletter.Queues) {
				parkCopy(t, mb, q.PoisonQueue, "o-4:1", "InvalidTransition")
				for range 5 {
					got, err := mb.Receive(context.Background(), broker.Source{Queue: q.PoisonQueue}, 1, 0)
					if err != nil || len(got) != 1 {
						t.Fatalf("Receive: %d, %v", len(got), err)
					}
					if err := mb.Abandon(context.Background(), broker.Source{Queue: q.PoisonQueue}, got[0]); err != nil {
						t.Fatal(err)
					}
				}
			},
			first:  map[string]want{"dlq/": {}, "poison/": {}, "poison-dlq/MaxDeliveryCountExceeded": {1, 0, 1, 1}},
			second: map[string]want{"dlq/": {}, "poison/": {}, "poison-dlq/MaxDeliveryCountExceeded": {1, 0, 1, 0}},
		},
	}
	var golden []goldenScenario
	defer func() {
		if t.Failed() {
			return
		}
		got, err := json.MarshalIndent(golden, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		if *updateStatsGolden {
			if err := os.MkdirAll(filepath.Dir(statsGolden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(statsGolden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		have, err := os.ReadFile(statsGolden)
		if err != nil || !bytes.Equal(have, got) {
			t.Errorf("%s is not what the sweeper logs (%v); rerun with -update-stats-golden and check the diff:\n%s", statsGolden, err, got)
		}
	}()
	for n, tc := range cases {
		scenario := goldenScenario{Name: tc.name}
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			q := deadletter.Queues{Queue: "order-status", PoisonQueue: "order-status-poison"}
			mb := membroker.New(nil)
			for _, name := range []string{q.Queue, q.PoisonQueue} {
				if err := mb.CreateQueue(name, membroker.DefaultQueueOptions()); err != nil {
					t.Fatal(err)
				}
			}
			var logged bytes.Buffer
			s := deadletter.New(mb, dlmem.New(), deadletter.Options{Queues: q,
				Policy:        deadletter.Policy{Cooldown: time.Hour, MaxReplays: 3},
				RatePerSecond: 1000, ReceiveWait: time.Millisecond,
				// A clock that stands still: every age is 0 however slow the machine.
				Now:    func() time.Time { return time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC) },
				Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
			tc.put(t, mb, q)
			for run, wantLines := range []map[string]want{tc.first, tc.second} {
				rep, err := s.Run(ctx, deadletter.RunOptions{})
				if err != nil {
					t.Fatalf("run %d: %v", run+1, err)
				}
				got := map[string]want{}
				var lines []string
				for _, line := range rep.StatsLines {
					fixed := lineTime.ReplaceAllString(line, `"time":"2026-12-01T10:0`+fmt.Sprint(5*run)+`:00Z"`)
					lines = append(lines, lineRunID.ReplaceAllString(fixed, fmt.Sprintf(`"run_id":"scenario-%d-run-%d"`, n+1, run+1)))
					var raw map[string]any
					if err := json.Unmarshal([]byte(line), &raw); err != nil {
						t.Fatalf("run %d: line %q: %v", run+1, line, err)
					}
					var keys []string
					for k := range raw {
						keys = append(keys, k)
					}
					slices.Sort(keys)
					if wantKeys := slices.Sorted(slices.Values(statsLineKeys)); !slices.Equal(keys, wantKeys) {
						t.Errorf("run %d: line %q has keys %v, want %v", run+1, line, keys, wantKeys)
					}
					var l statsLine
					_ = json.Unmarshal([]byte(line), &l)
					if l.Msg != deadletter.StatsMessage || l.RunID != rep.RunID {
						t.Errorf("run %d: line %q: msg or run_id wrong", run+1, line)
					}
					if !strings.Contains(logged.String(), line) {
						t.Errorf("run %d: line %q is not on the logger's output (stdout)", run+1, line)
					}
					got[l.Source+"/"+l.Reason] = want{l.Depth, l.InQueue, l.Left, l.Stored}
				}
				scenario.Runs = append(scenario.Runs, lines)
				if len(got) != len(wantLines) {
					t.Errorf("run %d: lines %v, want %v", run+1, got, wantLines)
				}
				for k, w := range wantLines {
					if g, ok := got[k]; !ok || g != w {
						t.Errorf("run %d: %s = %+v (present %v), want %+v (depth, in queue, left, stored)", run+1, k, g, ok, w)
					}
				}
			}
		})
		golden = append(golden, scenario)
	}
}

// deadLetterFiveTimes dead-letters a message the way Service Bus does:
// five failed deliveries (the queue has no sessions, so a test can
// abandon).
func deadLetterFiveTimes(t *testing.T, mb *membroker.Broker, queue, id, session string) {
	t.Helper()
	ctx := context.Background()
	if err := mb.Send(ctx, queue, broker.Message{MessageID: id, SessionID: session, Subject: "OrderStatusChanged",
		Body: []byte(`{"orderId":"` + session + `"}`)}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		got, err := mb.Receive(ctx, broker.Source{Queue: queue}, 1, 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("Receive: %d, %v", len(got), err)
		}
		if err := mb.Abandon(ctx, broker.Source{Queue: queue}, got[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// parkCopy sends a parked copy of original to the poison queue as the
// handler does.
func parkCopy(t *testing.T, mb *membroker.Broker, queue, original, reason string) {
	t.Helper()
	if err := mb.Send(context.Background(), queue, broker.Message{MessageID: original + ":parked", Subject: "OrderStatusChanged",
		Body: []byte("body of " + original), ApplicationProperties: map[string]any{
			broker.PropertyDeadLetterReason: reason, broker.PropertyDeadLetterErrorDescription: "because",
			"OriginalMessageId": original, "OriginalSessionId": strings.Split(original, ":")[0]}}); err != nil {
		t.Fatal(err)
	}
}
