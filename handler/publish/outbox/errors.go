package outbox

import (
	"context"
	"errors"

	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// ErrStorage is matched by a request refused for good (400, 403 on a key).
var ErrStorage = errors.New("outbox: storage request failed")

// ErrTableNotFound is matched by a request on a missing table (404
// TableNotFound). It is ErrTransient too, as a new table may still be
// propagating, so Relay.Run waits for it.
var ErrTableNotFound = errors.New("outbox: table not found")

// classify maps err from an aztables call made with callCtx onto the
// sentinels via tableerr.Classify; anything unrecognised is ErrStorage.
func classify(callCtx context.Context, err error) error {
	e := tableerr.Classify(callCtx, "", err)
	if e == nil {
		return nil
	}
	switch e.Kind {
	case tableerr.Conflict, tableerr.Exists:
		return e.Wrap(ErrConflict)
	case tableerr.NotFound:
		return e.Wrap(ErrNotFound)
	case tableerr.TableNotFound:
		return e.Wrap(ErrTransient, ErrTableNotFound)
	case tableerr.Forbidden, tableerr.Unavailable:
		return e.Wrap(ErrTransient)
	case tableerr.TooLarge:
		return e.Wrap(ErrTooLarge)
	case tableerr.Canceled:
		return e.Wrap(callCtx.Err())
	}
	return e.Wrap(ErrStorage)
}
