package memstore_test

import (
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/orderstate/orderstatetest"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
	"github.com/orderstatus/orderstatus/handler/internal/store/storetest"
)

var _ store.Backend = (*memstore.Store)(nil)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Backend { return memstore.New() })
	orderstatetest.Run(t, func(*testing.T) store.Backend { return memstore.New() })
}

func TestConcurrentDelivery(t *testing.T) {
	s := memstore.New()
	orderstatetest.RunConcurrentDelivery(t, s, s)
	orderstatetest.RunLockstepDelivery(t, s, s)
}
