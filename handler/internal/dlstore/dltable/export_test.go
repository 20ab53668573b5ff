package dltable

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// The crash points, for the tests of package dltable_test.
const (
	PointPutAfterIndex          = pointPutAfterIndex
	PointTransitionBeforeWrite  = pointTransitionBeforeWrite
	PointTransitionAfterEntry   = pointTransitionAfterEntry
	PointPurgeBeforeDelete      = pointPurgeBeforeDelete
	PointPurgeAfterEntryDeleted = pointPurgeAfterEntryDeleted
)

// SetCrash makes s call crash at every crash point: an error it returns
// ends the operation there, as a crash of the process would (nil: none).
func SetCrash(s *Store, crash func(point string) error) {
	if crash == nil {
		crash = func(string) error { return nil }
	}
	s.crash = crash
}

// Open is New on cs's account, its SDK retrying at most twice briefly
// (or as retry says) through transport (nil: the SDK's).
func Open(cs, table string, transport policy.Transporter, retry *policy.RetryOptions, opts *Options) (*Store, error) {
	co := &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: transport,
		Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second}}}
	if retry != nil {
		co.Retry = *retry
	}
	svc, err := aztables.NewServiceClientFromConnectionString(cs, co)
	if err != nil {
		return nil, err
	}
	return New(svc, table, opts), nil
}
