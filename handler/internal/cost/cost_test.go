package cost

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func repoPrices(t *testing.T) Prices {
	t.Helper()
	p, err := Load(filepath.Join("..", "..", "..", "infra", "prices.json"))
	if err != nil {
		t.Fatalf("the repository's prices file: %v", err)
	}
	return p
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestBillable(t *testing.T) {
	p := repoPrices(t)
	for _, tt := range []struct{ exec, want float64 }{
		{0.004, 1.0}, {0.999, 1.0}, {1.0, 1.0}, {1.01, 1.1}, {1.1, 1.1}, {2.35, 2.4}, {0, 1.0},
	} {
		if got := p.Billable(tt.exec); !near(got, tt.want) {
			t.Errorf("Billable(%v) = %v, want %v (1,000 ms minimum, then 100 ms steps)", tt.exec, got, tt.want)
		}
	}
}

func TestPerMillion(t *testing.T) {
	p := repoPrices(t)
	u := PerMessage{Executions: 1.25, ExecSeconds: 0.004, ServiceBusOps: 6, TableTransactions: 1.1, LogBytes: 300}
	par := Params{InstanceMemoryMB: 2048}
	got := p.PerMillion(u, par)
	// Worked by hand from the formulas in the package doc.
	execs := 1.25e6
	wantFn := execs/1e6*0.40 + execs*2*1.0*0.000026
	wantSB := 6.0 * 0.80
	wantSt := 1.1e6 / 1e4 * 0.00036
	wantLog := (300e6 + execs*1400) / 1e9 * 2.30
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"functions", got.Functions, wantFn}, {"service bus", got.ServiceBus, wantSB}, {"storage", got.Storage, wantSt}, {"logs", got.Logs, wantLog}} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	t.Run("512 MB is a quarter of the execution time", func(t *testing.T) {
		small := p.PerMillion(u, Params{InstanceMemoryMB: 512})
		gbs := func(b Breakdown) float64 { return b.Functions - execs/1e6*0.40 }
		if !near(gbs(small)*4, gbs(got)) {
			t.Errorf("GB-s cost at 512 MB = %v, at 2048 MB = %v; want a quarter", gbs(small), gbs(got))
		}
	})
	t.Run("a quiet host drops the host's telemetry", func(t *testing.T) {
		q := p.PerMillion(u, Params{InstanceMemoryMB: 2048, QuietHost: true})
		if !near(q.Logs, 300e6/1e9*2.30) {
			t.Errorf("logs with a quiet host = %v, want the handler's own bytes only", q.Logs)
		}
	})
}

func TestIdleMonth(t *testing.T) {
	p := repoPrices(t)
	s := Sweep{ExecSeconds: 3.2, ServiceBusOps: 9, TableTransactions: 2, LogBytes: 1200}
	got := p.IdleMonth(Params{InstanceMemoryMB: 2048, SweepsPerMonth: 8760}, s)
	wantFn := 8760/1e6*0.40 + 8760*2*3.2*0.000026
	if !near(got.Functions, wantFn) {
		t.Errorf("functions = %v, want %v", got.Functions, wantFn)
	}
	if !near(got.ServiceBus, 730*0.0135) {
		t.Errorf("service bus = %v, want the base charge %v (sweeper operations are within the included 13M)", got.ServiceBus, 730*0.0135)
	}
	withAR := p.IdleMonth(Params{InstanceMemoryMB: 2048, SweepsPerMonth: 8760, AlwaysReadyInstances: 1}, s)
	if d := withAR.Functions - got.Functions; !near(d, 2*730*3600*0.000004) {
		t.Errorf("one always-ready instance adds %v, want %v", d, 2*730*3600*0.000004)
	}
}

func TestParseRefusesIncompleteFiles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "infra", "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []string{`"source": "learn.microsoft.com/azure/azure-functions/functions-consumption-costs (Flex Consumption worked example: on-demand execution rate $0.000026 per GB-s)"`, `"region": "eastus",`, `"flex_minimum_billable_seconds"`} {
		bad := strings.Replace(string(b), cut, map[bool]string{true: `"source": ""`, false: ""}[strings.HasPrefix(cut, `"source"`)], 1)
		if bad == string(b) {
			t.Fatalf("mutation %q did not apply", cut)
		}
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse accepted a file without %s", cut)
		}
	}
}

func TestRunsPerMonth(t *testing.T) {
	for _, tt := range []struct {
		sched string
		want  float64
	}{{"0 */5 * * * *", 730 * 12}, {"0 0 * * * *", 730}, {"0 */15 * * * *", 730 * 4}} {
		got, err := RunsPerMonth(tt.sched, 730)
		if err != nil || got != tt.want {
			t.Errorf("RunsPerMonth(%q) = %v, %v; want %v", tt.sched, got, err, tt.want)
		}
	}
	if _, err := RunsPerMonth("nope", 730); err == nil {
		t.Error("a bad schedule was accepted")
	}
}

func TestReadParamsFromTheRepository(t *testing.T) {
	par, err := ReadParams(filepath.Join("..", "..", ".."), 730)
	if err != nil {
		t.Fatal(err)
	}
	if par.InstanceMemoryMB != 512 && par.InstanceMemoryMB != 2048 && par.InstanceMemoryMB != 4096 {
		t.Errorf("instance memory %d MB is not one Flex offers", par.InstanceMemoryMB)
	}
	if par.SweepsPerMonth <= 0 {
		t.Errorf("sweeps per month = %v", par.SweepsPerMonth)
	}
}

func TestQuietHost(t *testing.T) {
	for _, tt := range []struct {
		json string
		want bool
	}{
		{`{"logging":{"logLevel":{"default":"Information","Function":"Information"}}}`, false},
		{`{"logging":{"logLevel":{"default":"Information","Function":"Warning","Host.Results":"Warning"}}}`, true},
		{`{"logging":{"logLevel":{"default":"Warning"}}}`, true},
		{`{"logging":{"logLevel":{"default":"Warning","Host.Results":"Information"}}}`, false},
	} {
		got, err := quietHost([]byte(tt.json))
		if err != nil || got != tt.want {
			t.Errorf("quietHost(%s) = %v, %v; want %v", tt.json, got, err, tt.want)
		}
	}
}

func TestReadParamsPrefersWhatAzdDeploys(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "infra"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("infra/main.bicep", "param instanceMemoryMB int = 2048\nparam deadLetterSweepSchedule string = '0 */15 * * * *'\n")
	write("host.json", `{"logging":{"logLevel":{"default":"Information"}}}`)
	for _, tt := range []struct {
		params string
		want   int
	}{
		{`{"parameters":{"instanceMemoryMB":{"value":"${FUNCTION_INSTANCE_MEMORY_MB=4096}"}}}`, 4096},
		{`{"parameters":{"instanceMemoryMB":{"value":512}}}`, 512},
		{`{"parameters":{}}`, 2048},
	} {
		write("infra/main.parameters.json", tt.params)
		par, err := ReadParams(dir, 730)
		if err != nil || par.InstanceMemoryMB != tt.want || par.SweepsPerMonth != 730*4 {
			t.Errorf("%s: %+v, %v; want %d MB and 2920 sweeps", tt.params, par, err, tt.want)
		}
	}
	write("infra/main.parameters.json", `{"parameters":{"instanceMemoryMB":{"value":"${FUNCTION_INSTANCE_MEMORY_MB}"}}}`)
	if _, err := ReadParams(dir, 730); err == nil {
		t.Error("a parameter with no default was accepted")
	}
}
