package tablestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/freeport"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

var sentinels = []error{store.ErrConflict, store.ErrNotFound, store.ErrTransient}

// checkKind asserts that err matches want (one of sentinels, a context
// error, or nil for "no sentinel") and no other sentinel.
func checkKind(t *testing.T, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want %v", want)
	}
	for _, s := range sentinels {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("errors.Is(%v, %v) = %t, want %t", err, s, got, s == want)
		}
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("errors.Is(%v, %v) = false, want true", err, want)
	}
}

func TestClassifyResponseErrors(t *testing.T) {
	tests := []struct {
		op     string
		status int
		code   string
		want   error
	}{
		{OpInsert, 409, string(aztables.EntityAlreadyExists), store.ErrConflict},
		{OpInsert, 409, string(aztables.TableBeingDeleted), store.ErrTransient}, // retried until the table is gone or back
		{OpReplace, 409, "SomethingElse", nil},
		{OpReplace, 412, string(aztables.UpdateConditionNotSatisfied), store.ErrConflict},
		{OpGet, 404, string(aztables.ResourceNotFound), store.ErrNotFound},
		{OpReplace, 404, string(aztables.ResourceNotFound), store.ErrNotFound},
		{OpGet, 404, string(aztables.TableNotFound), store.ErrTransient},
		{OpGet, 408, "", store.ErrTransient},
		{OpReplace, 429, "", store.ErrTransient},
		{OpGet, 500, "InternalError", store.ErrTransient},
		{OpInsert, 502, "", store.ErrTransient},
		{OpReplace, 503, "ServerBusy", store.ErrTransient},
		{OpGet, 504, "", store.ErrTransient},
		{OpReplace, 400, string(aztables.InvalidInput), nil}, // ErrStorage: see TestClassifyRefusedForGood
		{OpGet, 401, "", nil},
		{OpGet, 403, "AuthorizationPermissionMismatch", store.ErrTransient},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d %s", tt.op, tt.status, tt.code), func(t *testing.T) {
			sdkErr := fmt.Errorf("sdk: %w", &azcore.ResponseError{StatusCode: tt.status, ErrorCode: tt.code})
			err := classify(context.Background(), tt.op, sdkErr)
			checkKind(t, err, tt.want)
			var re *azcore.ResponseError
			if !errors.As(err, &re) || re.StatusCode != tt.status {
				t.Errorf("errors.As(*azcore.ResponseError) lost the SDK error: %v", err)
			}
		})
	}
}

func TestClassifyOtherErrors(t *testing.T) {
	timedOut, cancel := context.WithTimeoutCause(context.Background(), 0, tableerr.ErrCallTimeout)
	defer cancel()
	canceledParent, cancelParent := context.WithCancel(context.Background())
	cancelParent()
	callerCanceled, cancel2 := context.WithTimeoutCause(canceledParent, time.Hour, tableerr.ErrCallTimeout)
	defer cancel2()
	expiredParent, cancel3 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel3()
	callerExpired, cancel4 := context.WithTimeoutCause(expiredParent, time.Hour, tableerr.ErrCallTimeout)
	defer cancel4()

	refused := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}
	tests := []struct {
		name      string
		ctx       context.Context
		err       error
		want      error
		wantCtx   error
		wantOutcm string
	}{
		{"per-call timeout", timedOut, fmt.Errorf("sdk: %w", context.DeadlineExceeded), store.ErrTransient, nil, OutcomeTransient},
		{"caller canceled", callerCanceled, fmt.Errorf("sdk: %w", context.Canceled), nil, context.Canceled, OutcomeCanceled},
		{"caller deadline", callerExpired, fmt.Errorf("sdk: %w", context.DeadlineExceeded), nil, context.DeadlineExceeded, OutcomeCanceled},
		{"connection refused", context.Background(), fmt.Errorf("sdk: %w", refused), store.ErrTransient, nil, OutcomeTransient},
		{"connection closed mid-answer", context.Background(), fmt.Errorf("sdk: %w", io.ErrUnexpectedEOF), store.ErrTransient, nil, OutcomeTransient},
		{"local error", context.Background(), errors.New("entity must have a PartitionKey and RowKey"), nil, nil, OutcomeError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify(tt.ctx, OpGet, tt.err)
			checkKind(t, err, tt.want)
			if tt.wantCtx != nil && !errors.Is(err, tt.wantCtx) {
				t.Errorf("errors.Is(%v, %v) = false, want true", err, tt.wantCtx)
			}
			if got := outcome(err); got != tt.wantOutcm {
				t.Errorf("outcome = %q, want %q", got, tt.wantOutcm)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("classified error %v does not wrap the SDK error %v", err, tt.err)
			}
		})
	}
}

// quick are options for tests of failures: short timeout, fast retries.
func quick(observe func(op, outcome string, d time.Duration)) *Options {
	return &Options{
		CallTimeout: 2 * time.Second,
		ClientOptions: &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{
			Retry: policy.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 10 * time.Millisecond},
		}},
		Observe: observe,
	}
}

// TestConnectionRefused points a Store at a closed port on 127.0.0.1.
func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var outcomes []string
	s, err := NewFromConnectionString(azurite.ConnectionString(addr), "orders", quick(func(op, oc string, _ time.Duration) {
		outcomes = append(outcomes, op+"/"+oc)
	}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context(), "o-1")
	checkKind(t, err, store.ErrTransient)
	if want := "[get/transient]"; fmt.Sprint(outcomes) != want {
		t.Errorf("observed %v, want %s", outcomes, want)
	}
}

// TestHTTPFailures runs calls against a fake Table service answering with
// fixed statuses, through the real SDK pipeline.
func TestHTTPFailures(t *testing.T) {
	tests := []struct {
		status       int
		code         string
		want         error
		wantRequests int64 // the SDK retries 408/429/5xx (once, with quick)
	}{
		{http.StatusServiceUnavailable, "ServerBusy", store.ErrTransient, 2},
		{http.StatusTooManyRequests, "", store.ErrTransient, 2},
		{http.StatusForbidden, "AuthorizationFailure", store.ErrTransient, 1},
		{http.StatusBadRequest, "InvalidInput", nil, 1},
		{http.StatusPreconditionFailed, "UpdateConditionNotSatisfied", store.ErrConflict, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s", tt.status, tt.code), func(t *testing.T) {
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				if tt.code != "" {
					w.Header().Set("x-ms-error-code", tt.code)
				}
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			s, err := NewFromConnectionString(azurite.ConnectionString(strings.TrimPrefix(srv.URL, "http://")), "orders", quick(nil))
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Replace(t.Context(), "o-1", order.State{Status: order.Paid, LastSequence: 2}, `W/"1"`)
			checkKind(t, err, tt.want)
			if got := requests.Load(); got != tt.wantRequests {
				t.Errorf("service saw %d requests, want %d", got, tt.wantRequests)
			}
		})
	}
}

// TestCallTimeout checks that a service that never answers is a transient
// failure after CallTimeout, while the caller's own cancellation is not.
func TestCallTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	opts := quick(nil)
	opts.CallTimeout = 200 * time.Millisecond
	s, err := NewFromConnectionString(azurite.ConnectionString(strings.TrimPrefix(srv.URL, "http://")), "orders", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("per-call deadline", func(t *testing.T) {
		_, err := s.Get(t.Context(), "o-1")
		checkKind(t, err, store.ErrTransient)
	})
	t.Run("caller canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := s.Get(ctx, "o-1")
		checkKind(t, err, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
	})
}

func TestClassifyRefusedForGood(t *testing.T) {
	err := classify(context.Background(), OpReplace, &azcore.ResponseError{StatusCode: 400, ErrorCode: "InvalidInput"})
	if !errors.Is(err, ErrStorage) || strings.Contains(err.Error(), "\n") {
		t.Errorf("400: %q, want one line matching ErrStorage", err)
	}
	err = classify(context.Background(), OpGet, errors.New("local failure"))
	if !errors.Is(err, ErrStorage) {
		t.Errorf("unknown error: %v, want ErrStorage", err)
	}
}

// TestErrorsNeverCarryTheSAS: a SAS connection string against a closed port
// must not put the token into the error text (which reaches logs and
// answers).
func TestErrorsNeverCarryTheSAS(t *testing.T) {
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	cs := fmt.Sprintf("AccountName=devstoreaccount1;TableEndpoint=http://127.0.0.1:%d/devstoreaccount1;SharedAccessSignature=sv=2024-01-01&sig=SECRETSIG", port)
	s, err := NewFromConnectionString(cs, "orders", quick(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context(), "o-1")
	checkKind(t, err, store.ErrTransient)
	if msg := err.Error(); strings.Contains(msg, "SECRETSIG") || strings.Contains(msg, "sig=") || strings.Contains(msg, "\n") {
		t.Errorf("error text leaks the SAS or spans lines: %q", msg)
	}
}
