package dltable_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dlstoretest"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// tableName returns a fresh valid table name (a letter, then letters and
// digits).
func tableName() string { return "dl" + rand.Text() }

// newTable returns a Store on a new table in the test Azurite.
func newTable(t *testing.T, opts *dltable.Options) *dltable.Store {
	t.Helper()
	s, err := dltable.Open(testenv.Azurite(t), tableName(), nil, nil, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.EnsureTable(ctx); err != nil {
		t.Fatalf("EnsureTable %s: %v", s.Table(), err)
	}
	return s
}

func TestConformance(t *testing.T) {
	dlstoretest.Run(t, func(t *testing.T) dlstore.Store { return newTable(t, nil) })
}

func TestEnsureTableIdempotent(t *testing.T) {
	s := newTable(t, nil)
	if err := s.EnsureTable(t.Context()); err != nil {
		t.Fatalf("second EnsureTable: %v, want nil (TableAlreadyExists is success)", err)
	}
}

// TestMissingTable checks that every operation on a table infra has not
// created fails as unavailable (retry later, never "no such entry"),
// naming the table.
func TestMissingTable(t *testing.T) {
	s, err := dltable.Open(testenv.Azurite(t), tableName(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := entry("o-1", 1)
	_, putErr := s.Put(ctx, e, "a")
	_, getErr := s.Get(ctx, e.ID)
	_, listErr := s.List(ctx, dlstore.Filter{})
	_, indexErr := s.List(ctx, dlstore.NotClosed())
	_, histErr := s.History(ctx, "o-1")
	_, purgeErr := s.Purge(ctx, time.Now(), 10)
	e.ETag = `W/"x"`
	_, trErr := s.Transition(ctx, e, dlstore.Transition{To: dlstore.Left, At: time.Now(), Audit: &dlstore.AuditEntry{Action: "left"}})
	for name, err := range map[string]error{"Put": putErr, "Get": getErr, "List": listErr, "List(not closed)": indexErr,
		"History": histErr, "Purge": purgeErr, "Transition": trErr} {
		var re *azcore.ResponseError
		want := "table " + s.Table() + " does not exist; infra creates it"
		if !errors.Is(err, dlstore.ErrUnavailable) || errors.Is(err, dlstore.ErrNotFound) || !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s on a missing table: %v; want ErrUnavailable wrapping the SDK error, saying %q", name, err, want)
		}
	}
}

func entry(orderID string, seq int64) dlstore.Entry {
	return dlstore.Entry{ID: dlstore.EntryID(dlstore.DLQ, seq, "m"), Source: dlstore.DLQ, SequenceNumber: seq, MessageID: "m",
		OrderID: orderID, SessionID: orderID, Body: []byte(`{"orderId":"` + orderID + `"}`), Reason: "MaxDeliveryCountExceeded",
		StoredAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Properties: map[string]any{"DeadLetterReason": "MaxDeliveryCountExceeded"}}
}

var errCrash = errors.New("crash")

// crashAt returns a crash hook that fails at point, once.
func crashAt(point string) func(string) error {
	fired := false
	return func(p string) error {
		if p == point && !fired {
			fired = true
			return errCrash
		}
		return nil
	}
}

func ids(t *testing.T, s dlstore.Store, f dlstore.Filter) map[string]dlstore.State {
	t.Helper()
	es, err := s.List(t.Context(), f)
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	out := map[string]dlstore.State{}
	for _, e := range es {
		out[e.ID] = e.State
	}
	return out
}

// TestCrashInPut: a crash after the index row, before the entry, leaves
// an index row whose entry is missing; the Put the sweeper repeats (it
// completes the message only after Put) stores the entry once.
func TestCrashInPut(t *testing.T) {
	s := newTable(t, nil)
	ctx := t.Context()
	e := entry("o-1", 1)
	dltable.SetCrash(s, crashAt(dltable.PointPutAfterIndex))
	if _, err := s.Put(ctx, e, "a"); !errors.Is(err, errCrash) {
		t.Fatalf("Put with a crash: %v, want the crash", err)
	}
	if _, err := s.Get(ctx, e.ID); !errors.Is(err, dlstore.ErrNotFound) {
		t.Fatalf("Get after the crash: %v, want ErrNotFound", err)
	}
	if got := ids(t, s, dlstore.NotClosed()); got[e.ID] != dlstore.Open {
		t.Errorf("List(not closed) after the crash = %v, want the index row of %s (it says more than the truth)", got, e.ID)
	}
	if h, err := s.History(ctx, "o-1"); err != nil || len(h) != 0 {
		t.Errorf("History after the crash = %v, %v; want nothing", h, err)
	}
	created, err := s.Put(ctx, e, "a")
	if err != nil || !created {
		t.Fatalf("repeated Put = %t, %v; want true, nil", created, err)
	}
	if got, err := s.Get(ctx, e.ID); err != nil || got.State != dlstore.Open {
		t.Fatalf("Get after the repeated Put = %+v, %v", got, err)
	}
	if got := ids(t, s, dlstore.NotClosed()); len(got) != 1 {
		t.Errorf("List(not closed) = %v, want the entry once", got)
	}
	if h, err := s.History(ctx, "o-1"); err != nil || len(h) != 1 {
		t.Errorf("History = %v, %v; want one stored entry", h, err)
	}
}

// TestCrashInTransition: a crash after the entry, before the index row,
// leaves an index row that says more than the truth, never less: the
// entry is still listed among those not closed (with its old state) until
// a Get repairs the row.
func TestCrashInTransition(t *testing.T) {
	tests := []struct {
		name string
		to   dlstore.State
		// listed is what List(not closed) says after the repair.
		listed map[bool]dlstore.State
	}{
		{"to a closed state", dlstore.Archived, nil},
		{"to a state not closed", dlstore.Left, map[bool]dlstore.State{true: dlstore.Left}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTable(t, nil)
			ctx := t.Context()
			e := entry("o-1", 1)
			if _, err := s.Put(ctx, e, "a"); err != nil {
				t.Fatal(err)
			}
			read, err := s.Get(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			dltable.SetCrash(s, crashAt(dltable.PointTransitionAfterEntry))
			tr := dlstore.Transition{To: tt.to, At: read.StoredAt.Add(time.Hour), Audit: &dlstore.AuditEntry{Action: string(tt.to), Actor: "a"}}
			if _, err := s.Transition(ctx, read, tr); !errors.Is(err, errCrash) {
				t.Fatalf("Transition with a crash: %v, want the crash", err)
			}
			if got := ids(t, s, dlstore.NotClosed()); got[e.ID] != dlstore.Open {
				t.Errorf("List(not closed) after the crash = %v, want %s still listed as open", got, e.ID)
			}
			h, err := s.History(ctx, "o-1")
			if err != nil || len(h) != 2 || h[1].To != tt.to {
				t.Errorf("History after the crash = %+v, %v; want stored and the transition (one transaction with the entry)", h, err)
			}
			got, err := s.Get(ctx, e.ID)
			if err != nil || got.State != tt.to {
				t.Fatalf("Get after the crash = %s, %v; want %s", got.State, err, tt.to)
			}
			after := ids(t, s, dlstore.NotClosed())
			if tt.listed == nil && len(after) != 0 {
				t.Errorf("List(not closed) after Get repaired the index = %v, want none", after)
			}
			if tt.listed != nil && after[e.ID] != tt.listed[true] {
				t.Errorf("List(not closed) after Get repaired the index = %v, want %s %s", after, e.ID, tt.listed[true])
			}
			if tt.to == dlstore.Left {
				if got := ids(t, s, dlstore.Filter{States: []dlstore.State{dlstore.Left}}); got[e.ID] != dlstore.Left {
					t.Errorf("List(left) after the repair = %v, want %s", got, e.ID)
				}
			}
		})
	}
}

// TestIndexRepairOfAMissingEntry: Get deletes the index row of an entry
// that is missing only once the row is older than the grace (a younger
// one may belong to a Put between its two writes).
func TestIndexRepairOfAMissingEntry(t *testing.T) {
	var now time.Time
	s := newTable(t, &dltable.Options{IndexGrace: time.Hour, Now: func() time.Time { return now }})
	ctx := t.Context()
	e := entry("o-1", 1)
	dltable.SetCrash(s, crashAt(dltable.PointPutAfterIndex))
	if _, err := s.Put(ctx, e, "a"); !errors.Is(err, errCrash) {
		t.Fatalf("Put with a crash: %v", err)
	}
	now = time.Now()
	if _, err := s.Get(ctx, e.ID); !errors.Is(err, dlstore.ErrNotFound) {
		t.Fatalf("Get: %v, want ErrNotFound", err)
	}
	if got := ids(t, s, dlstore.NotClosed()); len(got) != 1 {
		t.Errorf("List(not closed) after a Get within the grace = %v, want the index row kept", got)
	}
	now = time.Now().Add(2 * time.Hour)
	if _, err := s.Get(ctx, e.ID); !errors.Is(err, dlstore.ErrNotFound) {
		t.Fatalf("Get: %v, want ErrNotFound", err)
	}
	if got := ids(t, s, dlstore.NotClosed()); len(got) != 0 {
		t.Errorf("List(not closed) after a Get past the grace = %v, want the stale index row gone", got)
	}
	// The message is drained again later: stored as new.
	if created, err := s.Put(ctx, e, "a"); err != nil || !created {
		t.Errorf("Put after the repair = %t, %v; want true, nil", created, err)
	}
}

// TestCrashInPurge: a crash after the entry and its audit rows are
// deleted leaves index and locator rows of nothing, which neither list it
// nor keep it.
func TestCrashInPurge(t *testing.T) {
	s := newTable(t, &dltable.Options{IndexGrace: time.Nanosecond})
	ctx := t.Context()
	e := entry("o-1", 1)
	if _, err := s.Put(ctx, e, "a"); err != nil {
		t.Fatal(err)
	}
	read, err := s.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, read, dlstore.Transition{To: dlstore.Discarded, At: read.StoredAt, Audit: &dlstore.AuditEntry{Action: "discarded"}}); err != nil {
		t.Fatal(err)
	}
	dltable.SetCrash(s, crashAt(dltable.PointPurgeAfterEntryDeleted))
	if _, err := s.Purge(ctx, read.StoredAt.Add(time.Hour), 10); !errors.Is(err, errCrash) {
		t.Fatalf("Purge with a crash: %v, want the crash", err)
	}
	if _, err := s.Get(ctx, e.ID); !errors.Is(err, dlstore.ErrNotFound) {
		t.Errorf("Get after the purge: %v, want ErrNotFound", err)
	}
	if h, err := s.History(ctx, ""); err != nil || len(h) != 0 {
		t.Errorf("History after the purge = %v, %v; want none", h, err)
	}
	if got := ids(t, s, dlstore.Filter{}); len(got) != 0 {
		t.Errorf("List after the purge = %v, want none", got)
	}
}

// TestTooLargeForTheTable: an entry that Table Storage could not hold
// (here a description of 1 MB beside its properties) is refused before
// anything is written.
func TestTooLargeForTheTable(t *testing.T) {
	s := newTable(t, nil)
	e := entry("o-1", 1)
	e.Description = strings.Repeat("d", 1<<20)
	if _, err := s.Put(t.Context(), e, "a"); !errors.Is(err, dlstore.ErrTooLarge) {
		t.Fatalf("Put: %v, want ErrTooLarge", err)
	}
	if got := ids(t, s, dlstore.NotClosed()); len(got) != 0 {
		t.Errorf("List(not closed) after the refused Put = %v, want nothing written", got)
	}
}

func TestUnsupportedPropertyType(t *testing.T) {
	s := newTable(t, nil)
	e := entry("o-1", 1)
	e.Properties["Count"] = int32(3)
	_, err := s.Put(t.Context(), e, "a")
	if err == nil || errors.Is(err, dlstore.ErrTooLarge) || errors.Is(err, dlstore.ErrUnavailable) || !strings.Contains(err.Error(), `"Count" is a int32`) {
		t.Fatalf("Put with an int32 property: %v, want an error naming it", err)
	}
}

// refuseCreateTable answers Create Table with 403, as the service may
// for an identity whose role is scoped to a table, and passes every
// other request on to Azurite.
type refuseCreateTable struct{ calls int }

func (r *refuseCreateTable) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/Tables") {
		r.calls++
		return serviceError(req, http.StatusForbidden, "AuthorizationPermissionMismatch", "This request is not authorized to perform this operation using this permission."), nil
	}
	return http.DefaultClient.Do(req)
}

// serviceError is Table Storage's answer to req with an error: status,
// its x-ms-error-code and the JSON error body.
func serviceError(req *http.Request, status int, code, message string) *http.Response {
	body := fmt.Sprintf(`{"odata.error":{"code":%q,"message":{"lang":"en-US","value":%q}}}`, code, message)
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Request: req,
		Header: http.Header{"X-Ms-Error-Code": {code}, "Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body))}
}

// TestEnsureTableRefused: with a table-scoped role Create Table may be
// refused even when the table exists. EnsureTable reports it (the caller
// logs it) and the store works; when the table is really missing, the
// first read or write says so, naming the table.
func TestEnsureTableRefused(t *testing.T) {
	existing := newTable(t, nil)
	for _, tt := range []struct {
		name, table string
		exists      bool
	}{
		{"table exists", existing.Table(), true},
		{"table missing", tableName(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			refuse := &refuseCreateTable{}
			s, err := dltable.Open(testenv.Azurite(t), tt.table, refuse, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = s.EnsureTable(t.Context())
			if refuse.calls != 1 || !errors.Is(err, dlstore.ErrUnavailable) || !strings.Contains(err.Error(), "refused on table "+tt.table) {
				t.Fatalf("EnsureTable refused (%d calls): %v; want ErrUnavailable naming table %s", refuse.calls, err, tt.table)
			}
			e := entry("o-1", 1)
			created, err := s.Put(t.Context(), e, "a")
			if tt.exists {
				if err != nil || !created {
					t.Fatalf("Put after a refused EnsureTable = %t, %v; want the entry stored", created, err)
				}
				if _, err := s.Get(t.Context(), e.ID); err != nil {
					t.Errorf("Get: %v", err)
				}
				return
			}
			if want := "table " + tt.table + " does not exist; infra creates it"; !errors.Is(err, dlstore.ErrUnavailable) || !strings.Contains(err.Error(), want) {
				t.Errorf("Put on a missing table: %v; want ErrUnavailable saying %q", err, want)
			}
		})
	}
}

// TestConflictInTheTransaction: another actor changes the entry between a
// transition's read and its transaction. The entry's If-Match fails, so
// the whole transaction fails (dlstore.ErrConflict) and its audit row is
// not written: the other actor's change and record stand alone.
func TestConflictInTheTransaction(t *testing.T) {
	s := newTable(t, nil)
	other, err := dltable.Open(testenv.Azurite(t), s.Table(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := entry("o-1", 1)
	if _, err := s.Put(ctx, e, "a"); err != nil {
		t.Fatal(err)
	}
	read, err := s.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	var (
		fired    bool
		otherErr error
	)
	dltable.SetCrash(s, func(point string) error {
		if point == dltable.PointTransitionBeforeWrite && !fired {
			fired = true
			fresh, err := other.Get(ctx, e.ID)
			if err == nil {
				_, err = other.Transition(ctx, fresh, dlstore.Transition{To: dlstore.Left, At: read.StoredAt.Add(time.Minute),
					Audit: &dlstore.AuditEntry{Action: "left", Actor: "other"}})
			}
			otherErr = err
		}
		return nil
	})
	_, err = s.Transition(ctx, read, dlstore.Transition{To: dlstore.Archived, At: read.StoredAt.Add(2 * time.Minute),
		Audit: &dlstore.AuditEntry{Action: "archived", Actor: "me"}})
	if !fired || otherErr != nil {
		t.Fatalf("the other actor's transition (fired %t): %v", fired, otherErr)
	}
	if !errors.Is(err, dlstore.ErrConflict) {
		t.Fatalf("Transition that lost the race in its transaction: %v, want ErrConflict", err)
	}
	h, err := s.History(ctx, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[1].Actor != "other" || h[1].To != dlstore.Left {
		t.Errorf("History = %+v, want stored and the other actor's left only", h)
	}
	if got, err := s.Get(ctx, e.ID); err != nil || got.State != dlstore.Left || got.Actions != 2 {
		t.Errorf("entry = %s with %d actions, %v; want left with 2", got.State, got.Actions, err)
	}
}

// silent never answers: a request ends only when its context does.
type silent struct{}

func (silent) Do(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// TestDeadlines: a service that does not answer within the call timeout
// is unavailable (retry later); the caller's own context ending is
// reported as that, not as an outage.
func TestDeadlines(t *testing.T) {
	s, err := dltable.Open(config.DevelopmentStorage, "deadletters", silent{}, nil, &dltable.Options{CallTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := entry("o-1", 1)
	_, putErr := s.Put(t.Context(), e, "a")
	_, getErr := s.Get(t.Context(), e.ID)
	_, listErr := s.List(t.Context(), dlstore.NotClosed())
	for name, err := range map[string]error{"Put": putErr, "Get": getErr, "List": listErr} {
		if !errors.Is(err, dlstore.ErrUnavailable) || !strings.Contains(err.Error(), "no answer within the call timeout") {
			t.Errorf("%s without an answer: %v, want ErrUnavailable (call timeout)", name, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Get(ctx, e.ID); !errors.Is(err, context.Canceled) || errors.Is(err, dlstore.ErrUnavailable) {
		t.Errorf("Get with the caller's context canceled: %v, want context.Canceled", err)
	}
}
