package circuit

import (
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
