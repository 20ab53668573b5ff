// Package tablestore is the Azure Table Storage backend of the order rows: one
// entity per order (PartitionKey = order id, RowKey "status"), written only
// conditionally (insert-if-absent, replace If-Match ETag).
package tablestore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// Names of the table, the row key and the columns.
const (
	DefaultTable = "orderstatus"
	RowKey       = "status"

	colStatus       = "Status"
	colLastSequence = "LastSequence"
	colOccurredAt   = "OccurredAt"
	colUpdatedAt    = "UpdatedAt"
	colDeadline     = "PaymentDeadline"
)

// DefaultCallTimeout bounds each SDK call, its retries included (Options.CallTimeout).
const DefaultCallTimeout = 5 * time.Second

// Operation names passed to Options.Observe.
const (
	OpGet     = "get"
	OpInsert  = "insert"
	OpReplace = "replace"
)

// Outcome names passed to Options.Observe.
const (
	OutcomeOK        = "ok"
	OutcomeConflict  = "conflict"  // 409 on insert, 412 on replace
	OutcomeNotFound  = "not_found" // 404 on get or replace
	OutcomeTransient = "transient" // throttling, 5xx, timeouts, connection failures
	OutcomeCanceled  = "canceled"  // the caller's context ended first
	OutcomeError     = "error"     // anything else (400, 403, ...)
)

// Options tune a Store. A nil *Options or the zero value gives defaults.
type Options struct {
	// CallTimeout bounds each SDK call with its retries (0: DefaultCallTimeout); past it is transient.
	CallTimeout time.Duration
	// ClientOptions go to the SDK; zero Retry: two short retries; nil Transport: newTransport.
	ClientOptions *aztables.ClientOptions
	// Observe, if set, gets each call's op, outcome and duration; quick and concurrency-safe.
	Observe func(op, outcome string, d time.Duration)
}

// Store reads and writes order rows in one table, safe for concurrent use. A retried write
// whose answer was lost reports store.ErrConflict: callers reread and decide again.
type Store struct {
	table   *aztables.Client
	timeout time.Duration
	observe func(op, outcome string, d time.Duration)
}

// NewFromConnectionString returns a Store for table ("": DefaultTable) in cs's account, offline.
func NewFromConnectionString(cs, table string, opts *Options) (*Store, error) {
	svc, err := aztables.NewServiceClientFromConnectionString(cs, clientOptions(opts))
	if err != nil {
		// The SDK's message does not include the secret.
		return nil, fmt.Errorf("tablestore: connection string: %w", err)
	}
	return NewFromService(svc, table, opts), nil
}

// NewWithCredential is NewFromConnectionString at serviceURL, authenticated with cred.
func NewWithCredential(serviceURL, table string, cred azcore.TokenCredential, opts *Options) (*Store, error) {
	if u, err := url.Parse(serviceURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("tablestore: service URL %q: want https://<account>.table.core.windows.net", serviceURL)
	}
	svc, err := aztables.NewServiceClient(serviceURL, cred, clientOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("tablestore: service %s: %w", serviceURL, err)
	}
	return NewFromService(svc, table, opts), nil
}

// MaxIdleConnsPerHost is a Store's idle connections to the table service (SDK default: 10).
const MaxIdleConnsPerHost = 256

// newTransport is the SDK's default transport with MaxIdleConnsPerHost idle connections.
func newTransport() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}}
}

func clientOptions(opts *Options) *aztables.ClientOptions {
	var co aztables.ClientOptions
	if opts != nil && opts.ClientOptions != nil {
		co = *opts.ClientOptions
	}
	if co.Transport == nil {
		co.Transport = newTransport()
	}
	if r := co.Retry; r.MaxRetries == 0 && r.TryTimeout == 0 && r.RetryDelay == 0 && r.MaxRetryDelay == 0 && r.StatusCodes == nil && r.ShouldRetry == nil {
		co.Retry = policy.RetryOptions{MaxRetries: 2, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second}
	}
	return &co
}

// NewFromService is NewWithCredential on the caller's service client (opts: timeout, Observe).
func NewFromService(svc *aztables.ServiceClient, table string, opts *Options) *Store {
	if table == "" {
		table = DefaultTable
	}
	s := &Store{table: svc.NewClient(table), timeout: DefaultCallTimeout}
	if opts != nil {
		if opts.CallTimeout > 0 {
			s.timeout = opts.CallTimeout
		}
		s.observe = opts.Observe
	}
	return s
}

// EnsureTable creates the table if absent (idempotent; infra provisions it in production).
func (s *Store) EnsureTable(ctx context.Context) error {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	_, err := s.table.CreateTable(ctx, nil)
	if err = classify(ctx, "create_table", err); err != nil && tableerr.CodeOf(err) != string(aztables.TableAlreadyExists) {
		return fmt.Errorf("tablestore: create table: %w", err)
	}
	return nil
}

// Get reads orderID's row; missing: store.ErrNotFound, retryable: store.ErrTransient.
func (s *Store) Get(ctx context.Context, orderID string) (store.Row, error) {
	start := time.Now()
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	resp, err := s.table.GetEntity(callCtx, orderID, RowKey, nil)
	var row store.Row
	if err == nil {
		row, err = decode(orderID, resp.Value, store.ETag(resp.ETag))
	} else {
		err = classify(callCtx, OpGet, err)
	}
	s.done(OpGet, err, start)
	if err != nil {
		return store.Row{}, fmt.Errorf("tablestore: get %s: %w", orderID, err)
	}
	return row, nil
}

// Insert adds orderID's row with state st and returns its ETag; store.ErrConflict if it exists.
func (s *Store) Insert(ctx context.Context, orderID string, st order.State) (store.ETag, error) {
	body, err := encode(orderID, st)
	if err != nil {
		return "", fmt.Errorf("tablestore: insert %s: %w", orderID, err)
	}
	start := time.Now()
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	resp, err := s.table.AddEntity(callCtx, body, nil)
	err = classify(callCtx, OpInsert, err)
	s.done(OpInsert, err, start)
	if err != nil {
		return "", fmt.Errorf("tablestore: insert %s: %w", orderID, err)
	}
	return store.ETag(resp.ETag), nil
}

// Replace overwrites orderID's row with st If-Match etag and returns the new ETag;
// store.ErrConflict if changed, ErrNotFound if missing; "" and "*" are refused.
func (s *Store) Replace(ctx context.Context, orderID string, st order.State, etag store.ETag) (store.ETag, error) {
	if etag == "" || etag == "*" {
		return "", fmt.Errorf("tablestore: replace %s: %w", orderID, errUnconditional)
	}
	body, err := encode(orderID, st)
	if err != nil {
		return "", fmt.Errorf("tablestore: replace %s: %w", orderID, err)
	}
	start := time.Now()
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	ifMatch := azcore.ETag(etag)
	resp, err := s.table.UpdateEntity(callCtx, body, &aztables.UpdateEntityOptions{IfMatch: &ifMatch, UpdateMode: aztables.UpdateModeReplace})
	err = classify(callCtx, OpReplace, err)
	s.done(OpReplace, err, start)
	if err != nil {
		return "", fmt.Errorf("tablestore: replace %s: %w", orderID, err)
	}
	return store.ETag(resp.ETag), nil
}

var errUnconditional = errors.New("unconditional write refused: an ETag from a read or write is required")

func (s *Store) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.timeout, tableerr.ErrCallTimeout)
}

func (s *Store) done(op string, err error, start time.Time) {
	if s.observe != nil {
		s.observe(op, outcome(err), time.Since(start))
	}
}

type entity struct {
	PartitionKey     string                `json:"PartitionKey"`
	RowKey           string                `json:"RowKey"`
	Status           string                `json:"Status"`
	LastSequence     aztables.EDMInt64     `json:"LastSequence"`
	LastSequenceType string                `json:"LastSequence@odata.type"`
	OccurredAt       *aztables.EDMDateTime `json:"OccurredAt,omitempty"`
	OccurredAtType   string                `json:"OccurredAt@odata.type,omitempty"`
	UpdatedAt        *aztables.EDMDateTime `json:"UpdatedAt,omitempty"`
	UpdatedAtType    string                `json:"UpdatedAt@odata.type,omitempty"`
	Deadline         *aztables.EDMDateTime `json:"PaymentDeadline,omitempty"`
	DeadlineType     string                `json:"PaymentDeadline@odata.type,omitempty"`
}

// encode builds the entity JSON, keys as they are (aztables.EDMEntity doubles single quotes).
func encode(orderID string, st order.State) ([]byte, error) {
	e := entity{PartitionKey: orderID, RowKey: RowKey, Status: string(st.Status),
		LastSequence: aztables.EDMInt64(st.LastSequence), LastSequenceType: "Edm.Int64"}
	e.OccurredAt, e.OccurredAtType = edmTime(st.OccurredAt)
	e.UpdatedAt, e.UpdatedAtType = edmTime(st.UpdatedAt)
	e.Deadline, e.DeadlineType = edmTime(st.Deadline)
	return json.Marshal(e)
}

// edmTime is a time column and its type, or none for the zero time.
func edmTime(t time.Time) (*aztables.EDMDateTime, string) {
	if t.IsZero() {
		return nil, ""
	}
	v := aztables.EDMDateTime(t.UTC())
	return &v, "Edm.DateTime"
}

// decode reads an entity written by encode; any other shape is an error (not a sentinel).
func decode(orderID string, body []byte, etag store.ETag) (store.Row, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(body, &e); err != nil {
		return store.Row{}, fmt.Errorf("decode entity: %w", err)
	}
	row := store.Row{OrderID: orderID, ETag: etag}
	status, ok := e.Properties[colStatus].(string)
	if !ok {
		return store.Row{}, fmt.Errorf("decode entity: %s is %T, want a string", colStatus, e.Properties[colStatus])
	}
	row.State.Status = order.Status(status)
	switch v := e.Properties[colLastSequence].(type) {
	case aztables.EDMInt64:
		row.State.LastSequence = int64(v)
	case int32: // written without the Edm.Int64 annotation
		row.State.LastSequence = int64(v)
	default:
		return store.Row{}, fmt.Errorf("decode entity: %s is %T, want Edm.Int64", colLastSequence, v)
	}
	for col, dst := range map[string]*time.Time{colOccurredAt: &row.State.OccurredAt, colUpdatedAt: &row.State.UpdatedAt, colDeadline: &row.State.Deadline} {
		switch v := e.Properties[col].(type) {
		case nil:
		case aztables.EDMDateTime:
			*dst = time.Time(v).UTC()
		default:
			return store.Row{}, fmt.Errorf("decode entity: %s is %T, want Edm.DateTime", col, v)
		}
	}
	return row, nil
}

// ErrStorage matches a failure neither a sentinel nor the caller's context (HTTP 400...).
var ErrStorage = errors.New("tablestore: request failed")

// classify sorts err, from an SDK call for op under callCtx (the caller's context
// plus the per-call deadline), into the store sentinels through tableerr.Classify.
func classify(callCtx context.Context, op string, err error) error {
	e := tableerr.Classify(callCtx, "", err)
	if e == nil {
		return nil
	}
	switch e.Kind {
	case tableerr.Conflict:
		return e.Wrap(store.ErrConflict)
	case tableerr.Exists:
		if op == OpInsert {
			return e.Wrap(store.ErrConflict)
		}
	case tableerr.NotFound:
		return e.Wrap(store.ErrNotFound)
	case tableerr.TableNotFound, tableerr.Forbidden, tableerr.Unavailable:
		return e.Wrap(store.ErrTransient)
	case tableerr.Canceled:
		return e.Wrap(callCtx.Err())
	}
	return e.Wrap(ErrStorage)
}

// outcome names the result of a storage call for Options.Observe.
func outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, store.ErrConflict):
		return OutcomeConflict
	case errors.Is(err, store.ErrNotFound):
		return OutcomeNotFound
	case errors.Is(err, store.ErrTransient):
		return OutcomeTransient
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	}
	return OutcomeError
}
