package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
	module + "handler/internal/orderstate/orderstatetest",
	module + "handler/internal/dlstore/dlmem",
	module + "handler/internal/dlstore/dlstoretest",
	module + "handler/internal/cli/",
	module + "handler/internal/dlops",
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

// MaxDeployedFileLines bounds every non-test file of the deployed
// packages: a file longer than this does more than one thing.
const MaxDeployedFileLines = 600

// MaxDeployedLines bounds the deployed packages' own code, comments and
// blank lines included: what Azure runs stays small enough to read.
const MaxDeployedLines = 10000

// scaledClockWords name the development host's scaled clock and the
// headers it once sent: none may appear in the deployed packages' code,
// which runs in real time only (docs/outages.md, "Real time only").
var scaledClockWords = []string{"X-Orderstatus", "ClockRate", "Clock-Rate", "TimeScale", "ScaledClock", "Scaled("}

// TestDeployedPackagesSize: no file of the packages the deployed binary
// links is over MaxDeployedFileLines, all of them together hold at most
// MaxDeployedLines, and none names the scaled clock. It logs the packages'
// own lines, comments included (go test -v -run
// TestDeployedPackagesSize ./handler/).
func TestDeployedPackagesSize(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}|{{.Dir}}|{{join .GoFiles \" \"}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	total, files := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[0], module) {
			continue
		}
		for _, f := range strings.Fields(parts[2]) {
			b, err := os.ReadFile(filepath.Join(parts[1], f))
			if err != nil {
				t.Fatal(err)
			}
			n := bytes.Count(b, []byte("\n"))
			total, files = total+n, files+1
			rel := strings.TrimPrefix(parts[0], module) + "/" + f
			if n > MaxDeployedFileLines {
				t.Errorf("%s: %d lines, over %d: split it by job", rel, n, MaxDeployedFileLines)
			}
			for _, w := range scaledClockWords {
				if bytes.Contains(b, []byte(w)) {
					t.Errorf("%s names %q: the deployed code runs in real time only", rel, w)
				}
			}
		}
	}
	if files < 20 {
		t.Fatalf("go list found %d files in the deployed packages: the check saw nothing", files)
	}
	if total > MaxDeployedLines {
		t.Errorf("the deployed packages hold %d lines, over %d: move what only the dev kit or the operators' tools use out of them", total, MaxDeployedLines)
	}
	t.Logf("the deployed packages: %d files, %d lines", files, total)
}
