package cost

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// HostLogging is what host.json's logging section decides about the
// telemetry the Functions host sends to Application Insights.
type HostLogging struct {
	// Levels is logging.logLevel: category prefix -> minimum level, with
	// "default" for every other category.
	Levels map[string]string
	// Sampling is applicationInsights.samplingSettings.isEnabled (the
	// host's default is on); ExcludedTypes its excludedTypes.
	Sampling      bool
	ExcludedTypes []string
	// DependencyTracking is applicationInsights.enableDependencyTracking
	// (default on).
	DependencyTracking bool
}

// The levels of Microsoft.Extensions.Logging, lowest first.
var levels = []string{"trace", "debug", "information", "warning", "error", "critical", "none"}

func levelRank(l string) int { return slices.Index(levels, strings.ToLower(l)) }

// Writes reports whether a record of category at level passes host.json's
// filter: the rule of the longest logLevel key the category starts with
// (case-insensitive, as Microsoft.Extensions.Logging selects a rule), else
// "default", else Information (the host's own default).
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

// Record is one kind of telemetry item the Functions host writes to
// Application Insights for an execution, with the category and level it
// is logged at in the host's source: Azure/azure-webjobs-sdk at f79ea0bf
// (FunctionExecutor.cs, Loggers/FunctionInstanceLogger.cs,
// Loggers/Logger/LoggerExtensions.cs, ApplicationInsightsLogger.cs) and
// Azure/azure-functions-host at 89dc438d
// (Workers/Http/DefaultHttpWorkerService.cs, WorkerConsoleLogService.cs,
// WorkerConstants.cs).
type Record struct {
	Name string
	// Category is the logger category; "<fn>" stands for the function's
	// name.
	Category, Level string
	// Table is where the item lands in the classic schema.
	Table string
	// PerExecution is how many such items one lone execution causes.
	PerExecution float64
	// Bytes is the key of prices.json's assumed size of one item.
	Bytes string
	// HandlerLine: the item carries one of the handler's stdout lines,
	// measured byte for byte; Bytes is then the record's other columns.
	HandlerLine bool
	// TriggerDetails: written only for triggers that report details (the
	// Service Bus trigger does; the timer trigger of the sweeper does not
	// when on schedule).
	TriggerDetails bool
}

// HostRecords are the items the host writes per execution of a function
// of this app, successful, at low traffic.
var HostRecords = []Record{
	// FunctionExecutor logs the result on the Host.Results category
	// (LogCategories.Results), Information on success, Error on failure;
	// ApplicationInsightsLogger turns it into a request.
	{Name: "request (the execution's result)", Category: "Host.Results", Level: "Information", Table: "requests", PerExecution: 1, Bytes: AssumeRequestRecordBytes},
	// FunctionInstanceLogger, category Function.<fn>: "Executing '...'",
	// then "Trigger Details: ..." when the trigger gives details, then
	// "Executed '...' (Succeeded, ...)"; Information (a failure's Executed
	// is Error).
	{Name: "trace Executing", Category: "Function.<fn>", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeHostTraceBytes},
	{Name: "trace Trigger Details", Category: "Function.<fn>", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeHostTraceBytes, TriggerDetails: true},
	{Name: "trace Executed", Category: "Function.<fn>", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeHostTraceBytes},
	// DefaultHttpWorkerService logs each line of the answer's Logs with
	// LogInformation on the invocation's ILogger, category
	// Function.<fn>.User (ILoggerBinding). The handler answers one line.
	{Name: "trace of the answer's Logs line", Category: "Function.<fn>.User", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeHostTraceBytes},
	// WorkerConsoleLogService logs every stdout line of the handler on
	// Host.Function.Console at Information.
	{Name: "trace of the handler's stdout line", Category: "Host.Function.Console", Level: "Information", Table: "traces", PerExecution: 1, Bytes: AssumeTraceOverheadBytes, HandlerLine: true},
	// FunctionResultAggregator flushes every 30 s (FlushTimeout) on
	// Host.Aggregator at Information; ApplicationInsightsLogger writes one
	// metric per field: Count, Successes, Failures, SuccessRate,
	// AverageDuration, MaxDuration, MinDuration. At low traffic every
	// execution is alone in its 30 s window.
	{Name: "customMetrics aggregates", Category: "Host.Aggregator", Level: "Information", Table: "customMetrics", PerExecution: 7, Bytes: AssumeMetricRecordBytes},
}

// HostBytes is what the host sends per execution under h, beyond the
// handler's own line bytes (lines: the handler's stdout lines per
// execution, each carried in a trace whose other columns are counted
// here). Sampling does not reduce it: adaptive sampling keeps every item
// below its target of 20 items a second per instance (the host's
// MaxTelemetryItemsPerSecond, ApplicationInsightsLoggerOptionsSetup.cs),
// which a low-traffic deployment never reaches. Dependencies are not
// counted: with enableDependencyTracking off (this repository's host.json)
// the host writes none.
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

// HandlerLinesKept reports whether the handler's stdout lines at
// Information reach Application Insights under h.
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
