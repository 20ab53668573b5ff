// Package child runs a custom handler process as the Functions host does: the
// executable gets a free port in FUNCTIONS_CUSTOMHANDLER_PORT, is polled with
// GET / until it answers, is restarted with a bounded back-off when it exits,
// and is stopped with SIGTERM, then SIGKILL.
package child

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/freeport"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
)

// Environment variables the host sets for the handler.
const (
	EnvPort     = "FUNCTIONS_CUSTOMHANDLER_PORT"
	EnvWorkerID = "FUNCTIONS_CUSTOMHANDLER_WORKER_ID"
)

// Errors.
var (
	// ErrStopped: Stop was called.
	ErrStopped = errors.New("child: stopped")
	// ErrGaveUp: the process failed maxFailures times in a row.
	ErrGaveUp = errors.New("child: handler keeps failing, gave up")
)

// Options describe the process. Path is required.
type Options struct {
	Path string
	Args []string
	Dir  string
	// Env is the process environment; EnvPort and EnvWorkerID are set.
	Env            []string
	Stdout, Stderr io.Writer // nil discards
	// ReadyTimeout bounds each start's wait for an answer (default 60 s, as the host).
	ReadyTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL (default 5 s).
	StopGrace time.Duration
	// Logger receives starts, exits and restarts; nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	o.ReadyTimeout = cmp.Or(o.ReadyTimeout, 60*time.Second)
	o.StopGrace = cmp.Or(o.StopGrace, 5*time.Second)
	o.Stdout, o.Stderr = cmp.Or(o.Stdout, io.Discard), cmp.Or(o.Stderr, io.Discard)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	return o
}

// Process supervises the handler. Its methods are safe for concurrent use.
type Process struct {
	opts Options
	stop chan struct{} // closed by Stop
	done chan struct{} // closed when supervision ended

	mu       sync.Mutex
	ready    chan struct{} // closed when the current incarnation answers
	base     string        // http://127.0.0.1:<port> of the current incarnation
	pid      int
	starts   int
	err      error // why supervision ended
	stopOnce sync.Once
	killNow  atomic.Bool // Kill: SIGKILL instead of SIGTERM

	pickPort func() (int, error) // freeport.Pick; tests replace it
}

// Supervision: maxFailures failed starts in a row end it; a run of
// stableAfter after answering resets the count; GET / is probed every
// pollInterval; maxPortRetries bounds the immediate restarts after the port
// was taken.
const (
	maxFailures    = 5
	stableAfter    = 10 * time.Second
	pollInterval   = 100 * time.Millisecond
	maxPortRetries = 3
)

// errPortTaken: the incarnation exited before answering, its port taken.
var errPortTaken = errors.New("child: the port was taken before the handler could bind it")

// Start starts the process and waits, within ctx, until it answers GET /; it
// fails if that first start fails. The process is then supervised until Stop.
func Start(ctx context.Context, opts Options) (*Process, error) {
	if opts.Path == "" {
		return nil, errors.New("child: no executable path")
	}
	return newProcess(opts, freeport.Pick).start(ctx)
}

func newProcess(opts Options, pickPort func() (int, error)) *Process {
	return &Process{opts: opts.withDefaults(), stop: make(chan struct{}), done: make(chan struct{}), ready: make(chan struct{}), pickPort: pickPort}
}

func (p *Process) start(ctx context.Context) (*Process, error) {
	first := make(chan error, 1)
	go p.supervise(first)
	select {
	case err := <-first:
		if err != nil {
			p.Stop()
			return nil, err
		}
		return p, nil
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
}

// Ready blocks until the current incarnation answers and returns its base
// URL, or ctx's error, or why supervision ended.
func (p *Process) Ready(ctx context.Context) (string, error) {
	p.mu.Lock()
	ready, done := p.ready, p.done
	p.mu.Unlock()
	select {
	case <-done:
		return "", p.Err()
	default:
	}
	select {
	case <-ready:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.base, nil
	case <-done:
		return "", p.Err()
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// PID returns the process id of the current incarnation, 0 while none runs.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Starts returns how many times the process was started.
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Done is closed when supervision has ended and no process runs.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns why supervision ended, nil while it runs.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Stop ends supervision: SIGTERM to the process, SIGKILL after StopGrace;
// it returns when the process is gone. Safe to call more than once.
func (p *Process) Stop() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

// Kill ends supervision like Stop, but with SIGKILL at once, as when a machine
// is lost. Safe to call more than once, and after Stop.
func (p *Process) Kill() {
	p.killNow.Store(true)
	p.Stop()
}

func (p *Process) supervise(first chan<- error) {
	// Every incarnation starts from this goroutine, locked to its OS thread for
	// good: the parent-death signal (sysProcAttr) fires when that thread exits.
	runtime.LockOSThread()
	defer close(p.done)
	failures, portRetries := 0, 0
	for {
		started := time.Now()
		ready, err := p.runOnce(first, portRetries < maxPortRetries)
		select {
		case <-p.stop:
			p.finish(ErrStopped)
			return
		default:
		}
		if errors.Is(err, errPortTaken) {
			// Not the handler's failure: start again at once, on another port.
			portRetries++
			p.opts.Logger.Warn("handler could not bind its port; starting it again on another", slog.Any("error", err))
			continue
		}
		first, portRetries = nil, 0
		if ready && time.Since(started) >= stableAfter {
			failures = 0
		}
		failures++
		if failures >= maxFailures {
			p.opts.Logger.Error("handler keeps failing; not restarting it again", slog.Int("failures", failures), slog.Any("error", err))
			p.finish(fmt.Errorf("%w after %d failures in a row: %v", ErrGaveUp, failures, err))
			return
		}
		backoff := time.Duration(1<<min(failures-1, 5)) * 200 * time.Millisecond // 0.2 s .. 6.4 s
		p.opts.Logger.Warn("handler exited; restarting", slog.Any("error", err), slog.Duration("backoff", backoff))
		select {
		case <-p.stop:
			p.finish(ErrStopped)
			return
		case <-time.After(backoff):
		}
	}
}

func (p *Process) finish(err error) {
	p.mu.Lock()
	p.err = err
	p.pid = 0
	p.ready = make(chan struct{}) // never closed: Ready reports err
	p.mu.Unlock()
}

// runOnce runs one incarnation until it exits, reporting its start to first;
// with retryPort, a lost port returns errPortTaken, unreported.
func (p *Process) runOnce(first chan<- error, retryPort bool) (ready bool, err error) {
	report := func(err error) {
		if first != nil {
			first <- err
			first = nil
		}
	}
	port, err := p.pickPort()
	if err != nil {
		err = fmt.Errorf("child: free port: %w", err)
		report(err)
		return false, err
	}
	cmd := exec.Command(p.opts.Path, p.opts.Args...)
	cmd.Dir = p.opts.Dir
	cmd.Env = append(withoutKeys(p.opts.Env, EnvPort, EnvWorkerID),
		EnvPort+"="+strconv.Itoa(port), EnvWorkerID+"="+hostenc.NewGUID())
	cmd.Stdout, cmd.Stderr = p.opts.Stdout, p.opts.Stderr
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		err = fmt.Errorf("child: start %s: %w", p.opts.Path, err)
		report(err)
		return false, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	p.mu.Lock()
	p.pid = cmd.Process.Pid
	p.starts++
	p.mu.Unlock()
	p.opts.Logger.Info("handler started", slog.Int("pid", cmd.Process.Pid), slog.Int("port", port))

	readyErr := make(chan error, 1)
	probeCtx, cancelProbe := context.WithCancel(context.Background())
	defer cancelProbe()
	go func() { readyErr <- p.waitReady(probeCtx, base) }()

	for {
		select {
		case err := <-readyErr:
			readyErr = nil
			if err != nil {
				err = fmt.Errorf("child: %s did not answer GET / within %s: %w", p.opts.Path, p.opts.ReadyTimeout, err)
				report(err)
				p.kill(cmd, exited, false)
				return false, err
			}
			ready = true
			p.mu.Lock()
			p.base = base
			close(p.ready)
			p.mu.Unlock()
			report(nil)
		case werr := <-exited:
			p.mu.Lock()
			p.pid = 0
			if ready {
				p.ready = make(chan struct{})
			}
			p.mu.Unlock()
			err := fmt.Errorf("child: %s exited: %v", p.opts.Path, werr)
			if werr == nil {
				err = fmt.Errorf("child: %s exited with status 0", p.opts.Path)
			}
			if !ready && retryPort && freeport.Taken(port) {
				return false, fmt.Errorf("%w (port %d): %v", errPortTaken, port, err)
			}
			report(err)
			return ready, err
		case <-p.stop:
			report(ErrStopped)
			p.kill(cmd, exited, p.killNow.Load())
			p.mu.Lock()
			p.pid = 0
			p.mu.Unlock()
			return ready, ErrStopped
		}
	}
}

// kill sends SIGTERM to the process group, SIGKILL after StopGrace (at once
// with now), and waits.
func (p *Process) kill(cmd *exec.Cmd, exited <-chan error, now bool) {
	pgid := -cmd.Process.Pid
	if !now {
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-exited:
			return
		case <-time.After(p.opts.StopGrace):
			p.opts.Logger.Warn("handler ignored SIGTERM; killing it", slog.Int("pid", cmd.Process.Pid))
		}
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	<-exited
}

// waitReady polls GET base/ until any HTTP answer, ReadyTimeout, or ctx.
func (p *Process) waitReady(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReadyTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			return nil
		}
		t := time.NewTimer(pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// withoutKeys returns a copy of env without the settings of keys.
func withoutKeys(env []string, keys ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, ok := strings.Cut(kv, "=")
		return ok && slices.Contains(keys, k)
	})
}
