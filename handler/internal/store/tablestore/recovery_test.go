package tablestore_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// interfering is a transport that, just before the first write of the
// recovery marker goes out, lets another writer raise it (once): the
// write's condition (insert-if-absent, If-Match) then fails.
type interfering struct {
	next   policy.Transporter
	before func()
	fired  atomic.Bool
	writes atomic.Int64
}

func (x *interfering) Do(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		x.writes.Add(1)
		if x.fired.CompareAndSwap(false, true) {
			x.before()
		}
	}
	return x.next.Do(r)
}

// A raise that loses its conditional write to another writer rereads and
// decides again: it keeps the other's time when that is later, and writes
// its own over it when not; insert (409) and replace (412) alike.
func TestRaiseRecoveringAfterALostWrite(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		existing   time.Time // the marker before (zero: none, so the write is an insert)
		other      time.Time // what the other writer raises it to meanwhile
		want       time.Time
		wantWrites int64 // writes by the raise under test
	}{
		{"insert loses to a later time", time.Time{}, t0.Add(2 * time.Minute), t0.Add(2 * time.Minute), 1},
		{"insert loses to an earlier time", time.Time{}, t0.Add(-time.Minute), t0.Add(time.Minute), 2},
		{"replace loses to a later time", t0, t0.Add(2 * time.Minute), t0.Add(2 * time.Minute), 1},
		{"replace loses to an earlier time", t0, t0.Add(30 * time.Second), t0.Add(time.Minute), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			other, table := newTable(t, nil)
			if !tt.existing.IsZero() {
				if _, err := other.RaiseRecovering(ctx, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			x := &interfering{next: http.DefaultClient, before: func() {
				if _, err := other.RaiseRecovering(ctx, tt.other); err != nil {
					t.Errorf("the other writer: %v", err)
				}
			}}
			s, err := tablestore.NewFromConnectionString(testenv.Azurite(t), table,
				&tablestore.Options{ClientOptions: &aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: x}}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.RaiseRecovering(ctx, t0.Add(time.Minute))
			if err != nil || !got.Equal(tt.want) {
				t.Fatalf("RaiseRecovering(%v) = %v, %v; want %v", t0.Add(time.Minute), got, err, tt.want)
			}
			if !x.fired.Load() {
				t.Fatal("the other writer never wrote: no race was made")
			}
			if n := x.writes.Load(); n != tt.wantWrites {
				t.Errorf("%d writes, want %d (the lost one, then one more only when the other's time is earlier)", n, tt.wantWrites)
			}
			if read, err := other.RecoveringUntil(ctx); err != nil || !read.Equal(tt.want) {
				t.Errorf("RecoveringUntil = %v, %v; want %v", read, err, tt.want)
			}
		})
	}
}
