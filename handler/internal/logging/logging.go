// Package logging builds the handler's one slog.Logger: JSON lines, each
// written once, to the stream from which the Functions host gives it the
// record's level, and the instance id the host itself reads (see
// InstanceID).
//
// How the host classifies a custom handler's output (Azure/azure-functions-host,
// src/WebJobs.Script/Workers/ProcessManagement/WorkerProcess.cs,
// OnOutputDataReceived and ParseErrorMessageAndLog; HttpWorkerDescription
// sets UseStdErrorStreamForErrorsOnly to true for custom handlers): every
// stdout line is logged at Information; a stderr line is logged at Warning
// if it contains "warn" in any case, else at Error. Both reach Application
// Insights as traces (category Host.Function.Console, the line in
// traces.message), so a line written to both streams is counted twice.
// New therefore writes:
//
//   - Debug and Info records to stdout (Information);
//   - Warn records to stderr; their "level":"WARN" makes them Warning;
//   - Error records to stderr with every "warn" (any case) inside their
//     JSON strings written as "\u0077arn", which a JSON reader decodes to
//     the same text but the host's substring test does not match, so that
//     an error whose message says "warning" is still logged as an Error.
//
// Line writes a record with the same bytes, on the same stream, without
// slog's per-record work: for the line the handler writes per message.
package logging

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// New returns a JSON logger writing records at level or above: Debug and
// Info to out, Warn and Error to errOut, each record exactly once, each
// with one Write. With a nil errOut every record goes to out. Its lines
// are slog's JSON handler's; Line writes the same bytes faster.
func New(out, errOut io.Writer, level slog.Leveler) *slog.Logger {
	if level == nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	o := &lockedWriter{w: out}
	h := &handler{level: level, fast: true}
	h.info = sink{json: slog.NewJSONHandler(o, opts), w: o}
	if errOut == nil {
		h.warn, h.err = h.info, h.info
		return slog.New(h)
	}
	e := o
	if !sameWriter(out, errOut) {
		e = &lockedWriter{w: errOut}
	}
	h.warn = sink{json: slog.NewJSONHandler(e, opts), w: e}
	h.err = sink{json: slog.NewJSONHandler(noWarn{e}, opts), w: noWarn{e}}
	return slog.New(h)
}

// HostLevel is the level the Functions host gives a line a custom handler
// wrote, by the rule of WorkerProcess.ParseErrorMessageAndLog (see the
// package comment): stdout is Information; stderr is Warning when the line
// contains "warn" in any case, else Error.
func HostLevel(line string, stderr bool) slog.Level {
	switch {
	case !stderr:
		return slog.LevelInfo
	case containsWarn([]byte(line)):
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// Environment variables that hold the instance id. `orderstatus-dev dev` sets
// CONTAINER_NAME for each instance it runs.
const (
	EnvWebsitePodName    = "WEBSITE_POD_NAME"
	EnvContainerName     = "CONTAINER_NAME"
	EnvWebsiteInstanceID = "WEBSITE_INSTANCE_ID"
)

// Environment variables that tell the host which plan it runs on
// (Azure/azure-functions-host, src/WebJobs.Script/Environment/
// EnvironmentSettingNames.cs).
const (
	envWebsiteSKU         = "WEBSITE_SKU"
	envLegionServiceHost  = "LEGION_SERVICE_HOST"
	envManagedEnvironment = "MANAGED_ENVIRONMENT"
	skuFlexConsumption    = "FlexConsumption" // ScriptConstants.FlexConsumptionSku
)

// KeyInstanceID is the log key of the instance id.
const KeyInstanceID = "instance_id"

// InstanceID returns the id of the Functions host instance this process
// runs on, read as the host reads it (Azure/azure-functions-host,
// src/WebJobs.Script/Environment/EnvironmentExtensions.cs,
// GetInstanceId): on Linux Consumption and Flex Consumption
// (IsAnyLinuxConsumption) WEBSITE_POD_NAME, else CONTAINER_NAME, never
// WEBSITE_INSTANCE_ID; on every other plan WEBSITE_INSTANCE_ID only. ""
// when the plan's variables are not set (a plain local run).
func InstanceID(getenv func(string) string) string {
	if anyLinuxConsumption(getenv) {
		if id := getenv(EnvWebsitePodName); id != "" {
			return id
		}
		return getenv(EnvContainerName)
	}
	return getenv(EnvWebsiteInstanceID)
}

// anyLinuxConsumption is the host's IsAnyLinuxConsumption (same file):
// Linux Consumption on Atlas or Flex Consumption, outside a managed (Container
// Apps) environment. Atlas: not App Service (no WEBSITE_INSTANCE_ID), a
// CONTAINER_NAME, no LEGION_SERVICE_HOST. Flex (IsFlexConsumptionSku):
// WEBSITE_SKU FlexConsumption in any case, or Legion: not App Service, a
// CONTAINER_NAME or WEBSITE_POD_NAME, and a LEGION_SERVICE_HOST.
func anyLinuxConsumption(getenv func(string) string) bool {
	set := func(k string) bool { return getenv(k) != "" }
	appService := set(EnvWebsiteInstanceID)
	atlas := !appService && set(EnvContainerName) && !set(envLegionServiceHost)
	legion := !appService && (set(EnvContainerName) || set(EnvWebsitePodName)) && set(envLegionServiceHost)
	flex := strings.EqualFold(getenv(envWebsiteSKU), skuFlexConsumption) || legion
	return (atlas || flex) && !set(envManagedEnvironment)
}

// WithInstance returns log with the instance_id attribute on every record,
// or log itself when id is "".
func WithInstance(log *slog.Logger, id string) *slog.Logger {
	if id == "" {
		return log
	}
	return log.With(KeyInstanceID, id)
}

// handler is the logger's slog.Handler: it sends each record to the sink
// of its level, and holds what Line needs to write a record without slog
// (see line.go).
type handler struct {
	level           slog.Leveler
	info, warn, err sink
	// pre is the logger's With attributes as slog's JSON handler writes
	// them, each with its leading comma; fast is false once one of them
	// (or a group) is something Line does not encode, and then Line
	// goes through slog.
	pre  []byte
	fast bool
}

// sink is one stream: slog's JSON handler on it and, for Line, the
// writer under it (the same lock, and for errors the same rewrite).
type sink struct {
	json slog.Handler
	w    io.Writer
}

func (h *handler) sink(l slog.Level) *sink {
	switch {
	case l >= slog.LevelError:
		return &h.err
	case l >= slog.LevelWarn:
		return &h.warn
	default:
		return &h.info
	}
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	return h.sink(r.Level).json.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	h2 := *h
	h2.info.json, h2.warn.json, h2.err.json = h.info.json.WithAttrs(as), h.warn.json.WithAttrs(as), h.err.json.WithAttrs(as)
	h2.pre = slices.Clip(h.pre)
	for _, a := range as {
		var ok bool
		if h2.pre, ok = appendAttr(h2.pre, a); !ok {
			h2.fast = false
		}
	}
	return &h2
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.info.json, h2.warn.json, h2.err.json = h.info.json.WithGroup(name), h.warn.json.WithGroup(name), h.err.json.WithGroup(name)
	h2.fast = false
	return &h2
}

// Locked returns w with its Writes serialized: each Write is whole, never
// interleaved with another's, whichever goroutines call it.
func Locked(w io.Writer) io.Writer { return &lockedWriter{w: w} }

// lockedWriter serializes the Writes of slog's handlers and of Line on
// one stream: each line is one Write, never interleaved with another.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sameWriter reports whether a and b are the same writer (then one lock
// guards both streams).
func sameWriter(a, b io.Writer) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// noWarn writes JSON lines with the w or W of every "warn" (any case)
// escaped as \u0077 or \u0057. In a JSON line a letter can only stand
// inside a string (keys included) or in true, false and null, and no
// escape sequence contains a w, so the rewrite keeps the line valid JSON
// with the same decoded content. slog's JSON handler and Line write each
// record with one Write, so a "warn" never straddles two calls.
type noWarn struct{ w io.Writer }

func (n noWarn) Write(p []byte) (int, error) {
	if !containsWarn(p) {
		return n.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); i++ {
		if (p[i] == 'w' || p[i] == 'W') && isWarnAt(p, i) {
			if p[i] == 'w' {
				out = append(out, `\u0077`...)
			} else {
				out = append(out, `\u0057`...)
			}
			continue
		}
		out = append(out, p[i])
	}
	if _, err := n.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func containsWarn(p []byte) bool {
	for i := range p {
		if isWarnAt(p, i) {
			return true
		}
	}
	return false
}

// isWarnAt reports whether p[i:] starts with "warn" in any case (ASCII, as
// the host's OrdinalIgnoreCase comparison of these letters).
func isWarnAt(p []byte, i int) bool {
	if i+4 > len(p) {
		return false
	}
	for j, c := range []byte("warn") {
		if p[i+j]|0x20 != c {
			return false
		}
	}
	return true
}
