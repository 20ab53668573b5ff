package child

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/freeport"
)

// The test binary re-executes itself as the handler when fakeHandler is
// set: it answers GET / and GET /whoami (its pid) on EnvPort.
const (
	fakeHandler     = "CHILD_FAKE_HANDLER"
	fakeExitAtStart = "CHILD_FAKE_HANDLER_EXIT"        // exit 3 at once
	fakeIgnoreTerm  = "CHILD_FAKE_HANDLER_IGNORE_TERM" // ignore SIGTERM
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeHandler) == "" {
		os.Exit(m.Run())
	}
	if os.Getenv(fakeExitAtStart) != "" {
		os.Exit(3)
	}
	if os.Getenv(fakeIgnoreTerm) != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	http.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, os.Getpid()) })
	http.HandleFunc("GET /{$}", func(http.ResponseWriter, *http.Request) {})
	fmt.Fprintln(os.Stderr, "fake handler:", http.ListenAndServe("127.0.0.1:"+os.Getenv(EnvPort), nil))
	os.Exit(1)
}

func options(t *testing.T, extraEnv ...string) Options {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), fakeHandler+"=1")
	return Options{
		Path:         exe,
		Env:          append(env, extraEnv...),
		ReadyTimeout: 20 * time.Second,
		StopGrace:    2 * time.Second,
		Stderr:       os.Stderr,
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pidAt asks the process behind base for its pid.
func pidAt(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/whoami")
	if err != nil {
		t.Fatalf("GET %s/whoami: %v", base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("whoami answered %q", b)
	}
	return pid
}

func TestStartReadyStop(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	p, err := Start(ctx, options(t))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	base, err := p.Ready(ctx)
	if err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("base URL: got %q, want http://127.0.0.1:<port>", base)
	}
	if got, want := pidAt(t, base), p.PID(); got != want || want == 0 {
		t.Errorf("pid behind the base URL: got %d, want PID() %d", got, want)
	}
	p.Stop()
	if p.PID() != 0 {
		t.Errorf("PID after Stop: got %d, want 0", p.PID())
	}
	if _, err := p.Ready(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Ready after Stop: got %v, want ErrStopped", err)
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Errorf("the process still answers after Stop")
	}
	p.Stop() // idempotent
}

func TestRestartAfterKill(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	p, err := Start(ctx, options(t))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Stop()
	first := p.PID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	// Wait for a new incarnation to answer.
	var base string
	for {
		base, err = p.Ready(ctx)
		if err != nil {
			t.Fatalf("Ready: %v", err)
		}
		if pid := p.PID(); pid != 0 && pid != first {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := pidAt(t, base); got == first {
		t.Errorf("after the kill the base URL still reaches pid %d", got)
	}
	if got := p.Starts(); got != 2 {
		t.Errorf("Starts: got %d, want 2", got)
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	t.Run("missing executable", func(t *testing.T) {
		o := options(t)
		o.Path = "/nonexistent/handler"
		if _, err := Start(ctx, o); err == nil || !strings.Contains(err.Error(), "/nonexistent/handler") {
			t.Errorf("Start: got %v, want an error naming the path", err)
		}
	})
	t.Run("exits at start", func(t *testing.T) {
		o := options(t, fakeExitAtStart+"=1")
		if _, err := Start(ctx, o); err == nil || !strings.Contains(err.Error(), "exited") {
			t.Errorf("Start: got %v, want an error saying it exited", err)
		}
	})
	t.Run("never answers", func(t *testing.T) {
		o := options(t)
		o.Path, o.Args = "sleep", []string{"30"}
		o.ReadyTimeout = 300 * time.Millisecond
		if _, err := Start(ctx, o); err == nil || !strings.Contains(err.Error(), "did not answer") {
			t.Errorf("Start: got %v, want an error saying it did not answer", err)
		}
	})
}

func TestGivesUp(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	var killed atomic.Int32
	p, err := Start(ctx, options(t))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Stop()
	// Kill each incarnation as soon as it runs: quick deaths count as
	// failures, and the maxFailures-th ends supervision.
	for {
		select {
		case <-p.Done():
			if !errors.Is(p.Err(), ErrGaveUp) {
				t.Errorf("Err: got %v, want ErrGaveUp", p.Err())
			}
			if _, err := p.Ready(ctx); !errors.Is(err, ErrGaveUp) {
				t.Errorf("Ready: got %v, want ErrGaveUp", err)
			}
			if killed.Load() != maxFailures {
				t.Errorf("kills: got %d, want %d", killed.Load(), maxFailures)
			}
			return
		case <-ctx.Done():
			t.Fatalf("supervision did not give up")
		default:
		}
		if pid := p.PID(); pid != 0 {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed.Add(1)
				for p.PID() == pid {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	o := options(t, fakeIgnoreTerm+"=1")
	o.StopGrace = 200 * time.Millisecond
	p, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pid := p.PID()
	p.Stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after Stop: kill(0) = %v, want ESRCH", pid, err)
	}
}

func TestWithoutKeys(t *testing.T) {
	t.Parallel()
	got := withoutKeys([]string{"A=1", EnvPort + "=9", "B=2", EnvPort + "X=3", EnvWorkerID + "=w"}, EnvPort, EnvWorkerID)
	want := []string{"A=1", "B=2", EnvPort + "X=3"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("withoutKeys: got %v, want %v", got, want)
	}
}

func TestKillDoesNotWaitForTerm(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	// The process ignores SIGTERM; with a grace of 20 s, only a SIGKILL
	// sent at once ends it within the test's bound.
	o := options(t, fakeIgnoreTerm+"=1")
	o.StopGrace = 20 * time.Second
	p, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pid := p.PID()
	done := make(chan struct{})
	go func() { p.Kill(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Kill waited for the process to honour SIGTERM")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after Kill: kill(0) = %v, want ESRCH", pid, err)
	}
	if _, err := p.Ready(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Ready after Kill: got %v, want ErrStopped", err)
	}
	p.Kill() // idempotent
}

// TestTakenPortStartsAgain: a handler that exits before answering because
// another socket took its port between the pick and its bind (the race
// package freeport narrows) is started again at once on another port, and
// Start succeeds; a handler that keeps meeting a taken port fails as any
// other after maxPortRetries.
func TestTakenPortStartsAgain(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port

	t.Run("once", func(t *testing.T) {
		picks := 0
		p, err := newProcess(options(t), func() (int, error) {
			picks++
			if picks == 1 {
				return taken, nil
			}
			return freeport.Pick()
		}).start(ctx)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer p.Stop()
		base, err := p.Ready(ctx)
		if err != nil {
			t.Fatalf("Ready: %v", err)
		}
		if base == "http://127.0.0.1:"+strconv.Itoa(taken) {
			t.Errorf("base URL %s is the taken port", base)
		}
		if got := pidAt(t, base); got != p.PID() {
			t.Errorf("pid behind the base URL: got %d, want %d", got, p.PID())
		}
		if got := p.Starts(); got != 2 {
			t.Errorf("Starts: got %d, want 2 (the taken port's, then the answering one)", got)
		}
	})
	t.Run("always", func(t *testing.T) {
		p := newProcess(options(t), func() (int, error) { return taken, nil })
		if _, err := p.start(ctx); err == nil || !strings.Contains(err.Error(), "exited") {
			t.Fatalf("Start: got %v, want the handler's exit", err)
		}
		if got, want := p.Starts(), maxPortRetries+1; got != want {
			t.Errorf("Starts: got %d, want %d", got, want)
		}
	})
	t.Run("port free after the exit", func(t *testing.T) {
		// A handler that exits at start on a free port is not retried:
		// its own failure is reported at once.
		p := newProcess(options(t, fakeExitAtStart+"=1"), freeport.Pick)
		if _, err := p.start(ctx); err == nil {
			t.Fatal("Start succeeded")
		}
		if got := p.Starts(); got != 1 {
			t.Errorf("Starts: got %d, want 1", got)
		}
	})
}
