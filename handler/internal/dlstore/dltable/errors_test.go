package dltable

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/freeport"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// quick retries once, at once, within a short call timeout.
func quick(cs string) (*Store, error) {
	return Open(cs, "deadletters", nil, &policy.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 10 * time.Millisecond},
		&Options{CallTimeout: 2 * time.Second})
}

// TestHTTPFailures runs a Get against a fake Table service on loopback
// answering with fixed statuses, through the real SDK pipeline.
func TestHTTPFailures(t *testing.T) {
	tests := []struct {
		status   int
		code     string
		want     error
		requests int64 // the SDK retries 408/429/5xx (once, with quick)
	}{
		{http.StatusServiceUnavailable, "ServerBusy", dlstore.ErrUnavailable, 2},
		{http.StatusTooManyRequests, "", dlstore.ErrUnavailable, 2},
		{http.StatusForbidden, "AuthorizationPermissionMismatch", dlstore.ErrUnavailable, 1},
		{http.StatusNotFound, "TableNotFound", dlstore.ErrUnavailable, 1},
		{http.StatusNotFound, "ResourceNotFound", dlstore.ErrNotFound, 1},
		{http.StatusBadRequest, "InvalidInput", ErrStorage, 1},
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
			s, err := quick(azurite.ConnectionString(strings.TrimPrefix(srv.URL, "http://")))
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Get(t.Context(), dlstore.EntryID(dlstore.DLQ, 1, "m"))
			if !errors.Is(err, tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Get: %q, want one line matching %v", err, tt.want)
			}
			var re *azcore.ResponseError
			if !errors.As(err, &re) || re.StatusCode != tt.status {
				t.Errorf("Get: %v, want the SDK's ResponseError (HTTP %d) kept", err, tt.status)
			}
			if got := requests.Load(); got != tt.requests {
				t.Errorf("service saw %d requests, want %d", got, tt.requests)
			}
		})
	}
}

// TestConnectionFailuresNeverCarryTheSAS: a closed port on loopback is
// unavailable, and the SAS of the connection string stays out of the
// error text (which reaches logs).
func TestConnectionFailuresNeverCarryTheSAS(t *testing.T) {
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	cs := fmt.Sprintf("AccountName=devstoreaccount1;TableEndpoint=http://127.0.0.1:%d/devstoreaccount1;SharedAccessSignature=sv=2024-01-01&sig=SECRETSIG", port)
	s, err := quick(cs)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.List(t.Context(), dlstore.Filter{})
	if !errors.Is(err, dlstore.ErrUnavailable) {
		t.Errorf("List against a closed port: %v, want ErrUnavailable", err)
	}
	if msg := err.Error(); strings.Contains(msg, "SECRETSIG") || strings.Contains(msg, "sig=") || strings.Contains(msg, "\n") {
		t.Errorf("error text leaks the SAS or spans lines: %q", msg)
	}
	if err := classify(context.Background(), "t", errors.New("local failure")); !errors.Is(err, ErrStorage) {
		t.Errorf("an unknown failure: %v, want ErrStorage", err)
	}
}
