package dltable

import "github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

// New returns a Store for table (DefaultTable if empty) on the caller's service
// client, without contacting the service.
func New(svc *aztables.ServiceClient, table string, opts *Options) *Store {
	return newStore(svc, table, opts)
}
