package cost

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func repoPrices(t *testing.T) Prices {
	t.Helper()
	p, err := Load(filepath.Join("..", "..", "..", "..", "infra", "prices.json"))
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
	u := PerMessage{Executions: 1.25, ExecSeconds: 0.004, ServiceBusOps: 6, TableTransactions: 1.1, LogBytes: 300, LogLines: 1.25}
	par := Params{InstanceMemoryMB: 2048, Host: verbose}
	got := p.PerMillion(u, par)
	// Worked by hand from the formulas in the package doc.
	execs := 1.25e6
	wantFn := execs/1e6*0.40 + execs*2*1.0*0.000026
	wantSB := 6.0 * 0.80
	wantSt := 1.1e6 / 1e4 * 0.00036
	// Per execution, everything at Information: a request (600), four
	// host traces (4 x 400), the stdout line's trace columns (300), seven
	// aggregate metrics (7 x 300).
	wantLog := (300e6 + execs*(600+4*400+300+7*300)) / 1e9 * 2.30
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
	t.Run("the repository's host.json keeps the request and the handler's line", func(t *testing.T) {
		q := p.PerMillion(u, Params{InstanceMemoryMB: 2048, Host: repoHost(t)})
		if want := (300e6 + execs*(600+300)) / 1e9 * 2.30; !near(q.Logs, want) {
			t.Errorf("logs under host.json = %v, want %v (request + the handler's line)", q.Logs, want)
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
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "infra", "prices.json"))
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
	par, err := ReadParams(filepath.Join("..", "..", "..", ".."), 730)
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

// verbose is host.json with every category at Information.
var verbose = HostLogging{Levels: map[string]string{"default": "Information"}}

func repoHost(t *testing.T) HostLogging {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "host.json"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHostLogging(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHostLoggingWrites: the rule of the longest matching category prefix
// decides, else default, else Information.
func TestHostLoggingWrites(t *testing.T) {
	h := HostLogging{Levels: map[string]string{"default": "Warning", "Function": "Warning", "Function.OrderStatus.User": "Information",
		"Host.Results": "Information", "host.function.console": "Debug"}}
	for _, tt := range []struct {
		category, level string
		want            bool
	}{
		{"Host.Results", "Information", true},
		{"Host.Results", "Debug", false},
		{"Function.OrderStatus", "Information", false},
		{"Function.OrderStatus", "Error", true},
		{"Function.OrderStatus.User", "Information", true},
		{"Host.Function.Console", "Information", true},
		{"Host.Aggregator", "Information", false},
		{"Host.Aggregator", "Warning", true},
	} {
		if got := h.Writes(tt.category, tt.level); got != tt.want {
			t.Errorf("Writes(%s, %s) = %v, want %v", tt.category, tt.level, got, tt.want)
		}
	}
	if !(HostLogging{}).Writes("Anything", "Information") || (HostLogging{}).Writes("Anything", "Debug") {
		t.Error("without levels, want the host's default of Information")
	}
	if (HostLogging{Levels: map[string]string{"default": "None"}}).Writes("x", "Critical") {
		t.Error("None writes nothing")
	}
}

func TestHostBytes(t *testing.T) {
	p := repoPrices(t)
	for _, tt := range []struct {
		name, json     string
		triggerDetails bool
		want           float64
	}{
		{"everything at Information", `{"logging":{"logLevel":{"default":"Information"}}}`, true, 600 + 4*400 + 300 + 7*300},
		{"a timer: no trigger details", `{"logging":{"logLevel":{"default":"Information"}}}`, false, 600 + 3*400 + 300 + 7*300},
		{"no levels: the host's default", `{"logging":{}}`, true, 600 + 4*400 + 300 + 7*300},
		{"Function at Warning", `{"logging":{"logLevel":{"default":"Information","Function":"Warning"}}}`, true, 600 + 300 + 7*300},
		{"only requests and console", `{"logging":{"logLevel":{"default":"Warning","Host.Results":"Information","Host.Function.Console":"Information"}}}`, true, 600 + 300},
		{"all Warning", `{"logging":{"logLevel":{"default":"Warning"}}}`, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHostLogging([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.HostBytes(h, 1, tt.triggerDetails); !near(got, tt.want) {
				t.Errorf("HostBytes = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := ParseHostLogging([]byte(`{"logging":{"logLevel":{"Function":"Loud"}}}`)); err == nil {
		t.Error("an unknown level was accepted")
	}
}

// TestRepositoryHostJSON: the repository's host.json keeps exactly the
// records the alerts, runbooks and workbook read (requests, the handler's
// lines) and samples none of their types (infra/check proves the queries'
// side).
func TestRepositoryHostJSON(t *testing.T) {
	h := repoHost(t)
	if !h.Writes("Host.Results", "Information") || !h.HandlerLinesKept() {
		t.Errorf("host.json drops the requests or the handler's lines: %+v", h)
	}
	if h.Writes("Function.OrderStatus", "Information") || h.Writes("Host.Aggregator", "Information") {
		t.Errorf("host.json keeps the per-execution traces or aggregates no query reads: %+v", h)
	}
	if h.DependencyTracking {
		t.Error("host.json tracks dependencies, which no query reads")
	}
	for _, typ := range []string{"Request", "Trace", "Exception"} {
		if h.Sampling && !slices.Contains(h.ExcludedTypes, typ) {
			t.Errorf("sampling on, %s not excluded: %v", typ, h.ExcludedTypes)
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
