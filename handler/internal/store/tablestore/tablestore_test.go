package tablestore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate/orderstatetest"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/storetest"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

var _ store.Backend = (*tablestore.Store)(nil)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// tableName returns a fresh valid table name (a letter, then letters and
// digits).
func tableName() string { return "t" + rand.Text() }

// newTable returns a Store on a new table in the test Azurite.
func newTable(t testing.TB, opts *tablestore.Options) (*tablestore.Store, string) {
	t.Helper()
	cs, table := testenv.Azurite(t), tableName()
	s, err := tablestore.NewFromConnectionString(cs, table, opts)
	if err != nil {
		t.Fatalf("NewFromConnectionString: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.EnsureTable(ctx); err != nil {
		t.Fatalf("EnsureTable %s: %v", table, err)
	}
	return s, table
}

func TestConformance(t *testing.T) {
	newBackend := func(t *testing.T) store.Backend {
		s, _ := newTable(t, nil)
		return s
	}
	storetest.Run(t, newBackend)
	orderstatetest.Run(t, newBackend)
}

// TestConcurrentDelivery races two hosts, each with its own client of the
// same table, on one order.
func TestConcurrentDelivery(t *testing.T) {
	hostA, table := newTable(t, nil)
	hostB, err := tablestore.NewFromConnectionString(testenv.Azurite(t), table, nil)
	if err != nil {
		t.Fatalf("NewFromConnectionString: %v", err)
	}
	orderstatetest.RunConcurrentDelivery(t, hostA, hostB)
	orderstatetest.RunLockstepDelivery(t, hostA, hostB)
}

func TestEnsureTableIdempotent(t *testing.T) {
	s, _ := newTable(t, nil)
	if err := s.EnsureTable(t.Context()); err != nil {
		t.Fatalf("second EnsureTable: %v, want nil (TableAlreadyExists is success)", err)
	}
}

// TestMissingTable checks that a missing table is never "no such row"
// (inserting on would only fail again) but a transient failure: a table
// still being provisioned is retried, a lasting one dead-letters.
func TestMissingTable(t *testing.T) {
	s, err := tablestore.NewFromConnectionString(testenv.Azurite(t), tableName(), nil)
	if err != nil {
		t.Fatalf("NewFromConnectionString: %v", err)
	}
	ctx := t.Context()
	_, getErr := s.Get(ctx, "o-1")
	_, insErr := s.Insert(ctx, "o-1", order.State{Status: order.Created, LastSequence: 1})
	for name, err := range map[string]error{"Get": getErr, "Insert": insErr} {
		var re *azcore.ResponseError
		if err == nil || errors.Is(err, store.ErrNotFound) || !errors.Is(err, store.ErrTransient) || !errors.As(err, &re) || re.ErrorCode != "TableNotFound" {
			t.Errorf("%s on a missing table: error = %v, want ErrTransient wrapping the TableNotFound *azcore.ResponseError", name, err)
		}
	}
}

// observed records Observe calls.
type observed struct {
	mu    sync.Mutex
	calls []string
}

func (o *observed) observe(op, outcome string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, op+"/"+outcome)
}

func (o *observed) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.calls
	o.calls = nil
	return c
}

func TestObserve(t *testing.T) {
	var obs observed
	s, _ := newTable(t, &tablestore.Options{Observe: obs.observe})
	ctx := t.Context()
	created := order.State{Status: order.Created, LastSequence: 1, UpdatedAt: time.Now()}
	var etag store.ETag
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"get missing", func() error { _, err := s.Get(ctx, "o-1"); return err }, "get/not_found"},
		{"insert", func() (err error) { etag, err = s.Insert(ctx, "o-1", created); return err }, "insert/ok"},
		{"insert existing", func() error { _, err := s.Insert(ctx, "o-1", created); return err }, "insert/conflict"},
		{"get", func() error { _, err := s.Get(ctx, "o-1"); return err }, "get/ok"},
		{"replace", func() error { _, err := s.Replace(ctx, "o-1", created, etag); return err }, "replace/ok"},
		{"replace stale", func() error { _, err := s.Replace(ctx, "o-1", created, etag); return err }, "replace/conflict"},
		{"replace missing", func() error { _, err := s.Replace(ctx, "o-2", created, etag); return err }, "replace/not_found"},
		{"replace unconditional (no call)", func() error { _, err := s.Replace(ctx, "o-1", created, "*"); return err }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = tt.call()
			got := fmt.Sprint(obs.take())
			want := "[]"
			if tt.want != "" {
				want = "[" + tt.want + "]"
			}
			if got != want {
				t.Errorf("observed %s, want %s", got, want)
			}
		})
	}
}

// BenchmarkApply measures orderstate over Azurite: each op is one applied
// message (orders of 10 messages each); roundtrips/applied is the number of
// storage calls per applied message, the first message of each order
// (read + insert) included.
func BenchmarkApply(b *testing.B) {
	s, _ := newTable(b, nil)
	counting := storetest.NewCounting(s)
	svc := orderstate.New(counting, nil)
	ctx := context.Background()
	const perOrder = 10
	applied := 0
	for i := 0; b.Loop(); i++ {
		u := order.Update{OrderID: fmt.Sprintf("o-%d", i/perOrder), Status: order.Paid, Sequence: int64(i%perOrder + 1)}
		out, err := svc.Apply(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		if out.Result == order.Applied {
			applied++
		}
	}
	b.ReportMetric(float64(counting.Total())/float64(applied), "roundtrips/applied")
}

// fakeCredential is a TokenCredential that is never asked for a token here.
type fakeCredential struct{}

func (fakeCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "t", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func TestNewWithCredential(t *testing.T) {
	tests := []struct {
		url     string
		wantErr bool
	}{
		{"https://account.table.core.windows.net", false},
		{"://not a url", true},
		{"account.table.core.windows.net", true},
		{"ftp://account", true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, err := tablestore.NewWithCredential(tt.url, "", fakeCredential{}, nil)
			if (err != nil) != tt.wantErr {
				t.Errorf("NewWithCredential(%q) error = %v, want error %t", tt.url, err, tt.wantErr)
			}
		})
	}
}
