package tablestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// colRecoveringUntil is the recovery marker's one column (Edm.DateTime).
const colRecoveringUntil = "RecoveringUntil"

// RecoveringUntil reads the recovery marker (the entity
// store.RecoveryPartitionKey / store.RecoveryRowKey of the order table): the
// zero time when there is none. Failures are classified as for Get.
func (s *Store) RecoveringUntil(ctx context.Context) (time.Time, error) {
	until, _, _, err := s.readMarker(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("tablestore: read the recovery marker: %w", err)
	}
	return until, nil
}

// RaiseRecovering moves the recovery marker to store.RecoveryTime(until)
// unless it is at that time or later already, and returns the marker as it
// is then (never earlier than until). Every write is conditional: an
// insert when there is no marker, else a replace If-Match the ETag just
// read; a lost race (409 or 412) rereads and decides again, at most
// store.MaxRecoveryConflicts times (then an error matching
// store.ErrConflict and store.ErrTransient). So of two writers the later
// time stays, whichever writes last.
func (s *Store) RaiseRecovering(ctx context.Context, until time.Time) (time.Time, error) {
	until = store.RecoveryTime(until)
	body, err := json.Marshal(markerEntity{PartitionKey: store.RecoveryPartitionKey, RowKey: store.RecoveryRowKey,
		RecoveringUntil: aztables.EDMDateTime(until), RecoveringUntilType: "Edm.DateTime"})
	if err != nil {
		return time.Time{}, fmt.Errorf("tablestore: raise the recovery marker: %w", err)
	}
	for lost := 0; ; {
		current, etag, found, err := s.readMarker(ctx)
		switch {
		case err != nil:
			return time.Time{}, fmt.Errorf("tablestore: raise the recovery marker: %w", err)
		case !current.Before(until):
			return current, nil
		case !found:
			err = s.addMarker(ctx, body)
		default:
			err = s.replaceMarker(ctx, body, etag)
		}
		switch {
		case err == nil:
			return until, nil
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			// Another writer inserted, replaced or (by hand) deleted it:
			// read again.
			if lost++; lost > store.MaxRecoveryConflicts {
				return time.Time{}, fmt.Errorf("tablestore: raise the recovery marker: %d writes lost to other writers: %w (%w)",
					lost, store.ErrConflict, store.ErrTransient)
			}
		default:
			return time.Time{}, fmt.Errorf("tablestore: raise the recovery marker: %w", err)
		}
	}
}

// markerEntity is the JSON of the recovery marker.
type markerEntity struct {
	PartitionKey        string               `json:"PartitionKey"`
	RowKey              string               `json:"RowKey"`
	RecoveringUntil     aztables.EDMDateTime `json:"RecoveringUntil"`
	RecoveringUntilType string               `json:"RecoveringUntil@odata.type"`
}

// readMarker reads the marker: found false (and no error) when there is none.
func (s *Store) readMarker(ctx context.Context) (until time.Time, etag azcore.ETag, found bool, err error) {
	start := time.Now()
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	resp, err := s.table.GetEntity(callCtx, store.RecoveryPartitionKey, store.RecoveryRowKey, nil)
	if err == nil {
		until, err = decodeMarker(resp.Value)
		etag = resp.ETag
	} else {
		err = classify(callCtx, OpGet, err)
	}
	s.done(OpGet, err, start)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return time.Time{}, "", false, nil
	case err != nil:
		return time.Time{}, "", false, err
	}
	return until, etag, true, nil
}

func (s *Store) addMarker(ctx context.Context, body []byte) error {
	start := time.Now()
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	_, err := s.table.AddEntity(callCtx, body, nil)
	err = classify(callCtx, OpInsert, err)
	s.done(OpInsert, err, start)
	return err
}

func (s *Store) replaceMarker(ctx context.Context, body []byte, etag azcore.ETag) error {
	if etag == "" {
		return fmt.Errorf("replace: %w", errUnconditional)
	}
	start := time.Now()
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	_, err := s.table.UpdateEntity(callCtx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
	err = classify(callCtx, OpReplace, err)
	s.done(OpReplace, err, start)
	return err
}

// decodeMarker reads the marker's time. A marker of another shape is an
// error (not a sentinel): someone else wrote it.
func decodeMarker(body []byte) (time.Time, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(body, &e); err != nil {
		return time.Time{}, fmt.Errorf("decode the recovery marker: %w", err)
	}
	v, ok := e.Properties[colRecoveringUntil].(aztables.EDMDateTime)
	if !ok {
		return time.Time{}, fmt.Errorf("decode the recovery marker: %s is %T, want Edm.DateTime", colRecoveringUntil, e.Properties[colRecoveringUntil])
	}
	return time.Time(v).UTC(), nil
}
