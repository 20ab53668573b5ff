package dltable

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// ErrStorage is matched by failures that are no dlstore sentinel nor the
// caller's context: a request the service refused for good (HTTP 400...).
var ErrStorage = errors.New("dltable: request failed")

// classify sorts err, from an SDK call on table made with callCtx (the
// caller's context plus the per-call deadline), into the dlstore sentinels
// (tableerr.Classify reads the SDK's error). 412 and 409
// EntityAlreadyExists are ErrConflict; 404 is ErrNotFound; a missing
// table, 403 and whatever is worth retrying are ErrUnavailable; an entity
// too large is ErrTooLarge; the caller's context ending is its error.
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
