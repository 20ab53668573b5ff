package devhost

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
)

// TestTwoRunsInOneAppRoot runs two `bin/orderstatus-dev dev` processes in one app
// root at once, as two `make run`s in one checkout: the first serves; a
// second --exit-when-idle run works next to it without touching its
// .run/devhost.json or its handler log; a second serving run refuses with
// one line and starts nothing; the first still serves throughout, and
// removes its file when it stops.
func TestTwoRunsInOneAppRoot(t *testing.T) {
	t.Parallel()
	handler := testenv.Handler(t, repoRoot)
	root := filepath.Dir(filepath.Dir(handler))
	cs := testenv.Azurite(t)
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	app := copyApp(t, root, handler)
	env := append(os.Environ(), SettingStoreConnection+"="+cs, fmt.Sprintf("OrderStore__tableName=tworuns%x", suffix),
		"LOG_LEVEL=info", "ServiceBusConnection__fullyQualifiedNamespace=")
	dir := t.TempDir()
	empty, small := filepath.Join(dir, "empty.jsonl"), filepath.Join(dir, "small.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, []byte(`{"subject":"OrderStatusChanged","sessionId":"o-2nd","messageId":"o-2nd:1","body":{"orderId":"o-2nd","status":"Created","sequence":1}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	handlerLog := filepath.Join(app, devrun.Dir, "handler.log") // what make run passes
	dev := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, handler, append([]string{"dev", "--app-root", app, "--handler-log", handlerLog, "--http-addr", "127.0.0.1:0"}, args...)...)
		cmd.Env, cmd.Dir = env, app
		return cmd
	}

	// The first: serving until it is told to stop.
	first := dev(context.Background(), "--scenario", empty, "--quiet")
	var firstOut, firstErr bytes.Buffer
	first.Stdout, first.Stderr = &firstOut, &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		first.Process.Signal(syscall.SIGINT)
		select {
		case <-firstDone:
		case <-time.After(30 * time.Second):
			first.Process.Kill()
			<-firstDone
			t.Errorf("the first host did not stop on SIGINT")
		}
	}
	t.Cleanup(stop)
	var owner devrun.Endpoints
	deadline := time.Now().Add(60 * time.Second)
	for {
		if e, ok := devrun.Running(app); ok && e.PID == first.Process.Pid && e.HTTPAddr != "" {
			owner = e
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first host did not announce itself\nstderr: %s", firstErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	get := func() int {
		resp, err := http.Get("http://" + owner.HTTPAddr + "/api/orders/o-first")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(30 * time.Second); get() != http.StatusNotFound; {
		if time.Now().After(deadline) {
			t.Fatalf("the first host's front never answered 404 for an unknown order")
		}
		time.Sleep(50 * time.Millisecond)
	}
	logBefore, err := os.ReadFile(handlerLog)
	if err != nil || len(logBefore) == 0 {
		t.Fatalf("the first host's handler log: %d bytes, %v; want its start-up lines", len(logBefore), err)
	}

	t.Run("a second --exit-when-idle run works next to it", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		second := dev(ctx, "--scenario", small, "--exit-when-idle")
		var out, errOut bytes.Buffer
		second.Stdout, second.Stderr = &out, &errOut
		if err := second.Run(); err != nil {
			t.Fatalf("second run: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
		ownLog := withPID(handlerLog, second.Process.Pid)
		for _, want := range []string{fmt.Sprintf("not announced to the CLIs: pid %d owns", owner.PID), "handler output: " + ownLog} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("second run's stdout lacks %q:\n%s", want, out.String())
			}
		}
		if b, err := os.ReadFile(ownLog); err != nil || !bytes.Contains(b, []byte("o-2nd:1")) {
			t.Errorf("the second run's own handler log %s: %v, %d bytes; want its call of o-2nd:1", ownLog, err, len(b))
		}
	})

	t.Run("a second serving run refuses with one line", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		third := dev(ctx, "--scenario", empty)
		var out, errOut bytes.Buffer
		third.Stdout, third.Stderr = &out, &errOut
		err := third.Run()
		if third.ProcessState == nil || third.ProcessState.ExitCode() != ExitFailure {
			t.Fatalf("exit %v, want %d\nstdout:\n%s\nstderr:\n%s", err, ExitFailure, out.String(), errOut.String())
		}
		want := fmt.Sprintf("orderstatus-dev dev: a development host is running in %s already (pid %d, HTTP front http://%s): stop it first", app, owner.PID, owner.HTTPAddr)
		if !strings.HasPrefix(errOut.String(), want) || strings.Count(errOut.String(), "\n") != 1 || out.Len() != 0 {
			t.Errorf("stdout %q, stderr %q; want nothing, then one line starting %q", out.String(), errOut.String(), want)
		}
	})

	// The first host is untouched: its file, its log, its front.
	if e, ok := devrun.Running(app); !ok || e != owner {
		t.Errorf("after the other runs: .run/devhost.json = %+v (%v), want the first host's %+v", e, ok, owner)
	}
	if logAfter, _ := os.ReadFile(handlerLog); !bytes.HasPrefix(logAfter, logBefore) {
		t.Errorf("the first host's handler log lost its start (%d bytes before, %d after): a second run truncated it", len(logBefore), len(logAfter))
	}
	if code := get(); code != http.StatusNotFound {
		t.Errorf("the first host's front answers %d, want 404 for an unknown order", code)
	}
	stop()
	if _, err := os.Stat(devrun.Path(app)); !os.IsNotExist(err) {
		t.Errorf("after the first host stopped: %s: %v, want it removed", devrun.Path(app), err)
	}
	// Ctrl-C: exit 0 and a closing line that says what it stopped.
	if code := first.ProcessState.ExitCode(); code != ExitOK {
		t.Errorf("the first host exited %d on SIGINT, want %d", code, ExitOK)
	}
	// One handler per instance group.
	closing := regexp.MustCompile(`(?m)^orderstatus-dev dev: interrupted: stopped OrderStatus-1's handler \(pid (\d+)\), DeadLetterSweeper-1's handler \(pid (\d+)\), http-1's handler \(pid (\d+)\), and \.run/devhost\.json is gone; nothing is left running$`)
	m := closing.FindStringSubmatch(firstOut.String())
	if m == nil {
		t.Fatalf("the first host's stdout has no closing line:\n%s\nstderr:\n%s", firstOut.String(), firstErr.String())
	}
	for _, s := range m[1:] {
		pid, _ := strconv.Atoi(s)
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the handler (pid %d) the closing line says it stopped: kill -0 = %v, want no such process", pid, err)
		}
	}
}
