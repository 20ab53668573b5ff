package circuit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	var changes []string
	b := New(Options{Threshold: 3, ProbeInterval: 5 * time.Second, Now: clk.now,
		OnChange: func(from, to State) { changes = append(changes, from.String()+">"+to.String()) }})

	// Failures below the threshold, and a success that resets the count.
	for _, failed := range []bool{true, true, false, true, true} {
		tk, ok := b.Allow()
		if !ok || tk.Probe() {
			t.Fatalf("closed breaker refused a call or made it a probe")
		}
		tk.Done(failed)
	}
	if b.State() != Closed {
		t.Fatalf("state %s after 2 failures in a row, want closed", b.State())
	}
	tk, _ := b.Allow()
	tk.Done(true) // the third in a row
	if b.State() != Open {
		t.Fatalf("state %s after 3 failures in a row, want open", b.State())
	}
	if _, ok := b.Allow(); ok {
		t.Fatal("open breaker allowed a call before the probe interval")
	}
	clk.add(5 * time.Second)
	probe, ok := b.Allow()
	if !ok || !probe.Probe() {
		t.Fatal("open breaker refused the probe after the interval")
	}
	if _, ok := b.Allow(); ok {
		t.Fatal("a second call was allowed while the probe runs")
	}
	clk.add(time.Minute)
	if _, ok := b.Allow(); ok {
		t.Fatal("a second probe was allowed while the first runs")
	}
	probe.Done(true)
	if b.State() != Open {
		t.Fatalf("state %s after a failed probe, want open", b.State())
	}
	if _, ok := b.Allow(); ok {
		t.Fatal("a probe right after a failed one was allowed")
	}
	clk.add(5 * time.Second)
	probe, ok = b.Allow()
	if !ok || !probe.Probe() {
		t.Fatal("no probe after the interval")
	}
	probe.Done(false)
	if b.State() != Closed {
		t.Fatalf("state %s after a good probe, want closed", b.State())
	}
	if tk, ok := b.Allow(); !ok || tk.Probe() {
		t.Fatal("closed breaker refused a call")
	}
	want := []string{"closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed"}
	if len(changes) != len(want) {
		t.Fatalf("changes %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Errorf("change %d = %s, want %s", i, changes[i], want[i])
		}
	}
}

// A call let through while closed that answers after the breaker opened
// shows that the store answers again: it closes the breaker.
func TestLateSuccessCloses(t *testing.T) {
	b := New(Options{Threshold: 1})
	slow, _ := b.Allow()
	fail, _ := b.Allow()
	fail.Done(true)
	if b.State() != Open {
		t.Fatalf("state %s, want open", b.State())
	}
	slow.Done(false)
	if b.State() != Closed {
		t.Fatalf("state %s, want closed", b.State())
	}
	Ticket{}.Done(true) // a zero ticket is ignored
	if b.State() != Closed {
		t.Fatalf("zero ticket changed the state to %s", b.State())
	}
}

func TestOneProbeAtATimeUnderConcurrency(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	b := New(Options{Threshold: 1, ProbeInterval: time.Second, Now: clk.now})
	tk, _ := b.Allow()
	tk.Done(true)
	clk.add(time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	probes := 0
	for range 50 {
		wg.Go(func() {
			if tk, ok := b.Allow(); ok {
				mu.Lock()
				probes++
				mu.Unlock()
				_ = tk
			}
		})
	}
	wg.Wait()
	if probes != 1 {
		t.Fatalf("%d calls allowed at once on an open breaker, want 1 probe", probes)
	}
}

// A probe cut short says nothing about the store: the breaker stays open
// and the next probe may go.
func TestAbortedProbe(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	b := New(Options{Threshold: 1, ProbeInterval: time.Second, Now: clk.now})
	tk, _ := b.Allow()
	tk.Done(true)
	clk.add(time.Second)
	probe, ok := b.Allow()
	if !ok || !probe.Probe() {
		t.Fatal("no probe")
	}
	probe.Abort()
	if b.State() != Open {
		t.Fatalf("state %s after an aborted probe, want open", b.State())
	}
	if next, ok := b.Allow(); !ok || !next.Probe() {
		t.Fatal("the probe slot was not freed")
	}
}

func TestGuard(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	b := New(Options{Threshold: 2, ProbeInterval: 5 * time.Second, Now: clk.now})
	down, cut := errors.New("store down"), context.Canceled
	type singleKey struct{}
	single := func(ctx context.Context) context.Context { return context.WithValue(ctx, singleKey{}, true) }
	var fail error // what the next call returns
	calls, singles := 0, 0
	op := Guard[int](b, func(err error) bool { return errors.Is(err, down) }, func(err error) bool { return errors.Is(err, cut) }, single)(
		func(ctx context.Context) (int, error) {
			calls++
			if ctx.Value(singleKey{}) != nil {
				singles++
			}
			return 1, fail
		})
	call := func(ctx context.Context, err error) error { fail = err; _, e := op(ctx); return e }

	steps := []struct {
		name       string
		ctx        context.Context
		fail       error
		advance    time.Duration
		wantErr    error
		wantState  State
		wantCalls  int
		wantSingle int
	}{
		{"closed: the call goes through", context.Background(), nil, 0, nil, Closed, 1, 0},
		{"a failure below the threshold", context.Background(), down, 0, down, Closed, 2, 0},
		{"the second opens it", context.Background(), down, 0, down, Open, 3, 0},
		{"open: refused, next not called", context.Background(), nil, 0, ErrOpen, Open, 3, 0},
		{"forced: one attempt, the breaker not told", Force(context.Background()), nil, 0, nil, Open, 4, 1},
		{"a probe cut short frees its slot", context.Background(), cut, 5 * time.Second, cut, Open, 5, 2},
		{"the next probe may go at once and closes it", context.Background(), nil, 0, nil, Closed, 6, 3},
	}
	for _, s := range steps {
		clk.add(s.advance)
		if err := call(s.ctx, s.fail); !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Fatalf("%s: error %v, want %v", s.name, err, s.wantErr)
		}
		if b.State() != s.wantState || calls != s.wantCalls || singles != s.wantSingle {
			t.Fatalf("%s: state %s, calls %d (single %d); want %s, %d (%d)", s.name, b.State(), calls, singles, s.wantState, s.wantCalls, s.wantSingle)
		}
	}
	if got := Guard[int](nil, nil, nil, nil)(func(context.Context) (int, error) { return 7, nil }); got == nil {
		t.Fatal("a nil breaker's Guard returned no op")
	} else if v, err := got(context.Background()); v != 7 || err != nil {
		t.Errorf("a nil breaker's Guard: %d, %v; want 7, nil", v, err)
	}
}
