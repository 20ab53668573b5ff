// Package fakehandler is a stand-in custom handler for the development
// host's tests: a real child process that behaves as the tests decide. A
// test binary re-executes itself as the handler (see Main); the process
// listens on FUNCTIONS_CUSTOMHANDLER_PORT, answers GET / itself, and
// forwards every other request to the test's in-process HTTP server named
// by EnvUpstream, adding its process id in the header HeaderPID. So a test
// writes the handler as an http.Handler, observes every call, and can still
// kill the real process.
package fakehandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// Environment variables and headers.
const (
	// EnvUpstream is the test server's base URL; its presence makes Main
	// run the fake handler.
	EnvUpstream = "DEVHOST_FAKE_HANDLER_UPSTREAM"
	// EnvExitAtStart makes the process exit with status 3 at once (a
	// handler that cannot start).
	EnvExitAtStart = "DEVHOST_FAKE_HANDLER_EXIT"
	// EnvIgnoreTerm makes the process ignore SIGTERM (a handler that
	// does not stop when asked).
	EnvIgnoreTerm = "DEVHOST_FAKE_HANDLER_IGNORE_TERM"
	// EnvGracefulTerm makes the process, on SIGTERM, stop listening and
	// finish the requests it is serving before it exits, as the real
	// handler does.
	EnvGracefulTerm = "DEVHOST_FAKE_HANDLER_GRACEFUL_TERM"
	// EnvLogLine, when set, is printed on the process's standard output
	// as it starts (a handler's log line).
	EnvLogLine = "DEVHOST_FAKE_HANDLER_LOG_LINE"
	// HeaderPID carries the forwarding process's id to the test server.
	HeaderPID = "X-Fake-Handler-Pid"
	// PathEnv is answered by the process itself with its Env.
	PathEnv = "/fake-handler/env"
)

// Env is what the process reports at PathEnv.
type Env struct {
	Environ []string `json:"environ"`
	Dir     string   `json:"dir"`
}

// Main runs the fake handler and exits if EnvUpstream is set; otherwise it
// returns at once. Call it first in TestMain.
func Main() {
	upstream := os.Getenv(EnvUpstream)
	if upstream == "" {
		return
	}
	if os.Getenv(EnvExitAtStart) != "" {
		os.Exit(3)
	}
	if line := os.Getenv(EnvLogLine); line != "" {
		fmt.Println(line)
	}
	if os.Getenv(EnvIgnoreTerm) != "" {
		signal.Ignore(syscall.SIGTERM)
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
			r.Out.Header.Set(HeaderPID, pid)
		},
		// A test that drops a connection on purpose needs no log of it.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET "+PathEnv, func(w http.ResponseWriter, r *http.Request) {
		wd, _ := os.Getwd()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Env{Environ: os.Environ(), Dir: wd})
	})
	mux.Handle("/", proxy)
	addr := "127.0.0.1:" + os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT")
	srv := &http.Server{Addr: addr, Handler: mux}
	if os.Getenv(EnvGracefulTerm) != "" {
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
