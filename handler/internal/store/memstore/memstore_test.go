package memstore_test

import (
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/orderstate"
	"github.com/orderstatus/orderstatus/handler/internal/store/memstore"
	"github.com/orderstatus/orderstatus/handler/internal/store/storetest"
)

var (
	_ storetest.Backend  = (*memstore.Store)(nil)
	_ orderstate.Backend = (*memstore.Store)(nil)
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) storetest.Backend { return memstore.New() })
}

func TestConcurrentDelivery(t *testing.T) {
	s := memstore.New()
	storetest.RunConcurrentDelivery(t, s, s)
	storetest.RunLockstepDelivery(t, s, s)
}
