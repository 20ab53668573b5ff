// Package logging builds the handler's one slog.Logger: JSON lines on stdout
// (the Functions host logs them at Information), and failures (records at
// Error) also on stderr, which the host logs as errors. Every line carries
// the instance id of the Functions host instance the process runs on, when
// the platform sets one (see InstanceID).
package logging

import (
	"context"
	"io"
	"log/slog"
)

// New returns a JSON logger writing every record at level or above to out
// and records at Error also to errOut (when not nil).
func New(out, errOut io.Writer, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(out, opts)
	if errOut != nil {
		h = tee{all: h, errs: slog.NewJSONHandler(errOut, &slog.HandlerOptions{Level: slog.LevelError})}
	}
	return slog.New(h)
}

// Environment variables that hold the instance id, in the order the
// Functions host itself reads them (EnvironmentExtensions.GetInstanceId in
// azure-functions-host): Linux Consumption and Flex Consumption set
// CONTAINER_NAME, App Service plans and Windows set WEBSITE_INSTANCE_ID.
// `handler dev` sets CONTAINER_NAME for each instance it runs.
const (
	EnvContainerName     = "CONTAINER_NAME"
	EnvWebsiteInstanceID = "WEBSITE_INSTANCE_ID"
)

// KeyInstanceID is the log key of the instance id.
const KeyInstanceID = "instance_id"

// InstanceID returns the id of the Functions host instance this process
// runs on, as the host finds it: CONTAINER_NAME, else WEBSITE_INSTANCE_ID;
// "" when neither is set (a plain local run).
func InstanceID(getenv func(string) string) string {
	if id := getenv(EnvContainerName); id != "" {
		return id
	}
	return getenv(EnvWebsiteInstanceID)
}

// WithInstance returns log with the instance_id attribute on every record,
// or log itself when id is "".
func WithInstance(log *slog.Logger, id string) *slog.Logger {
	if id == "" {
		return log
	}
	return log.With(KeyInstanceID, id)
}

// tee sends every record to all and, from Error up, to errs too.
type tee struct{ all, errs slog.Handler }

func (t tee) Enabled(ctx context.Context, l slog.Level) bool { return t.all.Enabled(ctx, l) }

func (t tee) Handle(ctx context.Context, r slog.Record) error {
	err := t.all.Handle(ctx, r)
	if r.Level >= slog.LevelError {
		if err2 := t.errs.Handle(ctx, r.Clone()); err == nil {
			err = err2
		}
	}
	return err
}

func (t tee) WithAttrs(as []slog.Attr) slog.Handler {
	return tee{all: t.all.WithAttrs(as), errs: t.errs.WithAttrs(as)}
}

func (t tee) WithGroup(name string) slog.Handler {
	return tee{all: t.all.WithGroup(name), errs: t.errs.WithGroup(name)}
}
