// Package logging builds the handler's one slog.Logger: JSON lines on stdout
// (the Functions host logs them at Information), and failures (records at
// Error) also on stderr, which the host logs as errors.
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
