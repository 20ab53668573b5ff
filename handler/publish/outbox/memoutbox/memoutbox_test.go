package memoutbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/orderstatus/orderstatus/handler/publish/outbox"
	"github.com/orderstatus/orderstatus/handler/publish/outbox/memoutbox"
	"github.com/orderstatus/orderstatus/handler/publish/outbox/outboxtest"
)

// producer is the fake's stand-in for a producer's own database: rows
// per partition, written in the same lock as the records.
type producer struct {
	mu   sync.Mutex
	rows map[string]int
}

var errOwnWrite = errors.New("memoutbox_test: the producer's own write failed")

func backend(s *memoutbox.Store, p *producer) outboxtest.Backend {
	return outboxtest.Backend{
		Store: s,
		Commit: func(ctx context.Context, partition string, failOwn bool, intents ...outbox.Intent) error {
			return s.Commit(ctx, partition, func() error {
				if failOwn {
					return errOwnWrite
				}
				p.mu.Lock()
				defer p.mu.Unlock()
				p.rows[partition]++
				return nil
			}, intents...)
		},
		Own: func(_ context.Context, partition string) (int, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.rows[partition], nil
		},
	}
}

func TestConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) (outboxtest.Backend, outboxtest.Backend) {
		s, p := memoutbox.New(nil), &producer{rows: map[string]int{}}
		return backend(s, p), backend(s, p)
	})
}
