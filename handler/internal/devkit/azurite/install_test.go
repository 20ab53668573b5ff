package azurite

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestInstallRunsNpmCIInTools uses a stand-in npm that records its
// arguments and lays out the azurite-table binary as npm ci would.
func TestInstallRunsNpmCIInTools(t *testing.T) {
	root := t.TempDir()
	tools := filepath.Join(root, ToolsDir)
	app := filepath.Join(root, "app", "deep")
	for _, d := range []string{tools, app} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		if err := os.WriteFile(filepath.Join(tools, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fakeBin := t.TempDir()
	script := "#!/bin/sh\necho \"$@\" > args.txt\nmkdir -p node_modules/.bin\nprintf '#!/bin/sh\\n' > node_modules/.bin/azurite-table\nchmod +x node_modules/.bin/azurite-table\n"
	if err := os.WriteFile(filepath.Join(fakeBin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", fakeBin+":/usr/bin:/bin")
	t.Setenv(EnvBinary, "")

	if _, err := FindFrom(app); err == nil {
		t.Fatal("FindFrom found Azurite before the install")
	}
	got, err := Install(context.Background(), io.Discard, app)
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	if got != tools {
		t.Errorf("installed into %s, want %s", got, tools)
	}
	args, _ := os.ReadFile(filepath.Join(tools, "args.txt"))
	if string(args) != "ci --no-audit --no-fund --loglevel=error\n" {
		t.Errorf("npm args = %q", args)
	}
	if !isFile(filepath.Join(tools, StampFile)) {
		t.Error("no stamp file after the install")
	}
	if p, err := FindFrom(app); err != nil || p != filepath.Join(tools, "node_modules", ".bin", "azurite-table") {
		t.Errorf("FindFrom after install = %q, %v", p, err)
	}
}

func TestInstallErrors(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := Install(context.Background(), io.Discard, t.TempDir()); err == nil {
		t.Error("Install succeeded with no tools folder")
	}
	root := t.TempDir()
	tools := filepath.Join(root, ToolsDir)
	_ = os.MkdirAll(tools, 0o755)
	for _, f := range []string{"package.json", "package-lock.json"} {
		_ = os.WriteFile(filepath.Join(tools, f), []byte("{}"), 0o644)
	}
	if _, err := Install(context.Background(), io.Discard, root); err == nil {
		t.Error("Install succeeded with no npm on the PATH")
	}
}
