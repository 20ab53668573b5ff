package broker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// pages serves n messages with sequence numbers 1..n through Peek.
type pages struct {
	n     int64
	calls int
	err   error
}

func (p *pages) Peek(_ context.Context, _ broker.Source, max int, from int64) ([]broker.Received, error) {
	p.calls++
	if p.err != nil {
		return nil, p.err
	}
	var out []broker.Received
	for seq := max64(from, 1); seq <= p.n && len(out) < max; seq++ {
		out = append(out, broker.Received{SequenceNumber: seq})
	}
	return out, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func TestPeekAll(t *testing.T) {
	for _, n := range []int64{0, 1, 249, 250, 251, 700} {
		p := &pages{n: n}
		got, err := broker.PeekAll(context.Background(), p, broker.Source{Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != n {
			t.Errorf("n=%d: got %d messages", n, len(got))
		}
		for i, m := range got {
			if m.SequenceNumber != int64(i+1) {
				t.Fatalf("n=%d: message %d has sequence %d, want %d", n, i, m.SequenceNumber, i+1)
			}
		}
	}
	p := &pages{err: broker.ErrTransient}
	if _, err := broker.PeekAll(context.Background(), p, broker.Source{Queue: "q", DeadLetter: true}); !errors.Is(err, broker.ErrTransient) {
		t.Errorf("err = %v, want ErrTransient", err)
	}
}
