package outbox_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/publish/outbox"
)

// TestCommitWithALostAnswerCommitsOnce loses the answer to a transaction
// Azurite performed (the real SDK and its retry policy in between). The
// retry meets the commit's own work on the counter row: Commit must see
// that and succeed, never write the records twice, even with a
// producer's operation (an upsert) that has no condition to fail.
func TestCommitWithALostAnswerCommitsOnce(t *testing.T) {
	az := testenv.StartAzurite(t)
	proxy, err := faultproxy.Start("http://" + az.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	svc, err := aztables.NewServiceClientFromConnectionString(azurite.ConnectionString(proxy.Addr), nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := outbox.NewTable(svc.NewClient("lostanswer"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := tbl.EnsureTable(ctx); err != nil {
		t.Fatal(err)
	}
	upsert := func(seq int) outbox.Entity {
		b, _ := json.Marshal(map[string]any{"PartitionKey": "o-1", "RowKey": "order", "Seq": seq})
		return outbox.Entity{ActionType: aztables.TransactionTypeInsertReplace, Entity: b}
	}
	status := func(seq int64, st contract.Status) outbox.Intent {
		return outbox.Status(contract.StatusChanged{OrderID: "o-1", Status: st, Sequence: seq})
	}
	if err := tbl.Commit(ctx, "o-1", upsert(1), status(1, contract.Created)); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	var batches, lost atomic.Int64
	proxy.OnAnswer(func(r *http.Request, code int) {
		if strings.HasSuffix(r.URL.Path, "$batch") {
			batches.Add(1)
		}
	})
	proxy.SetRule(func(r *http.Request) faultproxy.Mode {
		if strings.HasSuffix(r.URL.Path, "$batch") && lost.Add(1) == 1 {
			return faultproxy.LoseAnswer
		}
		return faultproxy.Pass
	})
	if err := tbl.Commit(ctx, "o-1", upsert(2), status(2, contract.Paid), outbox.ScheduleTimeout("o-1", contract.PaymentTimeout)); err != nil {
		t.Errorf("commit whose answer was lost: %v, want nil (it took effect)", err)
	}
	if proxy.Count(faultproxy.LoseAnswer) != 1 || batches.Load() < 2 {
		t.Fatalf("the fault was not injected and retried: %d lost, %d batches answered", proxy.Count(faultproxy.LoseAnswer), batches.Load())
	}
	recs, err := tbl.Pending(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.Message.MessageID)
	}
	if want := "o-1:1 o-1:2 o-1:payment-timeout"; strings.Join(ids, " ") != want {
		t.Errorf("records %v, want %s, each once", ids, want)
	}
}
