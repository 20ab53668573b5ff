// Package logging builds the handler's slog.Logger: JSON lines, each written once,
// with the instance id the host reads (InstanceID). The Functions host logs stdout at
// Information and stderr at Warning if the line contains "warn" in any case, else Error
// (Azure/azure-functions-host, src/WebJobs.Script/Workers/ProcessManagement/WorkerProcess.cs,
// OnOutputDataReceived, ParseErrorMessageAndLog; HttpWorkerDescription's
// UseStdErrorStreamForErrorsOnly), so Warn and Error go to stderr, Error with "warn"
// written "\u0077arn". Line writes the same bytes faster.
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

// New returns a JSON logger for records at level or above: Debug and Info to
// out, Warn and Error to errOut (out when nil), each record in one Write.
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

// Environment variables holding the instance id (`orderstatus-dev dev` sets CONTAINER_NAME).
const (
	EnvWebsitePodName    = "WEBSITE_POD_NAME"
	EnvContainerName     = "CONTAINER_NAME"
	EnvWebsiteInstanceID = "WEBSITE_INSTANCE_ID"
)

// Environment variables naming the plan (Azure/azure-functions-host,
// src/WebJobs.Script/Environment/EnvironmentSettingNames.cs).
const (
	envWebsiteSKU         = "WEBSITE_SKU"
	envLegionServiceHost  = "LEGION_SERVICE_HOST"
	envManagedEnvironment = "MANAGED_ENVIRONMENT"
	skuFlexConsumption    = "FlexConsumption" // ScriptConstants.FlexConsumptionSku
)

// KeyInstanceID is the log key of the instance id.
const KeyInstanceID = "instance_id"

// InstanceID returns the host instance id as the host reads it (Azure/azure-functions-host,
// src/WebJobs.Script/Environment/EnvironmentExtensions.cs, GetInstanceId), or "": on Linux
// and Flex Consumption WEBSITE_POD_NAME, else CONTAINER_NAME; elsewhere WEBSITE_INSTANCE_ID.
func InstanceID(getenv func(string) string) string {
	if anyLinuxConsumption(getenv) {
		if id := getenv(EnvWebsitePodName); id != "" {
			return id
		}
		return getenv(EnvContainerName)
	}
	return getenv(EnvWebsiteInstanceID)
}

// anyLinuxConsumption is the host's IsAnyLinuxConsumption (same file): Atlas or Flex
// (IsFlexConsumptionSku, or Legion) outside a managed (Container Apps) environment.
func anyLinuxConsumption(getenv func(string) string) bool {
	set := func(k string) bool { return getenv(k) != "" }
	appService := set(EnvWebsiteInstanceID)
	atlas := !appService && set(EnvContainerName) && !set(envLegionServiceHost)
	legion := !appService && (set(EnvContainerName) || set(EnvWebsitePodName)) && set(envLegionServiceHost)
	flex := strings.EqualFold(getenv(envWebsiteSKU), skuFlexConsumption) || legion
	return (atlas || flex) && !set(envManagedEnvironment)
}

// WithInstance returns log with instance_id on every record, or log when id is "".
func WithInstance(log *slog.Logger, id string) *slog.Logger {
	if id == "" {
		return log
	}
	return log.With(KeyInstanceID, id)
}

// handler sends each record to the sink of its level and holds what Line needs.
type handler struct {
	level           slog.Leveler
	info, warn, err sink
	// pre is the With attributes as slog's JSON writes them; fast is false when Line can't.
	pre  []byte
	fast bool
}

// sink is one stream: slog's JSON handler on it and, for Line, its writer.
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

// Locked returns w with its Writes serialized, each whole, never interleaved.
func Locked(w io.Writer) io.Writer { return &lockedWriter{w: w} }

// lockedWriter serializes the Writes of slog's handlers and of Line on one stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sameWriter reports whether a and b are the same writer (one lock for both).
func sameWriter(a, b io.Writer) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// noWarn escapes the w or W of every "warn" (any case) as \u0077 or \u0057, keeping
// the JSON's decoded content; a record is one Write, so no "warn" straddles two.
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

// isWarnAt reports whether p[i:] starts with "warn" in any ASCII case (OrdinalIgnoreCase).
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
