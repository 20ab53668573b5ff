package azurite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ToolsDir is the project folder whose package.json pins Azurite.
const ToolsDir = "tools"

// StampFile marks a completed install (the Makefile's tools target uses it).
const StampFile = "node_modules/.installed"

// Install runs `npm ci` in the first ToolsDir with package.json and
// package-lock.json in or above dirs, writing npm's output to out, and
// returns that directory. It needs npm on the PATH and the npm registry.
func Install(ctx context.Context, out io.Writer, dirs ...string) (string, error) {
	tools, err := findTools(dirs)
	if err != nil {
		return "", err
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("azurite: install: npm not found on the PATH (install Node.js and npm, then run 'make tools'): %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tools
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("azurite: npm ci in %s: %w", tools, err)
	}
	stamp := filepath.Join(tools, StampFile)
	if f, err := os.Create(stamp); err == nil {
		f.Close()
	}
	return tools, nil
}

// findTools returns the first ToolsDir with a lock file in or above one of dirs.
func findTools(dirs []string) (string, error) {
	tools, _ := searchUp(dirs, func(dir string) (string, bool) {
		t := filepath.Join(dir, ToolsDir)
		return t, isFile(filepath.Join(t, "package.json")) && isFile(filepath.Join(t, "package-lock.json"))
	})
	if tools == "" {
		return "", errors.New("azurite: install: no tools/package.json with a lock file in or above the app")
	}
	return tools, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}
