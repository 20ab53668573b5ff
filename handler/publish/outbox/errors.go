package outbox

import (
	"context"
	"errors"

	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// ErrStorage is matched by a request the service refused for good (400,
// 403 on a key, ...): neither a sentinel nor the caller's context.
var ErrStorage = errors.New("outbox: storage request failed")

// ErrTableNotFound is matched by a request on a table that does not exist
// (404 TableNotFound). Such an error is ErrTransient too, since a table
// can still be propagating on a fresh deployment, so Relay.Run waits for
// it; a caller for whom the table must exist already (an operator's
// command, after Table.Check) reports it instead.
var ErrTableNotFound = errors.New("outbox: table not found")

// classify sorts err, the result of an aztables call made with callCtx,
// into the sentinels (tableerr.Classify reads the SDK's error, the failed
// operation's inside a transaction's answer included): 412 and 409 are
// ErrConflict; 404 is ErrNotFound; a missing table is ErrTransient and
// ErrTableNotFound; 403 (a role still propagating) and whatever is worth
// retrying are ErrTransient; an entity too large is ErrTooLarge; the
// caller's context ending is its error; anything else is ErrStorage.
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
