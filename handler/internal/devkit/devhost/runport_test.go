package devhost

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// busyPort listens on a free loopback port for the test and returns its
// address.
func busyPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// freePort returns a loopback address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

const runElsewhere = `make run ARGS="--http-addr 127.0.0.1:PORT"`

// TestCheckRunPort runs scripts/check-run-port.sh, which `make run` runs
// before it installs or builds anything: an address in use fails at once
// with one line that names how to run elsewhere; a free one passes.
func TestCheckRunPort(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(repoRoot, "scripts", "check-run-port.sh"))
	if err != nil {
		t.Fatal(err)
	}
	busy, free := busyPort(t), freePort(t)
	for _, tt := range []struct {
		name     string
		args     []string
		wantFail bool
	}{
		{"busy address named", []string{"--http-addr", busy}, true},
		{"busy address named with =", []string{"--scenario", "x.jsonl", "--http-addr=" + busy}, true},
		{"busy address named, exit when idle", []string{"--exit-when-idle", "--http-addr", busy}, true},
		{"free address", []string{"--http-addr", free}, false},
		{"no front", []string{"--http-addr", "off"}, false},
		{"a port the kernel picks", []string{"--http-addr", "127.0.0.1:0"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("bash", append([]string{script}, tt.args...)...)
			cmd.Dir = t.TempDir()
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			switch {
			case tt.wantFail && !errors.As(err, &ee):
				t.Fatalf("exit: got %v, want status 1\nstderr: %s", err, stderr.String())
			case tt.wantFail:
				if ee.ExitCode() != 1 {
					t.Errorf("exit status %d, want 1", ee.ExitCode())
				}
				line := stderr.String()
				if strings.Count(line, "\n") != 1 || !strings.Contains(line, busy) || !strings.Contains(line, runElsewhere) {
					t.Errorf("stderr %q: want one line naming %s and %s", line, busy, runElsewhere)
				}
			case err != nil:
				t.Errorf("exit: got %v, want 0\nstderr: %s", err, stderr.String())
			}
			if stdout.String() != "" {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestMakeRunBusyAddressFailsFirst runs `make run` on an address in use:
// it fails with the check's line before it installs (npm) or builds (go)
// anything.
func TestMakeRunBusyAddressFailsFirst(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make not on PATH")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	// A fake npm and go that leave a mark: neither may run.
	fake := t.TempDir()
	mark := filepath.Join(fake, "ran")
	for _, name := range []string{"npm", "go"} {
		body := "#!/bin/sh\necho " + name + " >> '" + mark + "'\nexit 1\n"
		if err := os.WriteFile(filepath.Join(fake, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	busy := busyPort(t)
	cmd := exec.Command(mk, "--no-print-directory", "-C", root, "run", "ARGS=--http-addr "+busy, "GO="+filepath.Join(fake, "go"))
	cmd.Env = append(os.Environ(), "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"), "MAKEFLAGS=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make run on a busy address succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), runElsewhere) {
		t.Errorf("make run's output lacks %s:\n%s", runElsewhere, out)
	}
	if b, err := os.ReadFile(mark); err == nil {
		t.Errorf("make run ran %s before the address check failed:\n%s", strings.Fields(string(b)), out)
	}
}

// TestCheckRunPortSameClone: when the run holding the address is this
// clone's own (its .run/devhost.json names the address and a live pid),
// another address would not help (one serving run per clone): the line
// says to stop it or to run a workload next to it.
func TestCheckRunPortSameClone(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "check-run-port.sh"))
	if err != nil {
		t.Fatal(err)
	}
	clone := t.TempDir()
	for _, d := range []string{"scripts", ".run"} {
		if err := os.Mkdir(filepath.Join(clone, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(clone, "scripts", "check-run-port.sh")
	if err := os.WriteFile(script, src, 0o755); err != nil {
		t.Fatal(err)
	}
	busy := busyPort(t)
	run := fmt.Sprintf("{\n  \"pid\": %d,\n  \"brokerUrl\": \"http://127.0.0.1:1\",\n  \"httpAddr\": %q\n}\n", os.Getpid(), busy)
	if err := os.WriteFile(filepath.Join(clone, ".run", "devhost.json"), []byte(run), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "--http-addr", busy)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1\nstderr: %s", err, stderr.String())
	}
	want := fmt.Sprintf("this clone's make run (pid %d) serves on %s", os.Getpid(), busy)
	if line := stderr.String(); strings.Count(line, "\n") != 1 || !strings.Contains(line, want) || !strings.Contains(line, "--exit-when-idle") {
		t.Errorf("stderr %q: want one line saying %q and naming --exit-when-idle", line, want)
	}
}
