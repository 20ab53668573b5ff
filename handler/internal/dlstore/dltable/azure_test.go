package dltable_test

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

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlstoretest"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
)

// EnvTablesServiceURI names a real Table Storage endpoint for
// TestAzureConformance (the same variable as the order store's suite).
const EnvTablesServiceURI = "ORDERSTATUS_TEST_TABLES_SERVICE_URI"

// azureTablePrefix starts the name of every table TestAzureConformance
// creates: never the app's deadletters table, and recognisable when a
// killed run left one behind.
const azureTablePrefix = "conformance"

// TestAzureConformance runs the dead-letter store suite against a real
// storage account with Entra ID (DefaultAzureCredential), on a fresh table
// per case named conformance<random>, deleted afterwards. The signed-in
// identity needs Storage Table Data Contributor on the account (creating
// a table is an account-level action). It skips, saying how to run it,
// unless ORDERSTATUS_TEST_TABLES_SERVICE_URI is set;
// scripts/azure-conformance.sh tables runs it for an azd environment.
func TestAzureConformance(t *testing.T) {
	uri := os.Getenv(EnvTablesServiceURI)
	if uri == "" {
		t.Skip(EnvTablesServiceURI + " not set: to run the dead-letter store suite against a real storage account, set it to " +
			"https://<account>.table.core.windows.net, az login with Storage Table Data Contributor on the account, then " +
			"go test -run AzureConformance ./handler/internal/dlstore/dltable/ (scripts/azure-conformance.sh tables does it for an azd environment)")
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		t.Fatalf("DefaultAzureCredential: %v", err)
	}
	svc, err := aztables.NewServiceClient(uri, cred, nil)
	if err != nil {
		t.Fatalf("aztables.NewServiceClient(%s): %v", uri, err)
	}
	dlstoretest.Run(t, func(t *testing.T) dlstore.Store {
		table := azureTablePrefix + strings.ToLower(rand.Text())
		s := dltable.New(svc, table, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := s.EnsureTable(ctx); err != nil {
			t.Fatalf("EnsureTable %s: %v", table, err)
		}
		t.Cleanup(func() { deleteAzureTable(t, svc, table) })
		return s
	})
}

// deleteAzureTable removes a table the test created; a table already gone
// is fine.
func deleteAzureTable(t *testing.T, svc *aztables.ServiceClient, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := svc.DeleteTable(ctx, table, nil)
	var re *azcore.ResponseError
	if err != nil && !(errors.As(err, &re) && re.StatusCode == 404) {
		t.Errorf("delete table %s: %v (delete it by hand: az storage table delete --auth-mode login --name %s)", table, err, table)
	}
}
