package dltable

// The crash points, for the tests of package dltable_test.
const (
	PointPutAfterIndex          = pointPutAfterIndex
	PointTransitionBeforeWrite  = pointTransitionBeforeWrite
	PointTransitionAfterEntry   = pointTransitionAfterEntry
	PointPurgeBeforeDelete      = pointPurgeBeforeDelete
	PointPurgeAfterEntryDeleted = pointPurgeAfterEntryDeleted
)

// SetCrash makes s call crash at every crash point: an error it returns
// ends the operation there, as a crash of the process would.
func SetCrash(s *Store, crash func(point string) error) { s.crash = crash }
