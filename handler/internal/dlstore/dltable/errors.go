package dltable

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// ErrStorage is matched by failures that are no dlstore sentinel nor the
// caller's context: a request the service refused for good (HTTP 400...).
var ErrStorage = errors.New("dltable: request failed")

// classified is an SDK error sorted into a dlstore sentinel (kind), with
// the HTTP status and service error code it came from (of the failed
// operation inside a transaction). It matches the sentinel and the SDK
// error with errors.Is and errors.As; its text is one line without the
// request's query string (which may hold a SAS token).
type classified struct {
	kind   error
	status int
	code   string
	detail string
	err    error
}

func (e *classified) Error() string   { return e.kind.Error() + " (" + e.detail + ")" }
func (e *classified) Unwrap() []error { return []error{e.kind, e.err} }

// errCallTimeout is the cause of a per-call deadline, so that classify can
// tell it from the caller's own deadline.
var errCallTimeout = errors.New("call timeout")

// classify sorts err, the result of an SDK call on table made with callCtx
// (the caller's context plus the per-call deadline), into the dlstore
// sentinels. It is the only place that reads SDK errors.
//
//   - 412: dlstore.ErrConflict (the ETag no longer matches), and 409
//     (EntityAlreadyExists: the callers that insert look at the code);
//   - 404, except TableNotFound: dlstore.ErrNotFound;
//   - 408, 429, 5xx, 403, TableNotFound, the per-call deadline, connection
//     failures: dlstore.ErrUnavailable. 403 and TableNotFound are what a
//     fresh deployment shows while a role assignment propagates or before
//     infra created the table; the text says which table;
//   - 413 and 400 EntityTooLarge, PropertyValueTooLarge,
//     RequestBodyTooLarge: dlstore.ErrTooLarge;
//   - the caller's context ending: that context's error;
//   - anything else: ErrStorage.
//
// A failed entity-group transaction is answered 202 with the failed
// operation's status and error inside the multipart body (the SDK's
// ResponseError then has the outer status: Azure/azure-sdk-for-go #17244
// leaves callers to read the body); classify reads it with batchFailure.
func classify(callCtx context.Context, table string, err error) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		status, code := re.StatusCode, re.ErrorCode
		if status < 400 && re.RawResponse != nil {
			if body, perr := runtime.Payload(re.RawResponse); perr == nil {
				if s, c, ok := batchFailure(body); ok {
					status, code = s, c
				}
			}
		}
		kind, why := statusKind(status, code, table)
		detail := fmt.Sprintf("HTTP %d %s", status, code)
		if why != "" {
			detail += ": " + why
		}
		return &classified{kind: kind, status: status, code: code, detail: detail, err: err}
	}
	if cause := context.Cause(callCtx); cause != nil {
		if errors.Is(cause, errCallTimeout) {
			return &classified{kind: dlstore.ErrUnavailable, detail: "no answer within the call timeout", err: err}
		}
		return &classified{kind: callCtx.Err(), detail: tableerr.Redact(err), err: err}
	}
	if tableerr.IsConnection(err) {
		return &classified{kind: dlstore.ErrUnavailable, detail: tableerr.Redact(err), err: err}
	}
	return &classified{kind: ErrStorage, detail: tableerr.Redact(err), err: err}
}

// statusKind maps an HTTP status and service error code to a sentinel,
// and says why when an operator needs to know.
func statusKind(status int, code, table string) (error, string) {
	switch {
	case status == http.StatusPreconditionFailed, status == http.StatusConflict && code == string(aztables.EntityAlreadyExists):
		return dlstore.ErrConflict, ""
	case status == http.StatusNotFound && code == string(aztables.TableNotFound):
		return dlstore.ErrUnavailable, "table " + table + " does not exist; infra creates it"
	case status == http.StatusNotFound:
		return dlstore.ErrNotFound, ""
	case status == http.StatusForbidden:
		return dlstore.ErrUnavailable, "refused on table " + table + ": the app's role on it is missing or still propagating"
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return dlstore.ErrUnavailable, ""
	case status == http.StatusRequestEntityTooLarge,
		status == http.StatusBadRequest && (code == string(aztables.EntityTooLarge) || code == string(aztables.PropertyValueTooLarge) || code == "RequestBodyTooLarge"):
		return dlstore.ErrTooLarge, ""
	}
	return ErrStorage, ""
}

// codeOf is the service error code of a classified error ("" if none).
func codeOf(err error) string {
	var c *classified
	if errors.As(err, &c) {
		return c.code
	}
	return ""
}

// batchFailure reads the body of an entity-group transaction's answer
// (multipart/mixed: a changeset of HTTP responses, one per operation, or
// one for the failed operation) and returns the first failed operation's
// status and service error code. ok is false when no operation failed or
// the body is not such an answer.
func batchFailure(body []byte) (status int, code string, ok bool) {
	for rest := body; len(rest) > 0; {
		line, next, _ := bytes.Cut(rest, []byte("\n"))
		rest = next
		line = bytes.TrimRight(line, "\r")
		if !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(append(append(line, "\r\n"...), rest...))), nil)
		if err != nil || resp.StatusCode < 400 {
			continue
		}
		code = resp.Header.Get("x-ms-error-code")
		if code == "" {
			var e struct {
				OData struct {
					Code string `json:"code"`
				} `json:"odata.error"`
			}
			if i := bytes.IndexByte(rest, '{'); i >= 0 {
				_ = json.NewDecoder(bytes.NewReader(rest[i:])).Decode(&e)
			}
			code = e.OData.Code
		}
		return resp.StatusCode, code, true
	}
	return 0, "", false
}
