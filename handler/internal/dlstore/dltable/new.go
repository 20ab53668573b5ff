package dltable

import "github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

// New returns a Store for table (DefaultTable if empty) on a service client
// the caller already holds (the handler's, the simulation's). It does not
// contact the service.
func New(svc *aztables.ServiceClient, table string, opts *Options) *Store {
	return newStore(svc, table, opts)
}
