package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/orderstatus/orderstatus/"

// devPackages are the dev kit's and the test kits' packages: none may be
// linked into the binary `make package` deploys.
var devPackages = []string{
	module + "handler/internal/devkit/",
	module + "handler/internal/broker/membroker",
	module + "handler/internal/broker/loopback",
	module + "handler/internal/broker/brokertest",
	module + "handler/internal/store/memstore",
	module + "handler/internal/store/storetest",
	module + "handler/internal/dlstore/dlmem",
	module + "handler/internal/dlstore/dlstoretest",
	module + "handler/internal/cli/",
}

// deps is `go list -deps` of the packages pattern names: every package
// their non-test code links.
func deps(t *testing.T, pattern ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pattern...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", strings.Join(pattern, " "), err)
	}
	return strings.Fields(string(out))
}

// TestDeployedBinaryLinksNoDevPackage: the deployed main links the product
// only, not the dev host, its brokers, the fault proxy, Azurite's
// installer, profiling, the operators' CLIs or a test kit.
func TestDeployedBinaryLinksNoDevPackage(t *testing.T) {
	var product int
	for _, p := range deps(t, ".") {
		if !strings.HasPrefix(p, module) {
			continue
		}
		product++
		for _, dev := range devPackages {
			if strings.HasPrefix(p, dev) {
				t.Errorf("the deployed binary links %s", strings.TrimPrefix(p, module))
			}
		}
	}
	if product < 10 {
		t.Fatalf("go list found %d of this module's packages in the deployed binary: the check saw nothing", product)
	}
}

// TestPublicPackagesImportNothingInternal: contract, publish and outbox
// (with its in-memory store) are for producers outside this module: they
// import none of its internal packages, so they expose no internal type.
func TestPublicPackagesImportNothingInternal(t *testing.T) {
	public := []string{"./contract/...", "./publish", "./publish/outbox", "./publish/outbox/memoutbox", "./tableerr"}
	for _, p := range deps(t, public...) {
		if strings.HasPrefix(p, module) && strings.Contains(p, "/internal/") {
			t.Errorf("a public package links %s", strings.TrimPrefix(p, module))
		}
	}
}
