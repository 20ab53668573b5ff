package devhost

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/fleetmetrics"
)

// TestEndToEndFleetMetrics runs the real handler on two instances of the
// development host and adds up their fleet_metrics lines as the workbook's
// KQL does: per instance and in all, the orderstatus_messages_total
// increases equal the settled lines the instances wrote, and their
// orderstatus_lag_seconds counts equal the settled (200) lines with a
// lag_ms. The last lines come from each handler's shutdown.
func TestEndToEndFleetMetrics(t *testing.T) {
	t.Parallel()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	env := e2eEnv(t)
	app := copyApp(t, root, handler)
	handlerLog := filepath.Join(t.TempDir(), "handler.log")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, []string{"--app-root", app, "--instances", "2", "--orders", "30",
		"--exit-when-idle", "--http-addr", "127.0.0.1:0", "--handler-log", handlerLog}, env, &stdout, &stderr, DefaultHTTPAddr)
	if code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	data, err := os.ReadFile(handlerLog)
	if err != nil {
		t.Fatal(err)
	}
	settled, lagged := map[string]float64{}, map[string]uint64{}
	reported, reportedLag := map[string]float64{}, map[string]uint64{}
	reports := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Msg        string                `json:"msg"`
			InstanceID string                `json:"instance_id"`
			MessageID  *string               `json:"message_id"`
			Result     string                `json:"result"`
			RoundTrips *int                  `json:"round_trips"`
			LagMS      *float64              `json:"lag_ms"`
			Series     []fleetmetrics.Series `json:"series"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case rec.Msg == fleetmetrics.Msg:
			reports++
			for _, s := range rec.Series {
				switch s.Name {
				case "orderstatus_messages_total":
					reported[rec.InstanceID] += s.Value
				case "orderstatus_lag_seconds":
					if s.Labels["kind"] == "enqueued_to_settled" {
						reportedLag[rec.InstanceID] += s.Count
					}
				}
			}
		case rec.MessageID != nil && rec.Result != "" && rec.RoundTrips != nil:
			settled[rec.InstanceID]++
			if rec.LagMS != nil {
				lagged[rec.InstanceID]++
			}
		}
	}
	if reports == 0 || len(settled) != 2 {
		t.Fatalf("%d fleet_metrics lines, settled lines by instance %v: want lines from both instances", reports, settled)
	}
	var total, totalReported float64
	for id, n := range settled {
		total += n
		totalReported += reported[id]
		if reported[id] != n {
			t.Errorf("%s: fleet_metrics report %v messages, its log has %v settled lines", id, reported[id], n)
		}
		if reportedLag[id] != lagged[id] || lagged[id] == 0 {
			t.Errorf("%s: fleet_metrics report %d lag observations, its log has %d lines with lag_ms (want equal, above 0)", id, reportedLag[id], lagged[id])
		}
	}
	if total != totalReported {
		t.Errorf("the fleet: %v reported, %v settled", totalReported, total)
	}
}
