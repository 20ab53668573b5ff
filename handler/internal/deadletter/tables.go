package deadletter

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
)

// Sentinel errors of the record keeping; TableStore classifies the SDK's
// errors into them once.
var (
	// ErrUnavailable: the tables cannot be reached now (timeout, 5xx,
	// throttling, 403 while a role assignment propagates); retry later.
	ErrUnavailable = errors.New("deadletter: tables unavailable")
	// errExists: an insert found the row there already.
	errExists = errors.New("deadletter: row exists")
)

// Seen is the record of when the sweeper first saw a message.
type Seen struct {
	MessageID string
	At        time.Time
}

// AuditRow is one action on one message, a row of the audit table.
type AuditRow struct {
	At             time.Time
	Action         Action
	Source         Kind
	Reason         string
	MessageID      string
	SessionID      string
	SequenceNumber int64
	// NewMessageID is the replay's MessageId (replays and resubmits).
	NewMessageID string
	// Actor is "sweeper" or "cli:<user>".
	Actor  string
	Detail string
}

// Records is what the sweeper keeps in tables: first-seen times (the
// start of the cool-down), audit rows and archived messages. TableStore
// implements it over Table Storage; tests use fakes.
type Records interface {
	// SeenAll returns the first-seen records of source k by sequence
	// number.
	SeenAll(ctx context.Context, k Kind) (map[int64]Seen, error)
	// MarkSeen records that m of source k was first seen at now, unless a
	// record of the same message exists, and returns the recorded time:
	// two sweeps never reset a cool-down.
	MarkSeen(ctx context.Context, k Kind, m broker.Received, now time.Time, actor string) (time.Time, error)
	// Audit appends an audit row.
	Audit(ctx context.Context, r AuditRow) error
	// Archive stores the whole of m (body, properties, reason, ids and
	// times); archiving the same message again is a no-op.
	Archive(ctx context.Context, k Kind, m broker.Received, at time.Time, actor string, action Action) error
}

// Table names and defaults (app settings DEAD_LETTER_ARCHIVE_TABLE and
// DEAD_LETTER_AUDIT_TABLE).
const (
	DefaultArchiveTable = "deadletterarchive"
	DefaultAuditTable   = "deadletteraudit"
)

// TableStore keeps the records in two tables of one account. Its methods
// are safe for concurrent use. Writes are inserts (a 409 means the row is
// there already) or, for a first-seen row whose sequence number a
// recreated queue reused, a Replace under the row's ETag; never an upsert.
type TableStore struct {
	audit, archive         *aztables.Client
	auditName, archiveName string
	timeout                time.Duration

	mu      sync.Mutex
	ensured bool
}

var _ Records = (*TableStore)(nil)

// NewTableStore returns the records in tables audit and archive of svc.
func NewTableStore(svc *aztables.ServiceClient, audit, archive string) *TableStore {
	return &TableStore{audit: svc.NewClient(audit), archive: svc.NewClient(archive),
		auditName: audit, archiveName: archive, timeout: 15 * time.Second}
}

// EnsureTables creates both tables if absent; after one success it does
// nothing.
func (s *TableStore) EnsureTables(ctx context.Context) error {
	s.mu.Lock()
	done := s.ensured
	s.mu.Unlock()
	if done {
		return nil
	}
	for _, t := range []struct {
		c    *aztables.Client
		name string
	}{{s.audit, s.auditName}, {s.archive, s.archiveName}} {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := t.c.CreateTable(ctx, nil)
		cancel()
		var re *azcore.ResponseError
		if err != nil && !(errors.As(err, &re) && re.StatusCode == http.StatusConflict) {
			return fmt.Errorf("deadletter: create table %s: %w", t.name, classify(err))
		}
	}
	s.mu.Lock()
	s.ensured = true
	s.mu.Unlock()
	return nil
}

// classify sorts an SDK error into the sentinels: the one place that
// reads them.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusConflict && re.ErrorCode == string(aztables.EntityAlreadyExists):
			return fmt.Errorf("%w (HTTP 409 %s)", errExists, re.ErrorCode)
		case re.StatusCode == http.StatusForbidden, re.StatusCode == http.StatusRequestTimeout,
			re.StatusCode == http.StatusTooManyRequests, re.StatusCode >= 500,
			re.StatusCode == http.StatusNotFound && re.ErrorCode == string(aztables.TableNotFound):
			return fmt.Errorf("%w (HTTP %d %s)", ErrUnavailable, re.StatusCode, re.ErrorCode)
		}
		return fmt.Errorf("deadletter: table request failed (HTTP %d %s)", re.StatusCode, re.ErrorCode)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

func seenPartition(k Kind) string { return "seen-" + string(k) }

func seqKey(seq int64) string { return fmt.Sprintf("%020d", seq) }

// SeenAll reads the first-seen rows of k.
func (s *TableStore) SeenAll(ctx context.Context, k Kind) (map[int64]Seen, error) {
	if err := s.EnsureTables(ctx); err != nil {
		return nil, err
	}
	filter := fmt.Sprintf("PartitionKey eq '%s'", seenPartition(k))
	sel := "RowKey,MessageId,At,SequenceNumber"
	p := s.audit.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Select: &sel})
	out := map[int64]Seen{}
	for p.More() {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		page, err := p.NextPage(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("deadletter: read seen rows of %s: %w", k, classify(err))
		}
		for _, raw := range page.Entities {
			var e aztables.EDMEntity
			if err := json.Unmarshal(raw, &e); err != nil {
				return nil, fmt.Errorf("deadletter: decode seen row of %s: %w", k, err)
			}
			seq, _ := e.Properties["SequenceNumber"].(aztables.EDMInt64)
			at, _ := e.Properties["At"].(aztables.EDMDateTime)
			id, _ := e.Properties["MessageId"].(string)
			out[int64(seq)] = Seen{MessageID: id, At: time.Time(at).UTC()}
		}
	}
	return out, nil
}

// MarkSeen inserts the first-seen row of m unless one for the same message
// exists; a row left by another message with the same sequence number (a
// recreated queue) is replaced under its ETag.
func (s *TableStore) MarkSeen(ctx context.Context, k Kind, m broker.Received, now time.Time, actor string) (time.Time, error) {
	if err := s.EnsureTables(ctx); err != nil {
		return time.Time{}, err
	}
	row := s.auditEntity(seenPartition(k), seqKey(m.SequenceNumber), AuditRow{
		At: now, Action: ActionSeen, Source: k, Reason: m.DeadLetterReason, MessageID: m.MessageID,
		SessionID: sessionOf(m), SequenceNumber: m.SequenceNumber, Actor: actor,
	})
	body, err := json.Marshal(row)
	if err != nil {
		return time.Time{}, fmt.Errorf("deadletter: encode seen row: %w", err)
	}
	for range 3 {
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err = s.audit.AddEntity(cctx, body, nil)
		cancel()
		if err == nil {
			return now, nil
		}
		if err = classify(err); !errors.Is(err, errExists) {
			return time.Time{}, fmt.Errorf("deadletter: record %s seq %d seen: %w", k, m.SequenceNumber, err)
		}
		cctx, cancel = context.WithTimeout(ctx, s.timeout)
		got, gerr := s.audit.GetEntity(cctx, row.PartitionKey, row.RowKey, nil)
		cancel()
		if gerr != nil {
			return time.Time{}, fmt.Errorf("deadletter: read %s seq %d seen: %w", k, m.SequenceNumber, classify(gerr))
		}
		var e aztables.EDMEntity
		if err := json.Unmarshal(got.Value, &e); err != nil {
			return time.Time{}, fmt.Errorf("deadletter: decode seen row: %w", err)
		}
		if id, _ := e.Properties["MessageId"].(string); id == m.MessageID {
			at, _ := e.Properties["At"].(aztables.EDMDateTime)
			return time.Time(at).UTC(), nil
		}
		etag := got.ETag
		cctx, cancel = context.WithTimeout(ctx, s.timeout)
		_, err = s.audit.UpdateEntity(cctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		cancel()
		if err == nil {
			return now, nil
		}
		var re *azcore.ResponseError
		if !(errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed) {
			return time.Time{}, fmt.Errorf("deadletter: replace %s seq %d seen: %w", k, m.SequenceNumber, classify(err))
		}
		// Someone else changed it meanwhile: read again.
	}
	return time.Time{}, fmt.Errorf("deadletter: record %s seq %d seen: lost three races: %w", k, m.SequenceNumber, ErrUnavailable)
}

func sessionOf(m broker.Received) string {
	if s, ok := m.ApplicationProperties[parking.PropOriginalSessionID].(string); ok && s != "" {
		return s
	}
	return m.SessionID
}

func (s *TableStore) auditEntity(pk, rk string, r AuditRow) aztables.EDMEntity {
	return aztables.EDMEntity{
		Entity: aztables.Entity{PartitionKey: pk, RowKey: rk},
		Properties: map[string]any{
			"At":             aztables.EDMDateTime(r.At.UTC()),
			"Action":         string(r.Action),
			"Source":         string(r.Source),
			"Reason":         r.Reason,
			"MessageId":      r.MessageID,
			"SessionId":      r.SessionID,
			"SequenceNumber": aztables.EDMInt64(r.SequenceNumber),
			"NewMessageId":   r.NewMessageID,
			"Actor":          r.Actor,
			"Detail":         r.Detail,
		},
	}
}

// Audit appends r in the partition of its day (UTC), keyed by time,
// source, sequence number and action, so rows list in time order.
func (s *TableStore) Audit(ctx context.Context, r AuditRow) error {
	if err := s.EnsureTables(ctx); err != nil {
		return err
	}
	at := r.At.UTC()
	rk := fmt.Sprintf("%s-%s-%s-%s", at.Format("20060102T150405.000000000Z"), r.Source, seqKey(r.SequenceNumber), r.Action)
	body, err := json.Marshal(s.auditEntity(at.Format("2006-01-02"), rk, r))
	if err != nil {
		return fmt.Errorf("deadletter: encode audit row: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.audit.AddEntity(ctx, body, nil); err != nil {
		if err = classify(err); errors.Is(err, errExists) {
			return nil // the same action at the same instant: recorded
		}
		return fmt.Errorf("deadletter: audit %s %s seq %d: %w", r.Action, r.Source, r.SequenceNumber, err)
	}
	return nil
}

// bodyChunk is the longest string property a chunk of the base64 body
// takes (Table Storage allows 64 KiB per property, UTF-16).
const bodyChunk = 30000

// ArchiveKey is the row key of m's archive row: its sequence number and a
// hash of its MessageId, so a recreated queue's reused number does not
// collide.
func ArchiveKey(m broker.Received) string {
	sum := sha256.Sum256([]byte(m.MessageID))
	return seqKey(m.SequenceNumber) + "-" + hex.EncodeToString(sum[:8])
}

// Archive inserts the archive row of m in partition k.
func (s *TableStore) Archive(ctx context.Context, k Kind, m broker.Received, at time.Time, actor string, action Action) error {
	if err := s.EnsureTables(ctx); err != nil {
		return err
	}
	props, err := json.Marshal(typedProperties(m.ApplicationProperties))
	if err != nil {
		return fmt.Errorf("deadletter: encode properties of %s: %w", m.MessageID, err)
	}
	b64 := base64.StdEncoding.EncodeToString(m.Body)
	p := map[string]any{
		"Source":                string(k),
		"SequenceNumber":        aztables.EDMInt64(m.SequenceNumber),
		"MessageId":             m.MessageID,
		"OriginalMessageId":     OriginalID(m),
		"SessionId":             sessionOf(m),
		"Subject":               m.Subject,
		"ContentType":           m.ContentType,
		"CorrelationId":         m.CorrelationID,
		"Reason":                m.DeadLetterReason,
		"Description":           m.DeadLetterErrorDescription,
		"DeliveryCount":         int32(m.DeliveryCount),
		"ApplicationProperties": string(props),
		"BodyLength":            int32(len(m.Body)),
		"ArchivedAt":            aztables.EDMDateTime(at.UTC()),
		"ArchivedBy":            actor,
		"Action":                string(action),
	}
	if !m.EnqueuedTime.IsZero() {
		p["EnqueuedTime"] = aztables.EDMDateTime(m.EnqueuedTime.UTC())
	}
	if !m.ExpiresAt.IsZero() && m.ExpiresAt.Year() < 9999 {
		p["ExpiresAt"] = aztables.EDMDateTime(m.ExpiresAt.UTC())
	}
	chunks := 0
	for len(b64) > 0 || chunks == 0 {
		n := min(len(b64), bodyChunk)
		p[fmt.Sprintf("Body%d", chunks)] = b64[:n]
		b64 = b64[n:]
		chunks++
	}
	p["BodyChunks"] = int32(chunks)
	body, err := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: string(k), RowKey: ArchiveKey(m)}, Properties: p})
	if err != nil {
		return fmt.Errorf("deadletter: encode archive row of %s: %w", m.MessageID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.archive.AddEntity(ctx, body, nil); err != nil {
		if err = classify(err); errors.Is(err, errExists) {
			return nil // archived by an earlier attempt
		}
		return fmt.Errorf("deadletter: archive %s seq %d (%s): %w", k, m.SequenceNumber, m.MessageID, err)
	}
	return nil
}

// typedProperties writes application properties with their types, so an
// archived message can be rebuilt exactly.
func typedProperties(p map[string]any) map[string]map[string]string {
	out := make(map[string]map[string]string, len(p))
	for k, v := range p {
		var t, s string
		switch x := v.(type) {
		case string:
			t, s = "string", x
		case bool:
			t, s = "bool", fmt.Sprint(x)
		case int64:
			t, s = "int64", fmt.Sprint(x)
		case float64:
			t, s = "float64", fmt.Sprint(x)
		case time.Time:
			t, s = "time", x.UTC().Format(time.RFC3339Nano)
		default:
			t, s = "string", fmt.Sprint(x)
		}
		out[k] = map[string]string{"type": t, "value": s}
	}
	return out
}

// Archived is an archive row as ListArchived reads it.
type Archived struct {
	Source            Kind
	MessageID         string
	OriginalMessageID string
	Reason            string
	Action            string
	Body              []byte
}

// ListArchived reads every archive row (for the development host's
// summary and tests), sorted by original message id, then reason.
func (s *TableStore) ListArchived(ctx context.Context) ([]Archived, error) {
	if err := s.EnsureTables(ctx); err != nil {
		return nil, err
	}
	var out []Archived
	p := s.archive.NewListEntitiesPager(nil)
	for p.More() {
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		page, err := p.NextPage(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("deadletter: list archive: %w", classify(err))
		}
		for _, raw := range page.Entities {
			var e aztables.EDMEntity
			if err := json.Unmarshal(raw, &e); err != nil {
				return nil, fmt.Errorf("deadletter: decode archive row: %w", err)
			}
			str := func(k string) string { v, _ := e.Properties[k].(string); return v }
			a := Archived{Source: Kind(e.PartitionKey), MessageID: str("MessageId"), OriginalMessageID: str("OriginalMessageId"),
				Reason: str("Reason"), Action: str("Action")}
			n, _ := e.Properties["BodyChunks"].(int32)
			var b64 string
			for i := range int(n) {
				b64 += str(fmt.Sprintf("Body%d", i))
			}
			a.Body, _ = base64.StdEncoding.DecodeString(b64)
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Archived) int {
		if a.OriginalMessageID != b.OriginalMessageID {
			if a.OriginalMessageID < b.OriginalMessageID {
				return -1
			}
			return 1
		}
		if a.Reason < b.Reason {
			return -1
		} else if a.Reason > b.Reason {
			return 1
		}
		return 0
	})
	return out, nil
}

// ListAudit reads every audit row except the first-seen ones, in key
// (time) order (tests and the development host).
func (s *TableStore) ListAudit(ctx context.Context) ([]AuditRow, error) {
	if err := s.EnsureTables(ctx); err != nil {
		return nil, err
	}
	var out []AuditRow
	p := s.audit.NewListEntitiesPager(nil)
	for p.More() {
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		page, err := p.NextPage(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("deadletter: list audit: %w", classify(err))
		}
		for _, raw := range page.Entities {
			var e aztables.EDMEntity
			if err := json.Unmarshal(raw, &e); err != nil {
				return nil, fmt.Errorf("deadletter: decode audit row: %w", err)
			}
			str := func(k string) string { v, _ := e.Properties[k].(string); return v }
			at, _ := e.Properties["At"].(aztables.EDMDateTime)
			seq, _ := e.Properties["SequenceNumber"].(aztables.EDMInt64)
			out = append(out, AuditRow{At: time.Time(at).UTC(), Action: Action(str("Action")), Source: Kind(str("Source")),
				Reason: str("Reason"), MessageID: str("MessageId"), SessionID: str("SessionId"), SequenceNumber: int64(seq),
				NewMessageID: str("NewMessageId"), Actor: str("Actor"), Detail: str("Detail")})
		}
	}
	return out, nil
}
