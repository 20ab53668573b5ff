package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/recovery"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

var (
	_ recovery.Marker = (*memstore.Store)(nil)
	_ recovery.Marker = (*tablestore.Store)(nil)
)

// counting counts the marker calls and can fail them.
type counting struct {
	recovery.Marker
	reads, raises atomic.Int64
	down          atomic.Bool
}

func (c *counting) RecoveringUntil(ctx context.Context) (time.Time, error) {
	c.reads.Add(1)
	if c.down.Load() {
		return time.Time{}, fmt.Errorf("counting: connection refused: %w", store.ErrTransient)
	}
	return c.Marker.RecoveringUntil(ctx)
}

func (c *counting) RaiseRecovering(ctx context.Context, until time.Time) (time.Time, error) {
	c.raises.Add(1)
	if c.down.Load() {
		return time.Time{}, fmt.Errorf("counting: connection refused: %w", store.ErrTransient)
	}
	return c.Marker.RaiseRecovering(ctx, until)
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// A "not recovering" answer is read once per TTL; a marker in the future
// is trusted without a read until it passes, whoever raised it; a marker
// raised by another process is seen at the first read after the TTL.
func TestRecoveringReadsOncePerTTL(t *testing.T) {
	ctx := t.Context()
	shared := memstore.New()
	m := &counting{Marker: shared}
	g := recovery.New(m, &recovery.Options{TTL: time.Second})

	steps := []struct {
		name      string
		now       time.Time
		raise     time.Time // another process raises the marker first (zero: not)
		want      bool
		wantReads int64 // reads so far
	}{
		{"no marker: a read", t0, time.Time{}, false, 1},
		{"within the TTL: no read", t0.Add(999 * time.Millisecond), time.Time{}, false, 1},
		{"raised by another, within the TTL: not seen yet", t0.Add(999 * time.Millisecond), t0.Add(time.Minute), false, 1},
		{"past the TTL: read, and seen", t0.Add(time.Second), time.Time{}, true, 2},
		{"in the future: no read", t0.Add(59 * time.Second), time.Time{}, true, 2},
		{"passed: a read", t0.Add(time.Minute), time.Time{}, false, 3},
		{"within the TTL of that read: no read", t0.Add(time.Minute + 500*time.Millisecond), time.Time{}, false, 3},
	}
	for _, st := range steps {
		if !st.raise.IsZero() {
			if _, err := shared.RaiseRecovering(ctx, st.raise); err != nil {
				t.Fatal(err)
			}
		}
		got, _, err := g.Recovering(ctx, st.now, st.now)
		if err != nil || got != st.want {
			t.Fatalf("%s: Recovering = %v, %v; want %v", st.name, got, err, st.want)
		}
		if n := m.reads.Load(); n != st.wantReads {
			t.Fatalf("%s: %d reads so far, want %d", st.name, n, st.wantReads)
		}
	}
}

// gated holds every read until release is closed.
type gated struct {
	counting
	release chan struct{}
}

func (g *gated) RecoveringUntil(ctx context.Context) (time.Time, error) {
	g.reads.Add(1)
	<-g.release
	return g.Marker.RecoveringUntil(ctx)
}

// Checks that come together while the cache cannot tell make one read: the
// first read is held until the others have had every chance to start
// theirs; none does, and all get its answer.
func TestConcurrentRecoveringReadOnce(t *testing.T) {
	m := &gated{counting: counting{Marker: memstore.New()}, release: make(chan struct{})}
	g := recovery.New(m, nil)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rec, _, err := g.Recovering(t.Context(), t0, t0); err != nil || rec {
				t.Errorf("Recovering = %v, %v; want false", rec, err)
			}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); m.reads.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(m.release)
			t.Fatal("no read within 10 s")
		}
	}
	time.Sleep(50 * time.Millisecond) // the others' chance to read too
	close(m.release)
	wg.Wait()
	if n := m.reads.Load(); n != 1 {
		t.Fatalf("%d reads for 16 checks at once, want 1", n)
	}
}

// A failed read is an error, not an answer, and is not cached: the next
// call reads again.
func TestRecoveringReadFailure(t *testing.T) {
	m := &counting{Marker: memstore.New()}
	g := recovery.New(m, nil)
	m.down.Store(true)
	if _, read, err := g.Recovering(t.Context(), t0, t0); !errors.Is(err, store.ErrTransient) || !read {
		t.Fatalf("Recovering with the store down: read %v, error %v; want a read that failed with ErrTransient", read, err)
	}
	if _, known := g.Cached(t0, t0); known {
		t.Fatal("Cached after a failed read: known, want unknown")
	}
	m.down.Store(false)
	if rec, read, err := g.Recovering(t.Context(), t0, t0); err != nil || rec || !read {
		t.Fatalf("Recovering with the store back = %v, read %v, %v; want false after a read", rec, read, err)
	}
}

// Raise writes until plus the slack, once; raises asking for no later
// than what is known write nothing; the marker never moves earlier, with
// two processes raising.
func TestRaise(t *testing.T) {
	ctx := t.Context()
	shared := memstore.New()
	ma, mb := &counting{Marker: shared}, &counting{Marker: shared}
	a := recovery.New(ma, &recovery.Options{Slack: 10 * time.Second})
	b := recovery.New(mb, &recovery.Options{Slack: 10 * time.Second})

	got, wrote, err := a.Raise(ctx, t0)
	if err != nil || !wrote || !got.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("first Raise(t0) = %v, wrote %v, %v; want t0+10s written", got, wrote, err)
	}
	for _, until := range []time.Time{t0.Add(-time.Hour), t0, t0.Add(10 * time.Second)} {
		if got, wrote, err := a.Raise(ctx, until); err != nil || wrote || !got.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("Raise(%v) within the slack = %v, wrote %v, %v; want t0+10s, nothing written", until, got, wrote, err)
		}
	}
	if n := ma.raises.Load(); n != 1 {
		t.Fatalf("%d raises reached the store, want 1", n)
	}
	// b never read it: its raise to an earlier time (t0-5s plus the
	// slack) reaches the store, which keeps the later one, and b learns it.
	if got, wrote, err := b.Raise(ctx, t0.Add(-5*time.Second)); err != nil || wrote || !got.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("b.Raise(t0-5s) = %v, wrote %v, %v; want t0+10s (a's), not written by b", got, wrote, err)
	}
	if n := mb.raises.Load(); n != 1 {
		t.Fatalf("b: %d raises reached the store, want 1", n)
	}
	if rec, read, _ := b.Recovering(ctx, t0.Add(9*time.Second), t0.Add(9*time.Second)); !rec || read {
		t.Fatalf("b.Recovering after learning a's marker = %v, read %v; want true without a read", rec, read)
	}
	if got, wrote, err := b.Raise(ctx, t0.Add(time.Minute)); err != nil || !wrote || !got.Equal(t0.Add(time.Minute+10*time.Second)) {
		t.Fatalf("b.Raise(t0+1m) = %v, wrote %v, %v; want t0+1m10s written", got, wrote, err)
	}
	if got, _ := shared.RecoveringUntil(ctx); !got.Equal(t0.Add(time.Minute + 10*time.Second)) {
		t.Fatalf("stored marker %v, want t0+1m10s", got)
	}
	// a's knowledge is a lower bound: an earlier raise of a changes nothing.
	if _, _, err := a.Raise(ctx, t0.Add(15*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, _ := shared.RecoveringUntil(ctx); !got.Equal(t0.Add(time.Minute + 10*time.Second)) {
		t.Fatalf("stored marker after a's earlier raise %v, want it unchanged at t0+1m10s", got)
	}
}

func (g *gated) RaiseRecovering(ctx context.Context, until time.Time) (time.Time, error) {
	g.raises.Add(1)
	<-g.release
	return g.Marker.RaiseRecovering(ctx, until)
}

// Concurrent raises of one process for about the same time make one write:
// the first is held until the others have had every chance to start
// theirs; none does, and the slack of the first covers them.
func TestConcurrentRaisesWriteOnce(t *testing.T) {
	m := &gated{counting: counting{Marker: memstore.New()}, release: make(chan struct{})}
	g := recovery.New(m, nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := g.Raise(t.Context(), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				t.Error(err)
			}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); m.raises.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(m.release)
			t.Fatal("no raise within 10 s")
		}
	}
	time.Sleep(50 * time.Millisecond) // the others' chance to write too
	close(m.release)
	wg.Wait()
	if n := m.raises.Load(); n != 1 {
		t.Fatalf("%d raises reached the store, want 1 (the slack covers the others)", n)
	}
}

// A failed raise leaves nothing known, so the next one tries again.
func TestRaiseFailure(t *testing.T) {
	m := &counting{Marker: memstore.New()}
	g := recovery.New(m, nil)
	m.down.Store(true)
	if _, wrote, err := g.Raise(t.Context(), t0); !errors.Is(err, store.ErrTransient) || wrote {
		t.Fatalf("Raise with the store down: wrote %v, %v; want ErrTransient", wrote, err)
	}
	m.down.Store(false)
	if _, wrote, err := g.Raise(t.Context(), t0); err != nil || !wrote {
		t.Fatalf("Raise with the store back: wrote %v, %v; want written", wrote, err)
	}
}
