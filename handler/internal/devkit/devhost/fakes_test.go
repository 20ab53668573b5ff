package devhost

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The test binary re-executes itself as a fake handler or a fake Azurite
// (see TestMain), configured through these environment variables.
const (
	// fakeUpstream is the test server's base URL; its presence makes the
	// process a fake handler that answers GET / itself and forwards every
	// other request there, with its pid in headerFakePID.
	fakeUpstream = "DEVHOST_FAKE_HANDLER_UPSTREAM"
	// fakeGracefulTerm makes it, on SIGTERM, finish the requests it serves
	// and exit, as the real handler does.
	fakeGracefulTerm = "DEVHOST_FAKE_HANDLER_GRACEFUL_TERM"
	// fakeLogLine is printed on its standard output as it starts.
	fakeLogLine = "DEVHOST_FAKE_HANDLER_LOG_LINE"
	// headerFakePID carries the forwarding process's id to the test server.
	headerFakePID = "X-Fake-Handler-Pid"
	// pathFakeEnv is answered by the fake handler itself with a fakeEnv.
	pathFakeEnv = "/fake-handler/env"
	// fakeAzuriteDieFile makes the process, run with azurite-table's
	// --tablePort, a fake Azurite answering every request with 200 (a
	// create table with 204); it exits 1 once the file it names exists
	// (empty: never).
	fakeAzuriteDieFile = "DEVHOST_FAKE_AZURITE_DIE_FILE"
)

// fakeEnv is what the fake handler reports at pathFakeEnv.
type fakeEnv struct {
	Environ []string `json:"environ"`
	Dir     string   `json:"dir"`
}

// fakeAzuriteMain runs the fake Azurite and exits when the process is one.
func fakeAzuriteMain() {
	dieFile, ok := os.LookupEnv(fakeAzuriteDieFile)
	if !ok || !slices.Contains(os.Args[1:], "--tablePort") {
		return
	}
	fs := flag.NewFlagSet("azurite-table", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	host := fs.String("tableHost", "127.0.0.1", "")
	port := fs.String("tablePort", "", "")
	for _, b := range []string{"inMemoryPersistence", "skipApiVersionCheck", "disableProductStyleUrl", "silent"} {
		fs.Bool(b, false, "")
	}
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
	// Azurite's Server header is what package azurite takes for "up".
	err = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "Azurite-Table/fake")
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Tables") {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	fmt.Fprintln(os.Stderr, "fakeazurite:", err)
	os.Exit(1)
}

// fakeHandlerMain runs the fake handler and exits when the process is one.
func fakeHandlerMain() {
	upstream := os.Getenv(fakeUpstream)
	if upstream == "" {
		return
	}
	if line := os.Getenv(fakeLogLine); line != "" {
		fmt.Println(line)
	}
	target, err := url.Parse(upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakehandler:", err)
		os.Exit(2)
	}
	pid := strconv.Itoa(os.Getpid())
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set(headerFakePID, pid)
		},
		ErrorLog: log.New(io.Discard, "", 0), // tests drop connections on purpose
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET "+pathFakeEnv, func(w http.ResponseWriter, r *http.Request) {
		wd, _ := os.Getwd()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(fakeEnv{Environ: os.Environ(), Dir: wd})
	})
	mux.Handle("/", proxy)
	srv := &http.Server{Addr: "127.0.0.1:" + os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT"), Handler: mux}
	if os.Getenv(fakeGracefulTerm) != "" {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() {
			<-term
			_ = srv.Shutdown(context.Background())
			os.Exit(0)
		}()
	}
	err = srv.ListenAndServe()
	if errors.Is(err, http.ErrServerClosed) {
		select {} // the SIGTERM handler exits once the requests are served
	}
	fmt.Fprintln(os.Stderr, "fakehandler:", err)
	os.Exit(1)
}
