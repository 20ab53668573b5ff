// Package devrun is how the operator and producer commands (`handler
// deadletters`, `orderstatus publish`) find a running development host: the
// host writes .run/devhost.json under its app root (mode 0600) naming its
// broker, store and HTTP front, and removes it when it stops.
package devrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Dir and File name where a development host writes its endpoints, under its app root.
const (
	Dir  = ".run"
	File = "devhost.json"
)

// ErrNotRunning means no running development host was found.
var ErrNotRunning = errors.New("devrun: no running development host")

// Endpoints is what a development host publishes about itself.
type Endpoints struct {
	// PID is the development host's process id.
	PID int `json:"pid"`
	// BrokerURL is the loopback broker (package broker/loopback).
	BrokerURL string `json:"brokerUrl"`
	// StoreConnectionString is the Table Storage connection string the handler uses.
	StoreConnectionString string `json:"storeConnectionString,omitempty"`
	// StoreServiceURI is set instead when the settings name a service URI.
	StoreServiceURI string `json:"storeServiceUri,omitempty"`
	// HTTPAddr is the front's host:port ("" without a front).
	HTTPAddr string `json:"httpAddr,omitempty"`
	// Queue and PoisonQueue are the queue names the host serves.
	Queue       string `json:"queue"`
	PoisonQueue string `json:"poisonQueue"`
	// HandlerLog is the absolute file of the handler's output ("": standard error).
	HandlerLog string `json:"handlerLog,omitempty"`
	// TimeScale is the broker clock's speed (0 or 1: real time).
	TimeScale float64 `json:"timeScale,omitempty"`
	// AppRoot is the host's app root (absolute).
	AppRoot   string    `json:"appRoot"`
	StartedAt time.Time `json:"startedAt"`
}

// Path returns the file's path under appRoot.
func Path(appRoot string) string { return filepath.Join(appRoot, Dir, File) }

// RunningError is Write's refusal: another live development host owns the file.
type RunningError struct {
	Path  string    // the file
	Owner Endpoints // what it says
}

func (e *RunningError) Error() string {
	front := ""
	if e.Owner.HTTPAddr != "" {
		front = ", HTTP front http://" + e.Owner.HTTPAddr
	}
	return fmt.Sprintf("devrun: a development host is running here already (pid %d%s, since %s; %s)",
		e.Owner.PID, front, e.Owner.StartedAt.Local().Format("15:04:05"), e.Path)
}

// Running returns the live development host that owns appRoot's file, if any.
func Running(appRoot string) (Endpoints, bool) {
	e, err := read(Path(appRoot))
	if err != nil || !alive(e.PID) {
		return Endpoints{}, false
	}
	return e, true
}

// Write publishes e under appRoot atomically unless another live host owns
// the file (*RunningError); remove deletes the file if it is still e's.
func Write(appRoot string, e Endpoints) (remove func(), err error) {
	dir := filepath.Join(appRoot, Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("devrun: %w", err)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("devrun: encode: %w", err)
	}
	tmp, err := os.CreateTemp(dir, File+".*")
	if err != nil {
		return nil, fmt.Errorf("devrun: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return nil, fmt.Errorf("devrun: write: %w", err)
	}
	path := Path(appRoot)
	// Link, unlike rename, fails when the file exists: one of two hosts wins.
	for attempt := 0; ; attempt++ {
		err := os.Link(tmp.Name(), path)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || attempt == 3 {
			return nil, fmt.Errorf("devrun: %w", err)
		}
		cur, rerr := read(path)
		if rerr == nil && alive(cur.PID) && cur.PID != e.PID {
			return nil, &RunningError{Path: path, Owner: cur}
		}
		// Stale, malformed, or this process's own: replace it.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("devrun: %w", err)
		}
	}
	return func() {
		if cur, err := read(path); err == nil && cur.PID == e.PID && cur.StartedAt.Equal(e.StartedAt) {
			os.Remove(path)
		}
	}, nil
}

// Find looks for a live development host's file in dir and its parents.
func Find(dir string) (Endpoints, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Endpoints{}, fmt.Errorf("devrun: %w", err)
	}
	stale := ""
	for d := dir; ; d = filepath.Dir(d) {
		path := Path(d)
		e, err := read(path)
		switch {
		case err == nil && alive(e.PID):
			return e, nil
		case err == nil:
			stale = path
		case !errors.Is(err, fs.ErrNotExist):
			return Endpoints{}, fmt.Errorf("devrun: %s: %w", path, err)
		}
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	if stale != "" {
		return Endpoints{}, fmt.Errorf("%w: %s was left by a development host that has stopped", ErrNotRunning, stale)
	}
	return Endpoints{}, fmt.Errorf("%w: no %s in %s or above", ErrNotRunning, filepath.Join(Dir, File), dir)
}

func read(path string) (Endpoints, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Endpoints{}, err
	}
	var e Endpoints
	if err := json.Unmarshal(b, &e); err != nil {
		return Endpoints{}, fmt.Errorf("malformed: %w", err)
	}
	if e.PID <= 0 || e.BrokerURL == "" {
		return Endpoints{}, errors.New("malformed: no pid or broker URL")
	}
	return e, nil
}

// alive reports whether a process with that id exists (signal 0).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
