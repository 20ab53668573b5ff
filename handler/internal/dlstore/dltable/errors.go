package dltable

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// ErrStorage matches a failure neither a dlstore sentinel nor the caller's context (HTTP 400...).
var ErrStorage = errors.New("dltable: request failed")

// classify sorts err, from an SDK call on table under callCtx (the caller's context
// plus the per-call deadline), into the dlstore sentinels through tableerr.Classify.
func classify(callCtx context.Context, table string, err error) error {
	e := tableerr.Classify(callCtx, table, err)
	if e == nil {
		return nil
	}
	switch e.Kind {
	case tableerr.Conflict:
		return e.Wrap(dlstore.ErrConflict)
	case tableerr.Exists:
		if e.Code == string(aztables.EntityAlreadyExists) {
			return e.Wrap(dlstore.ErrConflict)
		}
	case tableerr.NotFound:
		return e.Wrap(dlstore.ErrNotFound)
	case tableerr.TableNotFound, tableerr.Forbidden, tableerr.Unavailable:
		return e.Wrap(dlstore.ErrUnavailable)
	case tableerr.TooLarge:
		return e.Wrap(dlstore.ErrTooLarge)
	case tableerr.Canceled:
		return e.Wrap(callCtx.Err())
	}
	return e.Wrap(ErrStorage)
}

// exists reports an insert that found its row.
func exists(err error) bool { return tableerr.CodeOf(err) == string(aztables.EntityAlreadyExists) }
