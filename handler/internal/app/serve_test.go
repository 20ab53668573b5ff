package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// TestEnsureTableTakesA403AsInfraOwningTheTable: a create refused with 403
// (a role scoped to the table may not create tables) is one line, then
// start-up goes on; only a transient failure is retried.
func TestEnsureTableTakesA403AsInfraOwningTheTable(t *testing.T) {
	type answer struct {
		status int
		code   string
	}
	tests := []struct {
		name      string
		answers   []answer // in turn; the last one repeats
		wantCalls int
		wantLines []string // the messages logged, in order
	}{
		{"AuthorizationPermissionMismatch", []answer{{403, "AuthorizationPermissionMismatch"}}, 1,
			[]string{"table not created: this identity may not create tables; infra owns the table"}},
		{"AuthorizationFailure", []answer{{403, "AuthorizationFailure"}}, 1,
			[]string{"table not created: this identity may not create tables; infra owns the table"}},
		{"created", []answer{{201, ""}}, 1, nil},
		{"already there", []answer{{409, "TableAlreadyExists"}}, 1, nil},
		// The SDK retries a 503 twice itself; ensureTable retries the third.
		{"503s, then created", []answer{{503, "ServerBusy"}, {503, "ServerBusy"}, {503, "ServerBusy"}, {201, ""}}, 4,
			[]string{"table not ensured yet, retrying"}},
		{"another 403 is retried", []answer{{403, "AuthenticationFailed"}, {201, ""}}, 2,
			[]string{"table not ensured yet, retrying"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				if n > tt.wantCalls+1 {
					cancel() // retrying past what is wanted: stop ensureTable, the test fails on the count
				}
				a := tt.answers[min(n, len(tt.answers))-1]
				w.Header().Set("Content-Type", "application/json;odata=minimalmetadata")
				if a.code != "" {
					w.Header().Set("x-ms-error-code", a.code)
				}
				w.WriteHeader(a.status)
				if a.status == 201 {
					fmt.Fprint(w, `{"TableName":"orders"}`)
					return
				}
				fmt.Fprintf(w, `{"odata.error":{"code":%q,"message":{"lang":"en-US","value":"refused"}}}`, a.code)
			}))
			defer srv.Close()
			tables, err := tablestore.NewFromConnectionString(azurite.ConnectionString(strings.TrimPrefix(srv.URL, "http://")), "orders", nil)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			ensureTable(ctx, tables, "orders", slog.New(slog.NewJSONHandler(&out, nil)))
			if got := int(calls.Load()); got != tt.wantCalls {
				t.Errorf("CreateTable calls = %d, want %d", got, tt.wantCalls)
			}
			var got []string
			for l := range strings.Lines(out.String()) {
				var rec struct{ Msg string }
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				got = append(got, rec.Msg)
			}
			if !slices.Equal(got, tt.wantLines) {
				t.Errorf("logged %q, want %q\n%s", got, tt.wantLines, out.String())
			}
		})
	}
}
