// Package tablestore is the Azure Table Storage backend of the order rows:
// one entity per order (PartitionKey = order id, RowKey "status") in table
// "orderstatus", written only with conditions (insert-if-absent, replace
// If-Match ETag). It classifies SDK errors once into the store sentinels and
// bounds every SDK call with a deadline.
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

// DefaultCallTimeout bounds each SDK call (its retries included) unless
// Options.CallTimeout says otherwise.
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
	// CallTimeout bounds each SDK call, including the SDK's own retries.
	// Exceeding it is a transient failure. 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// ClientOptions are passed to the SDK. If nil, or if its Retry field
	// is the zero value, the SDK retries at most twice with short delays
	// (100 ms, then 200 ms; at most 1 s), so that the caller's retry budget,
	// not the SDK's, governs. If its Transport is nil, the Store keeps up
	// to MaxIdleConnsPerHost connections open (see there).
	ClientOptions *aztables.ClientOptions
	// Observe, if set, is called once per storage call (Get, Insert or
	// Replace) after it ends, with the operation (OpGet, OpInsert,
	// OpReplace), its outcome (OutcomeOK, ...) and its duration. SDK
	// retries inside one call are not counted separately. It must be safe
	// for concurrent use and quick.
	Observe func(op, outcome string, d time.Duration)
}

// Store reads and writes order rows in one table. It is safe for concurrent
// use.
//
// The SDK retries a failed request a few times inside one call. A write
// whose answer was lost and that the SDK then retried reports
// store.ErrConflict (its own earlier attempt changed the ETag or created
// the row): callers reread and decide again, as orderstate does, and find
// the message already applied.
type Store struct {
	table   *aztables.Client
	timeout time.Duration
	observe func(op, outcome string, d time.Duration)
}

// NewFromConnectionString returns a Store for table (DefaultTable if empty)
// in the account of the connection string cs (shared key or SAS). It does
// not contact the service.
func NewFromConnectionString(cs, table string, opts *Options) (*Store, error) {
	svc, err := aztables.NewServiceClientFromConnectionString(cs, clientOptions(opts))
	if err != nil {
		// The SDK's message does not include the secret.
		return nil, fmt.Errorf("tablestore: connection string: %w", err)
	}
	return newStore(svc, table, opts), nil
}

// NewWithCredential returns a Store for table (DefaultTable if empty) at
// serviceURL (https://<account>.table.core.windows.net), authenticated with
// cred (a managed identity in production). It does not contact the service.
func NewWithCredential(serviceURL, table string, cred azcore.TokenCredential, opts *Options) (*Store, error) {
	if u, err := url.Parse(serviceURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("tablestore: service URL %q: want https://<account>.table.core.windows.net", serviceURL)
	}
	svc, err := aztables.NewServiceClient(serviceURL, cred, clientOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("tablestore: service %s: %w", serviceURL, err)
	}
	return newStore(svc, table, opts), nil
}

// NewFromService returns a Store for table (DefaultTable if empty) on a
// service client the caller built (the CLI's, from package connect): its
// client options are the caller's; opts sets the call timeout and Observe.
// It does not contact the service.
func NewFromService(svc *aztables.ServiceClient, table string, opts *Options) *Store {
	return newStore(svc, table, opts)
}

// MaxIdleConnsPerHost is how many idle connections to the table service
// a Store keeps. The SDK's default transport keeps 10, so with more calls
// in flight (one per session slot: host.json's maxConcurrentSessions) every
// burst closed connections and opened new ones, each a TCP and TLS
// handshake for the handler and the service (Table Storage speaks HTTP/1.1,
// one call per connection at a time). It is kept above any sensible
// maxConcurrentSessions.
const MaxIdleConnsPerHost = 256

// newTransport is the SDK's default transport (timeouts, TLS 1.2 at least,
// proxy from the environment) with MaxIdleConnsPerHost idle connections.
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
	if isZeroRetry(co.Retry) {
		co.Retry = policy.RetryOptions{MaxRetries: 2, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second}
	}
	return &co
}

func isZeroRetry(r policy.RetryOptions) bool {
	return r.MaxRetries == 0 && r.TryTimeout == 0 && r.RetryDelay == 0 && r.MaxRetryDelay == 0 &&
		r.StatusCodes == nil && r.ShouldRetry == nil
}

func newStore(svc *aztables.ServiceClient, table string, opts *Options) *Store {
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

// EnsureTable creates the table if it does not exist. It is idempotent and
// meant for startup and tests; production provisions the table.
func (s *Store) EnsureTable(ctx context.Context) error {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	_, err := s.table.CreateTable(ctx, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == 409 && re.ErrorCode == string(aztables.TableAlreadyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tablestore: create table: %w", classify(ctx, "create_table", err))
	}
	return nil
}

// Get reads the row of orderID. A missing row fails with an error wrapping
// store.ErrNotFound; retryable failures wrap store.ErrTransient.
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

// Insert adds the row of orderID with state st and returns its ETag. If the
// row exists the error wraps store.ErrConflict and nothing changes.
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

// Replace overwrites the row of orderID with state st if its ETag is still
// etag (If-Match), and returns the new ETag. A changed row fails with
// store.ErrConflict, a missing one with store.ErrNotFound. The empty ETag and
// "*" are refused without calling the service: there is no unconditional
// write.
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

// errCallTimeout is the cause of a per-call deadline, so that classify can
// tell it from the caller's own deadline.
var errCallTimeout = errors.New("call timeout")

func (s *Store) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.timeout, errCallTimeout)
}

func (s *Store) done(op string, err error, start time.Time) {
	if s.observe != nil {
		s.observe(op, outcome(err), time.Since(start))
	}
}

// entity is the JSON of a row as encode writes it.
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

// encode builds the entity JSON: the keys as they are (aztables.EDMEntity
// would double single quotes in them, storing a different key than the one
// read back), times as Edm.DateTime in UTC (a zero time is left out: Table
// Storage dates start in 1601), the sequence as Edm.Int64 so that it reads
// back as a 64-bit integer. A struct, not a map: it is on every write's
// path.
func encode(orderID string, st order.State) ([]byte, error) {
	e := entity{PartitionKey: orderID, RowKey: RowKey, Status: string(st.Status),
		LastSequence: aztables.EDMInt64(st.LastSequence), LastSequenceType: "Edm.Int64"}
	if !st.OccurredAt.IsZero() {
		t := aztables.EDMDateTime(st.OccurredAt.UTC())
		e.OccurredAt, e.OccurredAtType = &t, "Edm.DateTime"
	}
	if !st.UpdatedAt.IsZero() {
		t := aztables.EDMDateTime(st.UpdatedAt.UTC())
		e.UpdatedAt, e.UpdatedAtType = &t, "Edm.DateTime"
	}
	if !st.Deadline.IsZero() {
		t := aztables.EDMDateTime(st.Deadline.UTC())
		e.Deadline, e.DeadlineType = &t, "Edm.DateTime"
	}
	return json.Marshal(e)
}

// decode reads an entity written by encode. A row that does not have that
// shape is an error (not a sentinel): someone else wrote it.
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
