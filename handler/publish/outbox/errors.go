package outbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// tableError is a storage failure sorted into a sentinel (kind), with a
// short detail that never carries the request's query string (a SAS).
type tableError struct {
	kind   error
	also   error // a second sentinel it matches, or nil
	detail string
	err    error
}

func (e *tableError) Error() string { return e.kind.Error() + " (" + e.detail + ")" }
func (e *tableError) Unwrap() []error {
	if e.also != nil {
		return []error{e.kind, e.also, e.err}
	}
	return []error{e.kind, e.err}
}

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
// into the sentinels. It is the one place that reads SDK errors. A failed
// entity-group transaction is answered 202 Accepted with the failed
// operation's own response inside a multipart body
// (https://learn.microsoft.com/rest/api/storageservices/performing-entity-group-transactions#sample-error-response);
// the SDK returns it as an *azcore.ResponseError carrying the 202, so the
// inner status and code are read from that body.
func classify(callCtx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		status, code := re.StatusCode, re.ErrorCode
		if status == http.StatusAccepted && re.RawResponse != nil {
			if s, c, ok := innerFailure(re.RawResponse); ok {
				status, code = s, c
			}
		}
		detail := fmt.Sprintf("HTTP %d %s", status, code)
		switch {
		case status == http.StatusNotFound && code == "TableNotFound":
			return &tableError{kind: ErrTransient, also: ErrTableNotFound, detail: detail, err: err}
		case status == http.StatusConflict && code == "TableBeingDeleted":
			return &tableError{kind: ErrTransient, detail: detail, err: err}
		case status == http.StatusConflict, status == http.StatusPreconditionFailed:
			return &tableError{kind: ErrConflict, detail: detail, err: err}
		case status == http.StatusNotFound:
			return &tableError{kind: ErrNotFound, detail: detail, err: err}
		case status == http.StatusRequestEntityTooLarge || code == "EntityTooLarge" || code == "PropertyValueTooLarge" || code == "RequestBodyTooLarge":
			return &tableError{kind: ErrTooLarge, detail: detail, err: err}
		case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500,
			status == http.StatusForbidden:
			// 403: a role assignment still propagating on a fresh
			// deployment; retried, then alerted on.
			return &tableError{kind: ErrTransient, detail: detail, err: err}
		}
		return &tableError{kind: ErrStorage, detail: detail, err: err}
	}
	if cause := context.Cause(callCtx); cause != nil {
		if errors.Is(cause, errCallTimeout) {
			return &tableError{kind: ErrTransient, detail: "no answer within the call timeout", err: err}
		}
		return &tableError{kind: callCtx.Err(), detail: "the caller's context ended", err: err}
	}
	if tableerr.IsConnection(err) {
		return &tableError{kind: ErrTransient, detail: "connection failed", err: err}
	}
	return &tableError{kind: ErrStorage, detail: strings.SplitN(err.Error(), "\n", 2)[0], err: err}
}

// innerFailure reads the first failed operation's status and error code
// out of a batch response body: multipart/mixed, whose changeset part is
// multipart/mixed again, whose parts are HTTP responses.
func innerFailure(resp *http.Response) (int, string, bool) {
	body, err := runtime.Payload(resp)
	if err != nil || len(body) == 0 {
		return 0, "", false
	}
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return 0, "", false
	}
	return firstFailure(multipart.NewReader(bytes.NewReader(body), params["boundary"]), 0)
}

func firstFailure(mr *multipart.Reader, depth int) (int, string, bool) {
	for {
		part, err := mr.NextPart()
		if err != nil {
			return 0, "", false
		}
		ct := part.Header.Get("Content-Type")
		media, params, _ := mime.ParseMediaType(ct)
		if strings.HasPrefix(media, "multipart/") && params["boundary"] != "" && depth < 2 {
			if s, c, ok := firstFailure(multipart.NewReader(part, params["boundary"]), depth+1); ok {
				return s, c, true
			}
			continue
		}
		r, err := http.ReadResponse(bufio.NewReader(part), nil)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		r.Body.Close()
		if r.StatusCode < 400 {
			continue
		}
		code := r.Header.Get("x-ms-error-code")
		if code == "" {
			var odata struct {
				Error struct {
					Code string `json:"code"`
				} `json:"odata.error"`
			}
			if json.Unmarshal(b, &odata) == nil {
				code = odata.Error.Code
			}
		}
		return r.StatusCode, code, true
	}
}
