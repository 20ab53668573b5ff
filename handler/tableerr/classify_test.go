package tableerr

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// TestClassifyKinds: every status and code the adapters tell apart, and
// the failures without an answer.
func TestClassifyKinds(t *testing.T) {
	tests := []struct {
		status int
		code   string
		want   Kind
	}{
		{412, "UpdateConditionNotSatisfied", Conflict},
		{409, "EntityAlreadyExists", Exists},
		{409, "TableBeingDeleted", Unavailable},
		{404, "ResourceNotFound", NotFound},
		{404, "TableNotFound", TableNotFound},
		{403, "AuthorizationPermissionMismatch", Forbidden},
		{408, "", Unavailable},
		{429, "", Unavailable},
		{500, "InternalError", Unavailable},
		{503, "ServerBusy", Unavailable},
		{413, "RequestBodyTooLarge", TooLarge},
		{400, "EntityTooLarge", TooLarge},
		{400, "PropertyValueTooLarge", TooLarge},
		{400, "InvalidInput", Refused},
		{401, "", Refused},
	}
	for _, tt := range tests {
		sdk := &azcore.ResponseError{StatusCode: tt.status, ErrorCode: tt.code}
		e := Classify(context.Background(), "orders", sdk)
		if e.Kind != tt.want || e.Status != tt.status || e.Code != tt.code {
			t.Errorf("Classify(HTTP %d %s) = %+v, want kind %d", tt.status, tt.code, e, tt.want)
		}
		var re *azcore.ResponseError
		if !errors.As(e.Wrap(errors.New("sentinel")), &re) {
			t.Errorf("HTTP %d: the SDK's error is lost", tt.status)
		}
	}
	if e := Classify(context.Background(), "orders", &azcore.ResponseError{StatusCode: 404, ErrorCode: "TableNotFound"}); !strings.Contains(e.Detail, "table orders does not exist") {
		t.Errorf("TableNotFound detail = %q, want the table named", e.Detail)
	}
	timedOut, cancel := context.WithTimeoutCause(context.Background(), 0, ErrCallTimeout)
	defer cancel()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		want Kind
	}{
		{"the call's own deadline", timedOut, context.DeadlineExceeded, Unavailable},
		{"the caller's context", canceled, context.Canceled, Canceled},
		{"a local failure", context.Background(), errors.New("entity must have a PartitionKey"), Refused},
	} {
		if e := Classify(tt.ctx, "orders", tt.err); e.Kind != tt.want || !errors.Is(e, tt.err) {
			t.Errorf("%s: %+v, want kind %d wrapping %v", tt.name, e, tt.want, tt.err)
		}
	}
	if Classify(context.Background(), "orders", nil) != nil {
		t.Error("Classify(nil) != nil")
	}
}

// TestWrapMatchesTheSentinels: Wrap matches every sentinel given, and reads
// "first sentinel (detail)" on one line.
func TestWrapMatchesTheSentinels(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	e := Classify(context.Background(), "t", &azcore.ResponseError{StatusCode: 404, ErrorCode: "TableNotFound"})
	err := e.Wrap(a, b)
	if !errors.Is(err, a) || !errors.Is(err, b) || err.Error() != "a (HTTP 404 TableNotFound: table t does not exist; infra creates it)" {
		t.Errorf("Wrap = %q", err)
	}
	if k, ok := KindOf(err); !ok || k != TableNotFound || CodeOf(err) != "TableNotFound" {
		t.Errorf("KindOf = %d, %t; CodeOf = %q", k, ok, CodeOf(err))
	}
	if _, ok := KindOf(a); ok || CodeOf(a) != "" {
		t.Error("KindOf and CodeOf of an unclassified error")
	}
}

// A failed transaction's answer as the service documents it
// ("Performing entity group transactions", Sample error response).
const failedBatch = "--batchresponse_e69b1c6c-64d9-4b2a-9b20-9c4b0e3f3b4a\r\n" +
	"Content-Type: multipart/mixed; boundary=changesetresponse_0d9a5b7c-1c6e-4f3a-a1c8-7b9fbe1b8c6e\r\n\r\n" +
	"--changesetresponse_0d9a5b7c-1c6e-4f3a-a1c8-7b9fbe1b8c6e\r\n" +
	"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n" +
	"HTTP/1.1 412 Precondition Failed\r\nContent-ID: 1\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\n" +
	"DataServiceVersion: 3.0;\r\nContent-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n\r\n" +
	`{"odata.error":{"code":"UpdateConditionNotSatisfied","message":{"lang":"en-US","value":"0:The update condition specified in the request was not satisfied.\nRequestId:1\nTime:2026-12-01T09:00:00.0000000Z"}}}` + "\r\n" +
	"--changesetresponse_0d9a5b7c-1c6e-4f3a-a1c8-7b9fbe1b8c6e--\r\n" +
	"--batchresponse_e69b1c6c-64d9-4b2a-9b20-9c4b0e3f3b4a--\r\n"

const okBatch = "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_2\r\n\r\n" +
	"--changesetresponse_2\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n" +
	"HTTP/1.1 204 No Content\r\nContent-ID: 1\r\nETag: W/\"datetime'2026-12-01T09%3A00%3A00.0000000Z'\"\r\n\r\n\r\n" +
	"--changesetresponse_2\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n" +
	"HTTP/1.1 201 Created\r\nContent-ID: 2\r\n\r\n\r\n--changesetresponse_2--\r\n--batchresponse_1--\r\n"

func TestBatchFailure(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		status int
		code   string
		ok     bool
	}{
		{"documented 412", failedBatch, 412, "UpdateConditionNotSatisfied", true},
		{"LF only", strings.ReplaceAll(failedBatch, "\r\n", "\n"), 412, "UpdateConditionNotSatisfied", true},
		{"error code header", strings.Replace(failedBatch, "Content-ID: 1\r\n", "Content-ID: 1\r\nx-ms-error-code: EntityAlreadyExists\r\n", 1), 412, "EntityAlreadyExists", true},
		{"every operation succeeded", okBatch, 0, "", false},
		{"not a batch", `{"odata.error":{"code":"InvalidInput"}}`, 0, "", false},
		{"empty", "", 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, code, ok := BatchFailure([]byte(tt.body))
			if status != tt.status || code != tt.code || ok != tt.ok {
				t.Errorf("BatchFailure = %d, %q, %t; want %d, %q, %t", status, code, ok, tt.status, tt.code, tt.ok)
			}
		})
	}
}

func FuzzBatchFailure(f *testing.F) {
	f.Add([]byte(failedBatch))
	f.Add([]byte(okBatch))
	f.Add([]byte("HTTP/1.1 409 Conflict\r\n\r\n{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		status, _, ok := BatchFailure(b)
		if ok != (status >= 400) {
			t.Fatalf("BatchFailure = %d, ok %t", status, ok)
		}
	})
}
