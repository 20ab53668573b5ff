// Package fakeazurite is a stand-in for azurite-table in the development
// host's tests: a test binary re-executes itself as Azurite (point
// AZURITE_TABLE_BIN at the test executable and set EnvMode), and the
// process answers every HTTP request on --tablePort with 200 (a create
// table with 204), so the host takes it for a running store. It stores
// nothing; the tests' fake handler never reaches it. It exits with status
// 1 once the file named by EnvMode exists, so a test can make the store
// die mid-run.
package fakeazurite

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// EnvMode makes Main run the fake when the process also has azurite-table's
// --tablePort argument. Its value is a file whose appearance makes the
// process exit with status 1; empty: never.
const EnvMode = "DEVHOST_FAKE_AZURITE_DIE_FILE"

// Main runs the fake Azurite and exits if EnvMode is set and the arguments
// are azurite-table's; otherwise it returns at once. Call it first in
// TestMain.
func Main() {
	dieFile, ok := os.LookupEnv(EnvMode)
	if !ok || !hasArg("--tablePort") {
		return
	}
	fs := flag.NewFlagSet("azurite-table", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	host := fs.String("tableHost", "127.0.0.1", "")
	port := fs.String("tablePort", "", "")
	fs.Bool("inMemoryPersistence", false, "")
	fs.Bool("skipApiVersionCheck", false, "")
	fs.Bool("disableProductStyleUrl", false, "")
	fs.Bool("silent", false, "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fakeazurite:", err)
		os.Exit(2)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(*host, *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeazurite:", err)
		os.Exit(1)
	}
	if dieFile != "" {
		go func() {
			for {
				if _, err := os.Stat(dieFile); err == nil {
					os.Exit(1)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	// It answers as Azurite does (its Server header), which is what
	// package azurite takes for "up".
	err = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "Azurite-Table/fake")
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Tables") {
			w.WriteHeader(http.StatusNoContent) // a table created
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	fmt.Fprintln(os.Stderr, "fakeazurite:", err)
	os.Exit(1)
}

func hasArg(name string) bool {
	for _, a := range os.Args[1:] {
		if a == name {
			return true
		}
	}
	return false
}
