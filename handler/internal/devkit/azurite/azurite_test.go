package azurite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// installAt lays out tools/node_modules/.bin/azurite-table under root.
func installAt(t *testing.T, root string) string {
	t.Helper()
	p := filepath.Join(root, binInTools)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindFrom(t *testing.T) {
	t.Setenv(EnvBinary, "")
	t.Setenv("PATH", t.TempDir()) // nothing on the PATH
	repo := t.TempDir()
	bin := installAt(t, repo)
	appRoot := filepath.Join(repo, "deploy", "app")
	exeDir := filepath.Join(repo, "bin")
	elsewhere := t.TempDir()
	for _, d := range []string{appRoot, exeDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	nearer := installAt(t, filepath.Join(repo, "deploy"))

	tests := []struct {
		name string
		dirs []string
		want string
	}{
		{"from the executable's directory", []string{elsewhere, exeDir}, bin},
		{"from the app root, nearest first", []string{elsewhere, appRoot, exeDir}, nearer},
		{"relative directory", []string{mustRel(t, filepath.Join(repo, "bin"))}, bin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindFrom(tt.dirs...)
			if err != nil || got != tt.want {
				t.Errorf("FindFrom(%q) = %q, %v; want %q", tt.dirs, got, err, tt.want)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		_, err := FindFrom(elsewhere, "")
		if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), elsewhere) {
			t.Errorf("FindFrom(%q) = %v, want ErrNotInstalled naming the directory", elsewhere, err)
		}
	})
	t.Run("on the PATH", func(t *testing.T) {
		pathDir := t.TempDir()
		onPath := filepath.Join(pathDir, "azurite-table")
		if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", pathDir)
		if got, err := FindFrom(elsewhere); err != nil || got != onPath {
			t.Errorf("FindFrom = %q, %v; want %q from the PATH", got, err, onPath)
		}
	})
	t.Run("the environment wins", func(t *testing.T) {
		t.Setenv(EnvBinary, "/opt/azurite-table")
		if got, err := FindFrom(exeDir); err != nil || got != "/opt/azurite-table" {
			t.Errorf("FindFrom = %q, %v; want $%s", got, err, EnvBinary)
		}
	})
}

func mustRel(t *testing.T, path string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}
