// Package azurite starts and stops Azurite's Table service (installed into
// tools/node_modules) on 127.0.0.1, for tests and the development host.
package azurite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/freeport"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// AccountName and AccountKey are Azurite's well-known development account
// (published in Azurite's README; not a secret).
const (
	AccountName = "devstoreaccount1"
	AccountKey  = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// ConnectionString returns the connection string for an Azurite Table service at host:port.
func ConnectionString(hostPort string) string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;TableEndpoint=http://%s/%s;",
		AccountName, AccountKey, hostPort, AccountName)
}

// Server is a running azurite-table process.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
	err  error
}

// ConnectionString returns the connection string for this server.
func (s *Server) ConnectionString() string { return ConnectionString(s.Addr) }

// Options tune Start. The zero value is usable.
type Options struct {
	// Binary is the azurite-table executable; empty means FindFrom(".").
	Binary string
	// Log receives the process output; nil discards it.
	Log io.Writer
}

// ErrNotInstalled is returned by FindFrom when no azurite-table exists.
var ErrNotInstalled = errors.New("azurite: azurite-table not installed (run 'make tools')")

// EnvBinary names an azurite-table executable FindFrom returns as is.
const EnvBinary = "AZURITE_TABLE_BIN"

// binInTools is where 'make tools' installs azurite-table, from the repository root.
var binInTools = filepath.Join("tools", "node_modules", ".bin", "azurite-table")

// FindFrom returns $AZURITE_TABLE_BIN, else binInTools in or above each of
// dirs, else azurite-table on the PATH; the error wraps ErrNotInstalled.
func FindFrom(dirs ...string) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		return p, nil
	}
	p, searched := searchUp(dirs, func(dir string) (string, bool) {
		p := filepath.Join(dir, binInTools)
		return p, isFile(p)
	})
	if p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("azurite-table"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: no %s in or above %s, none on the PATH, and %s is not set",
		ErrNotInstalled, binInTools, strings.Join(searched, ", "), EnvBinary)
}

// searchUp returns the first result found accepts for dirs and the
// directories above them, nearest first; searched lists the absolute dirs.
func searchUp(dirs []string, found func(dir string) (string, bool)) (result string, searched []string) {
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		dir, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		searched = append(searched, dir)
		for !seen[dir] {
			seen[dir] = true
			if r, ok := found(dir); ok {
				return r, searched
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", searched
}

// Start launches azurite-table in memory on a free port of 127.0.0.1 and
// waits until it answers (30 s at most); it tries three ports.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = FindFrom("."); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		port, err := freeport.Pick()
		if err != nil {
			return nil, fmt.Errorf("azurite: free port: %w", err)
		}
		s, err := start(ctx, bin, port, opts.Log, 30*time.Second)
		if err == nil || attempt >= 2 {
			return s, err
		}
	}
}

func start(ctx context.Context, bin string, port int, logw io.Writer, timeout time.Duration) (*Server, error) {
	cmd := exec.Command(bin, "--tableHost", "127.0.0.1", "--tablePort", fmt.Sprint(port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--disableProductStyleUrl", "--silent")
	cmd.SysProcAttr = sysProcAttr()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	// Start and wait on a locked OS thread: Pdeathsig fires when it exits.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.err = cmd.Wait()
		pw.Close()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("azurite: start %s: %w", bin, err)
	}
	var tail lineTail
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			tail.add(sc.Text())
			if logw != nil {
				fmt.Fprintln(logw, sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + s.Addr + "/" + AccountName + "/Tables")
		if err == nil {
			resp.Body.Close()
			// Only Azurite's answer counts: another process may have taken the port.
			if strings.HasPrefix(resp.Header.Get("Server"), "Azurite-Table") {
				return s, nil
			}
			err = fmt.Errorf("%s answered as %q, not Azurite", s.Addr, resp.Header.Get("Server"))
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("azurite: exited before answering on %s: %v: %s", s.Addr, s.err, tail.String())
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("azurite: no answer on %s within %s: %s", s.Addr, timeout, tail.String())
		}
	}
}

// Stop ends the process group and waits for it. Safe to call more than once.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.cmd.Process != nil {
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
				<-s.done
			}
		}
	})
}

// Done is closed when the process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns how the process ended once Done is closed, and nil before.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// PID returns the process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

type lineTail struct {
	mu    sync.Mutex
	lines []string
}

func (t *lineTail) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, l)
	if len(t.lines) > 10 {
		t.lines = t.lines[1:]
	}
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, " | ")
}
