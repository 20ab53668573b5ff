package devhost

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// TestEndToEndGivenFreshStore runs `orderstatus-dev dev --exit-when-idle` with
// OrderStore__connectionString naming a fresh Azurite (a store given to
// the dev host, with no tables yet): the host creates the tables the
// product reads before it starts the functions, so the first Created is
// applied at once, the sweeper finds its table, and the run exits 0.
func TestEndToEndGivenFreshStore(t *testing.T) {
	t.Parallel()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	az := testenv.StartAzurite(t)
	env := envWith(SettingStoreConnection+"="+az.ConnectionString(), "LOG_LEVEL=warn")
	app := copyApp(t, root, handler)
	dir := t.TempDir()
	scenarioPath := filepath.Join(dir, "scenario.jsonl")
	summaryPath := filepath.Join(dir, "summary.json")
	handlerLog := filepath.Join(dir, "handler.log")
	scenario := `{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}
{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:2","body":{"orderId":"o-1","status":"Paid","sequence":2}}
{"subject":"OrderStatusChanged","sessionId":"o-2","messageId":"o-2:bad","body":"{\"orderId\":\"o-2\",\"status\":"}
`
	if err := os.WriteFile(scenarioPath, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, []string{"--app-root", app, "--scenario", scenarioPath, "--exit-when-idle", "--summary-json", summaryPath,
		"--http-addr", "127.0.0.1:0", "--handler-log", handlerLog}, env, &stdout, &stderr, DefaultHTTPAddr)
	if code != ExitOK {
		b, _ := os.ReadFile(handlerLog)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s\nhandler log (tail):\n%s", code, stdout.String(), stderr.String(), b)
	}
	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, data)
	}
	if got := s.Orders["o-1"]; got.Status != "Paid" || got.LastSequence != 2 {
		t.Errorf("o-1: got %+v, want Paid at sequence 2", got)
	}
	// Nothing waited for a table: no call was retried or rescheduled.
	if n := s.Results["Rescheduled"]; n != 0 {
		t.Errorf("results %v: got %d Rescheduled, want none", s.Results, n)
	}
	if want := "store tables: orderstatus created, deadletters created\n"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
	}
	if strings.Contains(stderr.String(), "warning") {
		t.Errorf("stderr has a warning, want none:\n%s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "invariants: all hold") {
		t.Errorf("stdout lacks the invariants line:\n%s", stdout.String())
	}
}

// TestStartCreatesTablesOnGivenStore: with a store given by
// OrderStore__connectionString (a fresh Azurite, no tables), Start creates
// the order table and the dead-letter table before it starts the
// functions; the fake handler creates nothing, so only the host can have.
// A store that cannot be reached is said once, and the start goes on.
func TestStartCreatesTablesOnGivenStore(t *testing.T) {
	t.Parallel()
	t.Run("fresh Azurite", func(t *testing.T) {
		az := testenv.StartAzurite(t)
		h, _ := testHost(t, appFiles(1), func(o *Options) {
			o.Settings[SettingStoreConnection] = az.ConnectionString()
			o.Settings["OrderStore__tableName"] = "givenorders"
			o.Settings["DEAD_LETTER_TABLE"] = "givendeadletters"
		})
		svc, err := aztables.NewServiceClientFromConnectionString(az.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		pager := svc.NewListTablesPager(nil)
		for pager.More() {
			page, err := pager.NextPage(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, tb := range page.Tables {
				got[*tb.Name] = true
			}
		}
		if !got["givenorders"] || !got["givendeadletters"] {
			t.Errorf("tables after Start: got %v, want givenorders and givendeadletters", got)
		}
		line, ok := h.StoreTables()
		if want := "tables: givenorders created, givendeadletters created"; !ok || line != want {
			t.Errorf("StoreTables: got %q, %v; want %q, true", line, ok, want)
		}
	})
	t.Run("store not reachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		h, _ := testHost(t, appFiles(1), func(o *Options) {
			o.Settings[SettingStoreConnection] = azurite.ConnectionString(addr)
		})
		line, ok := h.StoreTables()
		if ok || !strings.HasPrefix(line, "could not create tables orderstatus (") || !strings.Contains(line, "deadletters (") {
			t.Errorf("StoreTables: got %q, %v; want a failure naming orderstatus and deadletters", line, ok)
		}
	})
}
