package tablestore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/orderstate/orderstatetest"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/storetest"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

// EnvTablesServiceURI names a real Table Storage endpoint for
// TestAzureConformance, e.g. the OrderStore__serviceUri of an azd
// environment.
const EnvTablesServiceURI = "ORDERSTATUS_TEST_TABLES_SERVICE_URI"

// azureTablePrefix starts the name of every table TestAzureConformance
// creates, so a table left behind by a killed run is recognisable.
const azureTablePrefix = "conformance"

// TestAzureConformance runs the store suite against a real storage account
// with Entra ID authentication (DefaultAzureCredential: az login locally, the
// federated login in the pipeline), the way the function app reaches it. It
// creates a fresh table per case, named conformance<random>, and deletes it
// afterwards; the signed-in identity needs Storage Table Data Contributor on
// the account (creating a table is an account-level action), so point it at
// an account of its own, never the app's: scripts/azure-conformance.sh
// creates one next to the app's and never gives the job a data role on the
// app's account. The Azurite runs
// of the same suite (TestConformance, TestConcurrentDelivery) never skip under
// ORDERSTATUS_REQUIRE_AZURITE; this one skips, saying how to run it, unless
// ORDERSTATUS_TEST_TABLES_SERVICE_URI is set.
func TestAzureConformance(t *testing.T) {
	uri := os.Getenv(EnvTablesServiceURI)
	if uri == "" {
		t.Skip(EnvTablesServiceURI + " not set: to run the store suite against a real storage account, set it to " +
			"https://<account>.table.core.windows.net (the OrderStore__serviceUri of an azd environment), az login with " +
			"Storage Table Data Contributor on the account, then go test -run AzureConformance ./handler/internal/store/tablestore/ " +
			"(scripts/azure-conformance.sh does all of it for an azd environment)")
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		t.Fatalf("DefaultAzureCredential: %v", err)
	}
	svc, err := aztables.NewServiceClient(uri, cred, nil)
	if err != nil {
		t.Fatalf("aztables.NewServiceClient(%s): %v", uri, err)
	}
	newAzureTable := func(t *testing.T) (*tablestore.Store, string) {
		t.Helper()
		table := azureTablePrefix + strings.ToLower(rand.Text())
		s, err := tablestore.NewWithCredential(uri, table, cred, nil)
		if err != nil {
			t.Fatalf("NewWithCredential(%s): %v", uri, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := s.EnsureTable(ctx); err != nil {
			t.Fatalf("EnsureTable %s: %v", table, err)
		}
		t.Cleanup(func() { deleteAzureTable(t, svc, table) })
		return s, table
	}

	t.Run("Conformance", func(t *testing.T) {
		newBackend := func(t *testing.T) store.Backend {
			s, _ := newAzureTable(t)
			return s
		}
		storetest.Run(t, newBackend)
		orderstatetest.Run(t, newBackend)
	})
	t.Run("ConcurrentDelivery", func(t *testing.T) {
		hostA, table := newAzureTable(t)
		hostB, err := tablestore.NewWithCredential(uri, table, cred, nil)
		if err != nil {
			t.Fatalf("NewWithCredential(%s): %v", uri, err)
		}
		orderstatetest.RunConcurrentDelivery(t, hostA, hostB)
		orderstatetest.RunLockstepDelivery(t, hostA, hostB)
	})
	t.Run("EnsureTableIdempotent", func(t *testing.T) {
		s, _ := newAzureTable(t)
		if err := s.EnsureTable(t.Context()); err != nil {
			t.Errorf("second EnsureTable: %v, want nil (TableAlreadyExists is success)", err)
		}
	})
}

// deleteAzureTable removes a table the test created; a failure is reported
// (a left-behind table costs money and clutters the account) but a table
// already gone is fine.
func deleteAzureTable(t *testing.T, svc *aztables.ServiceClient, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := svc.DeleteTable(ctx, table, nil)
	var re *azcore.ResponseError
	if err != nil && !(errors.As(err, &re) && re.StatusCode == 404) {
		t.Errorf("delete table %s: %v (delete it by hand: az storage table delete --auth-mode login --name %s)", table, err, table)
	}
}
