package devrun_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devrun"
)

func TestWriteFindRemove(t *testing.T) {
	root := t.TempDir()
	want := devrun.Endpoints{
		PID: os.Getpid(), BrokerURL: "http://127.0.0.1:1234", StoreConnectionString: "UseDevelopmentStorage=true",
		HTTPAddr: "127.0.0.1:7071", Queue: "order-status", PoisonQueue: "order-status-poison",
		AppRoot: root, StartedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	}
	remove, err := devrun.Write(root, want)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(devrun.Path(root))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("file mode %v, want 0600", perm)
	}
	// Found from a folder below the app root, as a command run inside the
	// checkout would.
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := devrun.Find(sub)
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	if got != want {
		t.Errorf("Find = %+v, want %+v", got, want)
	}
	remove()
	if _, err := devrun.Find(sub); !errors.Is(err, devrun.ErrNotRunning) {
		t.Errorf("Find after remove: %v, want ErrNotRunning", err)
	}
}

func TestFindSkipsStaleFile(t *testing.T) {
	root := t.TempDir()
	// A process that has exited: its id is free (or reused much later).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := devrun.Write(root, devrun.Endpoints{PID: cmd.Process.Pid, BrokerURL: "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	_, err := devrun.Find(root)
	if !errors.Is(err, devrun.ErrNotRunning) {
		t.Fatalf("Find = %v, want ErrNotRunning", err)
	}
	if want := "has stopped"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestRemoveLeavesAnotherHostsFile(t *testing.T) {
	root := t.TempDir()
	first, err := devrun.Write(root, devrun.Endpoints{PID: os.Getpid(), BrokerURL: "http://127.0.0.1:1", StartedAt: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	second := devrun.Endpoints{PID: os.Getpid(), BrokerURL: "http://127.0.0.1:2", StartedAt: time.Unix(2, 0)}
	if _, err := devrun.Write(root, second); err != nil {
		t.Fatal(err)
	}
	first()
	got, err := devrun.Find(root)
	if err != nil || got.BrokerURL != second.BrokerURL {
		t.Errorf("after the first host's remove: Find = %+v, %v; want the second host's file", got, err)
	}
}

func TestFindMalformed(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, devrun.Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(devrun.Path(root), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := devrun.Find(root)
	if err == nil || errors.Is(err, devrun.ErrNotRunning) {
		t.Errorf("Find on a malformed file = %v, want an error naming it", err)
	}
}

// TestWriteRefusesOverALiveHost: while another live process owns the
// file, a second Write changes nothing and says who owns it; once that
// process is gone, Write takes the file over.
func TestWriteRefusesOverALiveHost(t *testing.T) {
	root := t.TempDir()
	owner := exec.Command("sleep", "60") // stands in for the first host's process
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Process.Kill(); owner.Wait() })
	first := devrun.Endpoints{PID: owner.Process.Pid, BrokerURL: "http://127.0.0.1:1", HTTPAddr: "127.0.0.1:7071", StartedAt: time.Unix(1, 0)}
	if _, err := devrun.Write(root, first); err != nil {
		t.Fatal(err)
	}
	if got, ok := devrun.Running(root); !ok || got.PID != first.PID {
		t.Fatalf("Running = %+v, %v; want the first host", got, ok)
	}
	_, err := devrun.Write(root, devrun.Endpoints{PID: os.Getpid(), BrokerURL: "http://127.0.0.1:2", StartedAt: time.Unix(2, 0)})
	var re *devrun.RunningError
	if !errors.As(err, &re) || re.Owner.PID != first.PID {
		t.Fatalf("second Write = %v, want a *RunningError naming pid %d", err, first.PID)
	}
	for _, want := range []string{"running here already", "127.0.0.1:7071"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got, err := devrun.Find(root); err != nil || got.BrokerURL != first.BrokerURL {
		t.Errorf("after the refused Write: Find = %+v, %v; want the first host's file unchanged", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, devrun.Dir)); len(entries) != 1 {
		t.Errorf(".run holds %d entries, want only %s (no temporary file left)", len(entries), devrun.File)
	}

	owner.Process.Kill()
	owner.Wait()
	if _, ok := devrun.Running(root); ok {
		t.Error("Running after the owner died: true, want false")
	}
	second := devrun.Endpoints{PID: os.Getpid(), BrokerURL: "http://127.0.0.1:3", StartedAt: time.Unix(3, 0)}
	if _, err := devrun.Write(root, second); err != nil {
		t.Fatalf("Write over a stopped host's file: %v", err)
	}
	if got, err := devrun.Find(root); err != nil || got.BrokerURL != second.BrokerURL {
		t.Errorf("Find = %+v, %v; want the new file", got, err)
	}
}
