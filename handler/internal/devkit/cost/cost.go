// Package cost is the cost model of `make bench`: what a deployment costs
// per million messages and per idle month on Azure's list prices, from what
// the system measurably does and the deployment's own parameters. The
// prices live in infra/prices.json, each with its region, date and source.
//
//	Functions (Flex Consumption): executions x price, plus instance GB x
//	    billable seconds (a lone execution bills at least 1,000 ms, else
//	    rounds up to 100 ms; flex-consumption-plan, Billing).
//	Service Bus (Standard): operations past the included 13M a month,
//	    plus the base charge in an idle month.
//	Table Storage: transactions; stored data in an idle month.
//	Log Analytics: bytes ingested (handler lines and HostRecords) x price.
package cost

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// Price is one list price.
type Price struct {
	USD    float64 `json:"usd"`
	Unit   string  `json:"unit"`
	Source string  `json:"source"`
}

// Fact is a number the model uses that is not a price.
type Fact struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
}

// Prices is infra/prices.json.
type Prices struct {
	Region      string           `json:"region"`
	Currency    string           `json:"currency"`
	Date        string           `json:"date"`
	Prices      map[string]Price `json:"prices"`
	Facts       map[string]Fact  `json:"facts"`
	Assumptions map[string]Fact  `json:"assumptions"`
}

// The keys of prices.json the model reads; Load refuses a file that lacks one.
const (
	PriceFlexGBSecond         = "flex_on_demand_gb_second"
	PriceFlexPerMillionExec   = "flex_on_demand_per_million_executions"
	PriceFlexAlwaysReadyGBSec = "flex_always_ready_baseline_gb_second"
	PriceSBBasePerHour        = "service_bus_standard_base_per_hour"
	PriceSBPerMillionOps      = "service_bus_standard_per_million_operations"
	PriceTablePer10k          = "table_per_10k_transactions"
	PriceTableGBMonth         = "table_gb_month"
	PriceLogPerGB             = "log_analytics_per_gb"

	FactMinBillableSeconds = "flex_minimum_billable_seconds"
	FactRoundingSeconds    = "flex_billable_rounding_seconds"
	FactSBIncludedOps      = "service_bus_included_operations_per_month"
	FactHoursPerMonth      = "hours_per_month"

	AssumeRequestRecordBytes = "host_request_record_bytes"
	AssumeHostTraceBytes     = "host_trace_record_bytes"
	AssumeTraceOverheadBytes = "host_trace_overhead_bytes"
	AssumeMetricRecordBytes  = "host_metric_record_bytes"
	AssumeStoredGBIdle       = "stored_gb_idle"
)

var (
	priceKeys = []string{PriceFlexGBSecond, PriceFlexPerMillionExec, PriceFlexAlwaysReadyGBSec, PriceSBBasePerHour,
		PriceSBPerMillionOps, PriceTablePer10k, PriceTableGBMonth, PriceLogPerGB}
	factKeys   = []string{FactMinBillableSeconds, FactRoundingSeconds, FactSBIncludedOps, FactHoursPerMonth}
	assumeKeys = []string{AssumeRequestRecordBytes, AssumeHostTraceBytes, AssumeTraceOverheadBytes, AssumeMetricRecordBytes, AssumeStoredGBIdle}
)

// Load reads a prices file and checks it has every key the model needs, sourced.
func Load(path string) (Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Prices{}, fmt.Errorf("cost: %w", err)
	}
	return Parse(b)
}

// Parse reads the JSON of a prices file (see Load).
func Parse(b []byte) (Prices, error) {
	var p Prices
	if err := json.Unmarshal(b, &p); err != nil {
		return Prices{}, fmt.Errorf("cost: prices: %w", err)
	}
	if p.Currency == "" || p.Region == "" || p.Date == "" {
		return Prices{}, fmt.Errorf("cost: prices: region, currency and date are required")
	}
	for _, k := range priceKeys {
		if v, ok := p.Prices[k]; !ok || v.Source == "" || v.USD < 0 || math.IsNaN(v.USD) {
			return Prices{}, fmt.Errorf("cost: prices: %q missing, negative or without a source", k)
		}
	}
	for _, set := range []struct {
		m    map[string]Fact
		keys []string
	}{{p.Facts, factKeys}, {p.Assumptions, assumeKeys}} {
		for _, k := range set.keys {
			if v, ok := set.m[k]; !ok || v.Source == "" || v.Value < 0 {
				return Prices{}, fmt.Errorf("cost: prices: %q missing, negative or without a source", k)
			}
		}
	}
	return p, nil
}

// Params are the deployment's settings the model depends on.
type Params struct {
	// InstanceMemoryMB is the Bicep's instanceMemoryMB.
	InstanceMemoryMB int
	// AlwaysReadyInstances is the Bicep's alwaysReadyInstances (0 if none).
	AlwaysReadyInstances int
	// SweepsPerMonth is how often the DeadLetterSweeper timer fires a month.
	SweepsPerMonth float64
	// Host is host.json's logging: which HostRecords reach Application Insights.
	Host HostLogging
}

// PerMessage is what one message costs in measurable units.
type PerMessage struct {
	// Executions: function executions per message, redeliveries and checks included.
	Executions float64
	// ExecSeconds is the mean wall time of one execution.
	ExecSeconds float64
	// ServiceBusOps: Service Bus API calls per message.
	ServiceBusOps float64
	// TableTransactions per message.
	TableTransactions float64
	// LogBytes the handler writes per message (stdout), in LogLines lines.
	LogBytes, LogLines float64
}

// Breakdown is a cost by service, in USD.
type Breakdown struct {
	Functions, ServiceBus, Storage, Logs float64
}

// Total is the sum.
func (b Breakdown) Total() float64 { return b.Functions + b.ServiceBus + b.Storage + b.Logs }

// Billable is the billable seconds of one lone execution of execSeconds.
func (p Prices) Billable(execSeconds float64) float64 {
	step := p.Facts[FactRoundingSeconds].Value
	billed := execSeconds
	if step > 0 {
		billed = math.Ceil(execSeconds/step-1e-9) * step
	}
	return math.Max(billed, p.Facts[FactMinBillableSeconds].Value)
}

func (p Prices) usd(k string) float64 { return p.Prices[k].USD }

// LogBytesPerMessage is what one message of u sends to Log Analytics under par.
func (p Prices) LogBytesPerMessage(u PerMessage, par Params) float64 {
	lines := 0.0
	if u.Executions > 0 {
		lines = u.LogLines / u.Executions
	}
	return handlerBytes(u.LogBytes, par) + u.Executions*p.HostBytes(par.Host, lines, true)
}

// handlerBytes is b if the host keeps the handler's stdout lines, else 0.
func handlerBytes(b float64, par Params) float64 {
	if !par.Host.HandlerLinesKept() {
		return 0
	}
	return b
}

// PerMillion is the cost of one million messages of u, each executed alone.
func (p Prices) PerMillion(u PerMessage, par Params) Breakdown {
	const n = 1e6
	gb := float64(par.InstanceMemoryMB) / 1024
	execs := u.Executions * n
	return Breakdown{
		Functions:  execs/1e6*p.usd(PriceFlexPerMillionExec) + execs*gb*p.Billable(u.ExecSeconds)*p.usd(PriceFlexGBSecond),
		ServiceBus: u.ServiceBusOps * n / 1e6 * p.usd(PriceSBPerMillionOps),
		Storage:    u.TableTransactions * n / 1e4 * p.usd(PriceTablePer10k),
		Logs:       p.LogBytesPerMessage(u, par) * n / 1e9 * p.usd(PriceLogPerGB),
	}
}

// Sweep is what one idle DeadLetterSweeper run costs in measurable units.
type Sweep struct {
	ExecSeconds       float64
	ServiceBusOps     float64
	TableTransactions float64
	LogBytes          float64
	LogLines          float64
}

// IdleMonth is the cost of a month with no messages: Service Bus's base
// charge, the sweeper's runs, the data at rest and always-ready instances.
func (p Prices) IdleMonth(par Params, s Sweep) Breakdown {
	gb := float64(par.InstanceMemoryMB) / 1024
	hours := p.Facts[FactHoursPerMonth].Value
	runs := par.SweepsPerMonth
	fn := runs/1e6*p.usd(PriceFlexPerMillionExec) + runs*gb*p.Billable(s.ExecSeconds)*p.usd(PriceFlexGBSecond)
	fn += float64(par.AlwaysReadyInstances) * gb * hours * 3600 * p.usd(PriceFlexAlwaysReadyGBSec)
	sb := hours * p.usd(PriceSBBasePerHour)
	if ops := runs * s.ServiceBusOps; ops > p.Facts[FactSBIncludedOps].Value {
		sb += (ops - p.Facts[FactSBIncludedOps].Value) / 1e6 * p.usd(PriceSBPerMillionOps)
	}
	return Breakdown{
		Functions:  fn,
		ServiceBus: sb,
		Storage:    runs*s.TableTransactions/1e4*p.usd(PriceTablePer10k) + p.Assumptions[AssumeStoredGBIdle].Value*p.usd(PriceTableGBMonth),
		Logs:       runs * (handlerBytes(s.LogBytes, par) + p.HostBytes(par.Host, s.LogLines, false)) / 1e9 * p.usd(PriceLogPerGB),
	}
}
