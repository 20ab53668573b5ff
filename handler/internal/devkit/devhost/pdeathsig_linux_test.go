package devhost

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
)

// TestKilledHostTakesChildrenDown runs `orderstatus-dev dev` as a process of its
// own (this test binary, with the fake handler and a fake Azurite as its
// children), kills it with SIGKILL, and expects the kernel to kill all its
// children too: nothing may be left running behind a killed development
// host.
func TestKilledHostTakesChildrenDown(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := mainApp(t)
	up := orderUpstream(t, nil)
	// The second line, due in an hour, keeps the workload (and so the
	// host and its children) running until the kill, however fast the
	// first one is handled.
	scenarioPath := writeScenario(t, root,
		`{"subject":"OrderStatusChanged","sessionId":"o-1","messageId":"o-1:1","body":{"orderId":"o-1","status":"Created","sequence":1}}`,
		`{"subject":"OrderStatusChanged","sessionId":"o-2","messageId":"o-2:1","sendAfter":"1h","body":{"orderId":"o-2","status":"Created","sequence":1}}`)
	cmd := exec.Command(exe, mainArg, "--app-root", root, "--scenario", scenarioPath, "--http-addr", "127.0.0.1:0", "--quiet")
	cmd.Env = append(os.Environ(),
		fakeUpstream+"="+up.URL,
		azurite.EnvBinary+"="+exe,
		fakeAzuriteDieFile+"=",
		SettingStoreConnection+"=",
		SettingStoreServiceURI+"=",
	)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var children []int
	t.Cleanup(func() { // whatever happens, leave nothing behind
		_ = cmd.Process.Kill()
		for _, pid := range children {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// The front's address is printed once the store and the handler run.
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	deadline := time.After(30 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("orderstatus-dev dev ended before it was up:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if strings.Contains(l, "HTTP front on") {
				break wait
			}
		case <-deadline:
			t.Fatalf("orderstatus-dev dev did not come up:\n%s", strings.Join(seen, "\n"))
		}
	}
	go func() {
		for range lines { // keep the pipe drained
		}
	}()
	children = childrenOf(t, cmd.Process.Pid)
	// A handler per instance group of the app (OrderStatus, http) and
	// Azurite.
	if len(children) != 3 {
		t.Fatalf("orderstatus-dev dev has children %v, want three (a handler per group and Azurite)", children)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, "the children of the killed orderstatus-dev dev to exit", func() bool {
		for _, pid := range children {
			if alive(pid) {
				return false
			}
		}
		return true
	})
}

// childrenOf returns the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie waiting for its new parent to
// reap it does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
