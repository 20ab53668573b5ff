package dlmem_test

import (
	"errors"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlmem"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlstoretest"
)

var _ dlstore.Store = (*dlmem.Store)(nil)

func TestConformance(t *testing.T) {
	dlstoretest.Run(t, func(*testing.T) dlstore.Store { return dlmem.New() })
}

func TestFail(t *testing.T) {
	s := dlmem.New()
	e := dlstore.Entry{ID: dlstore.EntryID(dlstore.DLQ, 1, "m"), Source: dlstore.DLQ, StoredAt: time.Unix(1, 0)}
	s.Fail(dlmem.OpPut, 1)
	if _, err := s.Put(t.Context(), e, "a"); !errors.Is(err, dlstore.ErrUnavailable) {
		t.Fatalf("Put with a failure injected: %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(t.Context(), e.ID); !errors.Is(err, dlstore.ErrNotFound) {
		t.Fatalf("Get after the failed Put: %v, want ErrNotFound (no effect)", err)
	}
	if created, err := s.Put(t.Context(), e, "a"); err != nil || !created {
		t.Fatalf("Put after the injected failure = %t, %v; want true, nil", created, err)
	}
}
