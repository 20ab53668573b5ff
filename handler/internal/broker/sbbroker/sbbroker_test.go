package sbbroker_test

import (
	"os"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

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
