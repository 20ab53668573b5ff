package tablestore

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// classified is an SDK error sorted into a store sentinel (kind). It
// matches the sentinel and the SDK error with errors.Is and errors.As, and
// keeps its message short: "store: condition failed (HTTP 412
// UpdateConditionNotSatisfied)".
type classified struct {
	kind   error
	detail string
	err    error
}

// ErrStorage is matched by failures that are neither a sentinel nor the
// caller's context: a request the service refused for good (HTTP 400...).
var ErrStorage = errors.New("tablestore: request failed")

func (e *classified) Error() string   { return e.kind.Error() + " (" + e.detail + ")" }
func (e *classified) Unwrap() []error { return []error{e.kind, e.err} }

// classify sorts err, the result of an SDK call for op made with callCtx
// (the caller's context plus the per-call deadline), into the store
// sentinels. It is the only place that reads SDK errors.
//
//   - 412, and 409 on insert: store.ErrConflict;
//   - 404 (except TableNotFound, a deployment error): store.ErrNotFound;
//   - 408, 429, 5xx, the per-call deadline, connection failures:
//     store.ErrTransient;
//   - 403 and TableNotFound: store.ErrTransient too. Both are what a fresh
//     deployment shows while a role assignment propagates or the table is
//     being created; retried within the call and then by redelivery, a
//     lasting one ends in the dead-letter queue, where the alert and the
//     runbook take over, instead of burning every delivery in milliseconds;
//   - the caller's context ending: that context's error;
//   - anything else (400, 409 on replace, ...): ErrStorage, not retryable.
//
// The text of a classified error is one line and never carries the
// request's query string (which may hold a SAS token).
func classify(callCtx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		kind := statusKind(op, re.StatusCode, re.ErrorCode)
		if kind == nil {
			kind = ErrStorage
		}
		return &classified{kind: kind, detail: fmt.Sprintf("HTTP %d %s", re.StatusCode, re.ErrorCode), err: err}
	}
	if cause := context.Cause(callCtx); cause != nil {
		if errors.Is(cause, errCallTimeout) {
			return &classified{kind: store.ErrTransient, detail: "no answer within the call timeout", err: err}
		}
		// The caller's context ended: report that, not a storage failure.
		return &classified{kind: callCtx.Err(), detail: tableerr.Redact(err), err: err}
	}
	if tableerr.IsConnection(err) {
		return &classified{kind: store.ErrTransient, detail: tableerr.Redact(err), err: err}
	}
	return &classified{kind: ErrStorage, detail: tableerr.Redact(err), err: err}
}

// statusKind maps an HTTP status and service error code to a sentinel, or
// nil when the failure is not one the caller can handle or retry.
func statusKind(op string, status int, code string) error {
	switch {
	case status == http.StatusPreconditionFailed:
		return store.ErrConflict
	case status == http.StatusConflict && op == OpInsert && code != string(aztables.TableBeingDeleted):
		return store.ErrConflict
	case status == http.StatusNotFound && code != string(aztables.TableNotFound):
		return store.ErrNotFound
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500,
		status == http.StatusForbidden, status == http.StatusNotFound:
		return store.ErrTransient
	}
	return nil
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
