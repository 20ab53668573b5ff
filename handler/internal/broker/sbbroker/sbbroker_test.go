package sbbroker_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokertest"
	"github.com/orderstatus/orderstatus/handler/internal/broker/sbbroker"
)

// TestConformance runs the broker suite against a real Service Bus
// namespace. It needs two queues made for it, shared by nothing else (the
// suite drains them):
//
//	SERVICEBUS_TEST_NAMESPACE      <name>.servicebus.windows.net
//	SERVICEBUS_TEST_QUEUE          a queue without sessions
//	SERVICEBUS_TEST_SESSION_QUEUE  a queue with sessions
//
// both with duplicate detection, max delivery count 5, lock duration 1
// minute and dead-lettering on expiry (the production settings), and a
// signed-in identity (az login) with the "Azure Service Bus Data Owner" role
// on the namespace. SERVICEBUS_TEST_SLOW=1 adds the tests that wait out a
// lock duration and a time-to-live (several minutes).
func TestConformance(t *testing.T) {
	ns := os.Getenv("SERVICEBUS_TEST_NAMESPACE")
	if ns == "" {
		t.Skip("SERVICEBUS_TEST_NAMESPACE not set: to run against Service Bus, set SERVICEBUS_TEST_NAMESPACE=<name>.servicebus.windows.net, " +
			"SERVICEBUS_TEST_QUEUE=<queue without sessions> and SERVICEBUS_TEST_SESSION_QUEUE=<queue with sessions> " +
			"(both: duplicate detection, max delivery 5, lock 1 min, dead-letter on expiry; used only by this test), " +
			"az login with the Azure Service Bus Data Owner role, then go test -run Conformance ./handler/internal/broker/sbbroker/ " +
			"(SERVICEBUS_TEST_SLOW=1 adds the lock and TTL expiry tests)")
	}
	queue, sessionQueue := os.Getenv("SERVICEBUS_TEST_QUEUE"), os.Getenv("SERVICEBUS_TEST_SESSION_QUEUE")
	if queue == "" || sessionQueue == "" {
		t.Fatal("SERVICEBUS_TEST_NAMESPACE is set but SERVICEBUS_TEST_QUEUE or SERVICEBUS_TEST_SESSION_QUEUE is not")
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		t.Fatalf("DefaultAzureCredential: %v", err)
	}
	brokertest.Run(t, brokertest.Harness{
		New: func(t *testing.T) broker.Broker {
			b, err := sbbroker.New(ns, cred, nil)
			if err != nil {
				t.Fatalf("sbbroker.New: %v", err)
			}
			return b
		},
		Queue:        queue,
		SessionQueue: sessionQueue,
	})
}

// TestSendBatch sends a batch through Service Bus (gated like
// TestConformance) and receives it in order.
func TestSendBatch(t *testing.T) {
	ns, queue := os.Getenv("SERVICEBUS_TEST_NAMESPACE"), os.Getenv("SERVICEBUS_TEST_QUEUE")
	if ns == "" || queue == "" {
		t.Skip("SERVICEBUS_TEST_NAMESPACE and SERVICEBUS_TEST_QUEUE not set (see TestConformance)")
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		t.Fatalf("DefaultAzureCredential: %v", err)
	}
	client, err := azservicebus.NewClient(ns, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer client.Close(ctx)
	b := sbbroker.NewFromClient(client, nil)
	defer b.Close(ctx)
	tag := fmt.Sprintf("batch-%d", time.Now().UnixNano())
	var want []string
	var msgs []broker.Message
	for i := range 5 {
		id := fmt.Sprintf("%s:%d", tag, i)
		want = append(want, id)
		msgs = append(msgs, broker.Message{MessageID: id, Body: []byte(`{"i":` + fmt.Sprint(i) + `}`)})
	}
	if err := b.SendBatch(ctx, queue, msgs); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	var got []string
	for len(got) < len(want) {
		rs, err := b.Receive(ctx, broker.Source{Queue: queue}, 10, 10*time.Second)
		if err != nil || len(rs) == 0 {
			t.Fatalf("received %v, then %v (%d messages)", got, err, len(rs))
		}
		for _, r := range rs {
			if strings.HasPrefix(r.MessageID, tag) {
				got = append(got, r.MessageID)
			}
			if err := b.Complete(ctx, broker.Source{Queue: queue}, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("received %v, want %v in order", got, want)
	}
}
