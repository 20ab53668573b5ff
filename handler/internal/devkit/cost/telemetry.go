package cost

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// HostLogging is host.json's say over the host's Application Insights telemetry.
type HostLogging struct {
	// Levels is logging.logLevel: category prefix (or "default") -> minimum level.
	Levels map[string]string
	// Sampling is samplingSettings.isEnabled (default on); ExcludedTypes its excludedTypes.
	Sampling      bool
	ExcludedTypes []string
	// DependencyTracking is enableDependencyTracking (default on).
	DependencyTracking bool
}

// The levels of Microsoft.Extensions.Logging, lowest first.
var levels = []string{"trace", "debug", "information", "warning", "error", "critical", "none"}

func levelRank(l string) int { return slices.Index(levels, strings.ToLower(l)) }

// Writes reports whether a record of category at level passes host.json's
// filter: the longest matching logLevel key (case-insensitive, as
// Microsoft.Extensions.Logging selects a rule), else "default", else Information.
func (h HostLogging) Writes(category, level string) bool {
	min, best := "Information", -1
	if v, ok := h.Levels["default"]; ok {
		min = v
	}
	for k, v := range h.Levels {
		if k != "default" && len(k) > best && strings.HasPrefix(strings.ToLower(category), strings.ToLower(k)) {
			min, best = v, len(k)
		}
	}
	return levelRank(level) >= levelRank(min) && levelRank(level) < levelRank("none")
}

// Record is one kind of telemetry item the Functions host writes for an
// execution, with its category and level in the host's source:
// Azure/azure-webjobs-sdk at f79ea0bf (FunctionExecutor.cs,
// Loggers/FunctionInstanceLogger.cs, Loggers/Logger/LoggerExtensions.cs,
// ApplicationInsightsLogger.cs) and Azure/azure-functions-host at 89dc438d
// (Workers/Http/DefaultHttpWorkerService.cs, WorkerConsoleLogService.cs,
// WorkerConstants.cs).
type Record struct {
	Name string
	// Category is the logger category; "<fn>" stands for the function's name.
	Category, Level string
	// Table is where the item lands in the classic schema.
	Table string
	// PerExecution is how many such items one lone execution causes.
	PerExecution float64
	// Bytes is the key of prices.json's assumed size of one item.
	Bytes string
	// HandlerLine: the item carries a handler stdout line, measured; Bytes the rest.
	HandlerLine bool
	// TriggerDetails: written only for triggers that report details (Service Bus).
	TriggerDetails bool
}

// HostRecords are the items the host writes per successful execution at low traffic.
var HostRecords = []Record{
	// FunctionExecutor: Host.Results (LogCategories.Results), a request.
	{Name: "request (the execution's result)", Category: "Host.Results", Level: "Information", Table: "requests", PerExecution: 1, Bytes: AssumeRequestRecordBytes},
	// FunctionInstanceLogger, Function.<fn>: Executing, Trigger Details, Executed.
	{Name: "trace Executing", Category: "Function.<fn>", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeHostTraceBytes},
	{Name: "trace Trigger Details", Category: "Function.<fn>", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeHostTraceBytes, TriggerDetails: true},
	{Name: "trace Executed", Category: "Function.<fn>", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeHostTraceBytes},
	// DefaultHttpWorkerService: the answer's Logs, Function.<fn>.User (ILoggerBinding).
	{Name: "trace of the answer's Logs line", Category: "Function.<fn>.User", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeHostTraceBytes},
	// WorkerConsoleLogService: each stdout line, Host.Function.Console.
	{Name: "trace of the handler's stdout line", Category: "Host.Function.Console", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeTraceOverheadBytes, HandlerLine: true},
	// FunctionResultAggregator: every 30 s (FlushTimeout), Host.Aggregator, 7 metrics.
	{Name: "customMetrics aggregates", Category: "Host.Aggregator", Level: "Information", Table: "customMetrics", PerExecution: 7, Bytes: AssumeMetricRecordBytes},
}

// HostBytes is what the host sends per execution under h beyond the
// handler's line bytes (lines per execution). Sampling does not reduce it:
// low traffic stays below the host's MaxTelemetryItemsPerSecond of 20
// (ApplicationInsightsLoggerOptionsSetup.cs); dependency tracking is off.
func (p Prices) HostBytes(h HostLogging, lines float64, triggerDetails bool) float64 {
	var n float64
	for _, r := range HostRecords {
		if !h.Writes(strings.ReplaceAll(r.Category, "<fn>", "OrderStatus"), r.Level) || (r.TriggerDetails && !triggerDetails) {
			continue
		}
		count := r.PerExecution
		if r.HandlerLine {
			count = lines
		}
		n += count * p.Assumptions[r.Bytes].Value
	}
	return n
}

// HandlerLinesKept reports whether the handler's stdout lines reach Application Insights.
func (h HostLogging) HandlerLinesKept() bool { return h.Writes("Host.Function.Console", "Information") }

// ParseHostLogging reads host.json's logging section.
func ParseHostLogging(hostJSON []byte) (HostLogging, error) {
	var f struct {
		Logging struct {
			LogLevel            map[string]string `json:"logLevel"`
			ApplicationInsights struct {
				EnableDependencyTracking *bool `json:"enableDependencyTracking"`
				SamplingSettings         struct {
					IsEnabled     *bool  `json:"isEnabled"`
					ExcludedTypes string `json:"excludedTypes"`
				} `json:"samplingSettings"`
			} `json:"applicationInsights"`
		} `json:"logging"`
	}
	if err := json.Unmarshal(hostJSON, &f); err != nil {
		return HostLogging{}, fmt.Errorf("cost: host.json: %w", err)
	}
	h := HostLogging{Levels: f.Logging.LogLevel, Sampling: true, DependencyTracking: true}
	for k, v := range h.Levels {
		if levelRank(v) < 0 {
			return HostLogging{}, fmt.Errorf("cost: host.json: logging.logLevel.%s = %q is not a log level", k, v)
		}
	}
	ai := f.Logging.ApplicationInsights
	if ai.SamplingSettings.IsEnabled != nil {
		h.Sampling = *ai.SamplingSettings.IsEnabled
	}
	if ai.EnableDependencyTracking != nil {
		h.DependencyTracking = *ai.EnableDependencyTracking
	}
	for t := range strings.SplitSeq(ai.SamplingSettings.ExcludedTypes, ";") {
		if t = strings.TrimSpace(t); t != "" {
			h.ExcludedTypes = append(h.ExcludedTypes, t)
		}
	}
	return h, nil
}
