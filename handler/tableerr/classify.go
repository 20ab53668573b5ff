package tableerr

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
)

// Kind is what a failed Table Storage call means to its caller.
type Kind int

const (
	// Refused: refused for good (400, 401, ...), or a local failure of the SDK.
	Refused Kind = iota
	// Conflict: 412, the entity's ETag no longer matches.
	Conflict
	// Exists: 409 other than TableBeingDeleted (EntityAlreadyExists on an insert).
	Exists
	// NotFound: 404 on an entity.
	NotFound
	// TableNotFound: 404 TableNotFound; infra has not created the table (yet).
	TableNotFound
	// Forbidden: 403; the app's role is missing or still propagating.
	Forbidden
	// Unavailable: 408, 429, 5xx, 409 TableBeingDeleted, ErrCallTimeout or a connection failure.
	Unavailable
	// TooLarge: 413, or 400 EntityTooLarge, PropertyValueTooLarge or RequestBodyTooLarge.
	TooLarge
	// Canceled: the caller's context ended.
	Canceled
)

// ErrCallTimeout is the cause of an adapter's per-call deadline (context.WithTimeoutCause).
var ErrCallTimeout = errors.New("no answer within the call timeout")

// Error is a classified failure; its one-line text omits the request's query string.
type Error struct {
	Kind   Kind
	Status int    // HTTP status, of the failed operation inside a transaction; 0 if none
	Code   string // the service's error code, if any
	Detail string
	Err    error
}

func (e *Error) Error() string { return e.Detail }
func (e *Error) Unwrap() error { return e.Err }

// Wrap returns e as "sentinel (detail)", matching sentinel and also with errors.Is.
func (e *Error) Wrap(sentinel error, also ...error) error {
	return &matched{kinds: append([]error{sentinel}, also...), e: e}
}

type matched struct {
	kinds []error
	e     *Error
}

func (m *matched) Error() string   { return m.kinds[0].Error() + " (" + m.e.Detail + ")" }
func (m *matched) Unwrap() []error { return append(append([]error{}, m.kinds...), m.e) }

// Classify sorts err, from an aztables call on table ("" if unknown) under callCtx, into a
// Kind; nil for nil. It reads a failed transaction's inner status (Azure/azure-sdk-for-go #17244;
// https://learn.microsoft.com/rest/api/storageservices/performing-entity-group-transactions#sample-error-response).
func Classify(callCtx context.Context, table string, err error) *Error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		status, code := re.StatusCode, re.ErrorCode
		if status < 400 && re.RawResponse != nil {
			if body, perr := runtime.Payload(re.RawResponse); perr == nil {
				if s, c, ok := BatchFailure(body); ok {
					status, code = s, c
				}
			}
		}
		kind := statusKind(status, code)
		detail, name := fmt.Sprintf("HTTP %d %s", status, code), "table "+table
		if table == "" {
			name = "the table"
		}
		switch kind {
		case TableNotFound:
			detail += ": " + name + " does not exist; infra creates it"
		case Forbidden:
			detail += ": refused on " + name + ": the app's role on it is missing or still propagating"
		}
		return &Error{Kind: kind, Status: status, Code: code, Detail: detail, Err: err}
	}
	if cause := context.Cause(callCtx); cause != nil {
		if errors.Is(cause, ErrCallTimeout) {
			return &Error{Kind: Unavailable, Detail: ErrCallTimeout.Error(), Err: err}
		}
		return &Error{Kind: Canceled, Detail: Redact(err), Err: err}
	}
	if IsConnection(err) {
		return &Error{Kind: Unavailable, Detail: Redact(err), Err: err}
	}
	return &Error{Kind: Refused, Detail: Redact(err), Err: err}
}

func statusKind(status int, code string) Kind {
	switch {
	case status == http.StatusPreconditionFailed:
		return Conflict
	case status == http.StatusConflict && code == "TableBeingDeleted":
		return Unavailable
	case status == http.StatusConflict:
		return Exists
	case status == http.StatusNotFound && code == "TableNotFound":
		return TableNotFound
	case status == http.StatusNotFound:
		return NotFound
	case status == http.StatusForbidden:
		return Forbidden
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return Unavailable
	case status == http.StatusRequestEntityTooLarge,
		status == http.StatusBadRequest && (code == "EntityTooLarge" || code == "PropertyValueTooLarge" || code == "RequestBodyTooLarge"):
		return TooLarge
	}
	return Refused
}

// KindOf is the Kind of the *Error in err's chain, and false if none.
func KindOf(err error) (Kind, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind, true
	}
	return Refused, false
}

// CodeOf is the service error code of the *Error in err's chain ("" if none).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// BatchFailure returns the first failed operation's status and error code from an
// entity-group transaction's multipart answer; ok is false if none failed.
func BatchFailure(body []byte) (status int, code string, ok bool) {
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
