package outbox_test

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/publish/outbox"
	"github.com/orderstatus/orderstatus/handler/publish/outbox/outboxtest"
)

// EnvTablesServiceURI names a real Table Storage endpoint for
// TestAzureConformance (the same setting as the order store's suite).
const EnvTablesServiceURI = "ORDERSTATUS_TEST_TABLES_SERVICE_URI"

// TestAzureConformance runs the Store suite on a real storage account with
// Entra ID authentication (DefaultAzureCredential), a fresh table per case
// named outboxconformance<random>, deleted afterwards; the identity needs
// Storage Table Data Contributor on the account. It skips, saying how to
// run it, unless ORDERSTATUS_TEST_TABLES_SERVICE_URI is set (the Azurite
// run of the same suite never skips under ORDERSTATUS_REQUIRE_AZURITE).
func TestAzureConformance(t *testing.T) {
	uri := os.Getenv(EnvTablesServiceURI)
	if uri == "" {
		t.Skip(EnvTablesServiceURI + " not set: to run the outbox suite against a real storage account, set it to " +
			"https://<account>.table.core.windows.net, az login with Storage Table Data Contributor on the account, then " +
			"go test -run AzureConformance ./handler/publish/outbox/ (scripts/azure-conformance.sh tables does it for an azd environment)")
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		t.Fatalf("DefaultAzureCredential: %v", err)
	}
	outboxtest.Run(t, func(t *testing.T) (outboxtest.Backend, outboxtest.Backend) {
		name := "outboxconformance" + strings.ToLower(rand.Text())[:12]
		clients := make([]*aztables.Client, 2)
		for i := range clients {
			svc, err := aztables.NewServiceClient(uri, cred, nil)
			if err != nil {
				t.Fatalf("aztables.NewServiceClient(%s): %v", uri, err)
			}
			clients[i] = svc.NewClient(name)
		}
		tbl, err := outbox.NewTable(clients[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := tbl.EnsureTable(ctx); err != nil {
			t.Fatalf("EnsureTable %s: %v", name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := clients[0].Delete(ctx, nil); err != nil {
				t.Logf("delete table %s: %v (delete it by hand)", name, err)
			}
		})
		return tableBackend(t, clients[0]), tableBackend(t, clients[1])
	})
}
