package tablestore_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// TestLostAnswerSettlesAsDuplicate loses the answer to a conditional write
// that Azurite performed (the real SDK and its retry policy in between):
// whatever the SDK retries or the caller retries, the update must end up
// written exactly once and the retry settle as Duplicate, never Applied twice.
func TestLostAnswerSettlesAsDuplicate(t *testing.T) {
	az := testenv.StartAzurite(t)
	proxy, err := faultproxy.Start("http://" + az.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	table := tableName()
	s, err := tablestore.NewFromConnectionString(azurite.ConnectionString(proxy.Addr), table, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.EnsureTable(ctx); err != nil {
		t.Fatal(err)
	}
	svc := orderstate.New(s, nil)
	if out, err := svc.Apply(ctx, order.Update{OrderID: "o-1", Status: order.Created, Sequence: 1, OccurredAt: time.Now()}); err != nil || out.Result != order.Applied {
		t.Fatalf("seq 1: %v %v", out.Result, err)
	}

	var writes, lost atomic.Int64
	proxy.OnAnswer(func(r *http.Request, status int) {
		if r.Method != http.MethodGet && status < 300 {
			writes.Add(1)
		}
	})
	proxy.SetRule(func(r *http.Request) faultproxy.Mode {
		if r.Method != http.MethodGet && lost.Add(1) == 1 {
			return faultproxy.LoseAnswer
		}
		return faultproxy.Pass
	})

	paid := order.Update{OrderID: "o-1", Status: order.Paid, Sequence: 2, OccurredAt: time.Now()}
	var results []order.Result
	for attempt := 0; attempt < 5; attempt++ {
		out, err := svc.Apply(ctx, paid)
		if err == nil {
			results = append(results, out.Result)
			break
		}
		t.Logf("attempt %d: %v", attempt+1, err)
	}
	if len(results) != 1 || results[0] != order.Duplicate {
		t.Errorf("settled as %v, want Duplicate (the lost write took effect)", results)
	}
	if got := writes.Load(); got != 1 {
		t.Errorf("%d successful writes upstream for seq 2, want exactly 1", got)
	}
	if proxy.Count(faultproxy.LoseAnswer) != 1 {
		t.Fatalf("the fault was not injected")
	}
	row, err := svc.Get(ctx, "o-1")
	if err != nil || row.State.LastSequence != 2 || row.State.Status != order.Paid {
		t.Errorf("row = %+v, %v; want Paid at sequence 2", row.State, err)
	}
}
