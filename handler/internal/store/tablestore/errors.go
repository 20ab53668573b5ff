package tablestore

import (
	"context"
	"errors"

	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// ErrStorage matches a failure neither a sentinel nor the caller's context (HTTP 400...).
var ErrStorage = errors.New("tablestore: request failed")

// classify sorts err, from an SDK call for op under callCtx (the caller's context
// plus the per-call deadline), into the store sentinels through tableerr.Classify.
func classify(callCtx context.Context, op string, err error) error {
	e := tableerr.Classify(callCtx, "", err)
	if e == nil {
		return nil
	}
	switch e.Kind {
	case tableerr.Conflict:
		return e.Wrap(store.ErrConflict)
	case tableerr.Exists:
		if op == OpInsert {
			return e.Wrap(store.ErrConflict)
		}
	case tableerr.NotFound:
		return e.Wrap(store.ErrNotFound)
	case tableerr.TableNotFound, tableerr.Forbidden, tableerr.Unavailable:
		return e.Wrap(store.ErrTransient)
	case tableerr.Canceled:
		return e.Wrap(callCtx.Err())
	}
	return e.Wrap(ErrStorage)
}

// outcome names the result of a storage call for Options.Observe.
func outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, store.ErrConflict):
		return OutcomeConflict
	case errors.Is(err, store.ErrNotFound):
		return OutcomeNotFound
	case errors.Is(err, store.ErrTransient):
		return OutcomeTransient
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	}
	return OutcomeError
}
