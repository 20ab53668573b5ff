package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/tableerr"
)

// Limits of one Commit, checked first (ErrTooLarge), from
// https://learn.microsoft.com/rest/api/storageservices/performing-entity-group-transactions
// and https://learn.microsoft.com/rest/api/storageservices/understanding-the-table-service-data-model.
const (
	// MaxTransactionOps is the most operations in one transaction; Commit
	// adds the counter row and one index row per ScheduleTimeout.
	MaxTransactionOps = 100
	// MaxTransactionBytes is the most a transaction's payload may be.
	MaxTransactionBytes = 4 << 20
	// MaxEntityBytes is the most one entity may be, strings in UTF-16.
	MaxEntityBytes = 1 << 20
	// MaxPropertyBytes is the most a string (UTF-16) or binary may be.
	MaxPropertyBytes = 64 << 10
)

// DefaultPrefix starts the outbox's RowKeys (its counter, records and index
// rows) in a producer's partition; the producer's own rows must not.
const DefaultPrefix = "outbox"

// DefaultCallTimeout bounds each storage call of a Table.
const DefaultCallTimeout = 10 * time.Second

// TableOptions tune a Table. The zero value (or nil) gives the defaults.
type TableOptions struct {
	// Prefix replaces DefaultPrefix (letters, digits and '-' only).
	Prefix string
	// CallTimeout bounds calls (default DefaultCallTimeout): ErrTransient.
	CallTimeout time.Duration
	// Now is the clock of CommittedAt (default time.Now).
	Now func() time.Time
}

// Table is the outbox in a producer's own Azure Table Storage table: Commit
// writes the producer's operations and the messages in one entity-group
// transaction, and it is the Store the relay reads. Safe for concurrent use.
type Table struct {
	c       *aztables.Client
	prefix  string
	timeout time.Duration
	now     func() time.Time
}

var _ Store = (*Table)(nil)

// NewTable returns the outbox in table c (the producer's table; created
// by the producer, or by EnsureTable). It does not contact the service.
func NewTable(c *aztables.Client, opts *TableOptions) (*Table, error) {
	var o TableOptions
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.Trim(o.Prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" || len(o.Prefix) > 64 {
		return nil, fmt.Errorf("outbox: prefix %q: want letters, digits and '-', at most 64", o.Prefix)
	}
	orDefault(&o.CallTimeout, DefaultCallTimeout)
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Table{c: c, prefix: o.Prefix, timeout: o.CallTimeout, now: o.Now}, nil
}

// Check reads the table once: nil when it exists, else an error wrapping
// ErrTableNotFound or another classified error.
func (t *Table) Check(ctx context.Context) error {
	cctx, cancel := t.call(ctx)
	defer cancel()
	filter := fmt.Sprintf("PartitionKey eq '' and RowKey eq '%s'", t.counterKey())
	pager := t.c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: to.Ptr(int32(1))})
	if _, err := pager.NextPage(cctx); err != nil {
		return fmt.Errorf("outbox: check table: %w", classify(cctx, err))
	}
	return nil
}

// EnsureTable creates the table if it does not exist (tests, first runs).
func (t *Table) EnsureTable(ctx context.Context) error {
	ctx, cancel := t.call(ctx)
	defer cancel()
	_, err := t.c.CreateTable(ctx, nil)
	if err = classify(ctx, err); err != nil && tableerr.CodeOf(err) != string(aztables.TableAlreadyExists) {
		return fmt.Errorf("outbox: create table: %w", err)
	}
	return nil
}

// Op is one operation of a Commit: an Entity or an Intent.
type Op interface{ isOp() }

// Entity is one of the producer's own operations, as aztables takes it: in
// the commit's partition, its RowKey not starting with the prefix. Without
// IfMatch an update is an upsert, never a conflict (aztables
// transactional_batch.go, generateEntitySubset).
type Entity aztables.TransactionAction

func (Entity) isOp() {}
func (Intent) isOp() {}

const (
	colNext        = "Next"
	colLastCommit  = "LastCommit"
	colKind        = "Kind"
	colSeq         = "Seq"
	colState       = "State"
	colOrder       = "OrderId"
	colMessageID   = "MessageId"
	colSessionID   = "SessionId"
	colSubject     = "Subject"
	colContentType = "ContentType"
	colBody        = "Body"
	colAfterMs     = "AfterMs"
	colCommittedAt = "CommittedAt"
	colDoneAt      = "DoneAt"
	colSequenceNo  = "SequenceNumber"
	colError       = "Error"
	colRecord      = "Record"
)

func (t *Table) counterKey() string         { return t.prefix }
func (t *Table) recordKey(seq int64) string { return fmt.Sprintf("%s:r:%020d", t.prefix, seq) }

// timeoutKey is the index row of a KindSchedule record: "<prefix>:t:<order>"
// for the older form, "<prefix>:t:<order>:<MessageId>" per Created.
func (t *Table) timeoutKey(r Record) string {
	base := t.timeoutBase(r.OrderID)
	if r.Message.MessageID == contract.TimeoutMessageID(r.OrderID, 0) {
		return base
	}
	return base + ":" + r.Message.MessageID
}

func (t *Table) timeoutBase(order string) string { return t.prefix + ":t:" + order }

func odataQuote(s string) string { return strings.ReplaceAll(s, "'", "''") }

const maxCommitRetries = 8

// Commit writes ops in partition in one entity-group transaction, all or
// none; nil means all are durable. It is safe for concurrent use. Errors:
//   - contract.ErrInvalid: an invalid intent or entity (nothing written);
//   - ErrTooLarge: over MaxTransactionOps, MaxTransactionBytes,
//     MaxEntityBytes or MaxPropertyBytes (nothing written);
//   - ErrConflict: an operation's condition failed, or the same check is
//     scheduled in this partition already: reread and decide again;
//   - ErrTransient: no answer, or a retry asked; it may have committed, so
//     reread before committing again.
func (t *Table) Commit(ctx context.Context, partition string, ops ...Op) error {
	var (
		own     []aztables.TransactionAction
		intents []Intent
	)
	for i, op := range ops {
		switch op := op.(type) {
		case Entity:
			if err := t.checkOwn(partition, i, aztables.TransactionAction(op)); err != nil {
				return err
			}
			own = append(own, aztables.TransactionAction(op))
		case Intent:
			intents = append(intents, op)
		case nil:
			return fmt.Errorf("outbox: commit %s: op %d is nil: %w", partition, i, contract.ErrInvalid)
		}
	}
	recs, err := Encode(partition, t.now(), intents...)
	if err != nil {
		return fmt.Errorf("outbox: commit %s: %w", partition, err)
	}
	schedules := 0
	for _, r := range recs {
		if r.Kind == KindSchedule {
			schedules++
		}
	}
	if n := len(own) + len(recs) + schedules + 1; n > MaxTransactionOps {
		return fmt.Errorf("outbox: commit %s: %d operations (%d own, %d records, %d timeout index rows, 1 counter), at most %d in one transaction: %w",
			partition, n, len(own), len(recs), schedules, MaxTransactionOps, ErrTooLarge)
	}
	commitID := rand.Text()
	for attempt := 1; ; attempt++ {
		next, etag, _, err := t.counter(ctx, partition)
		if err != nil {
			return fmt.Errorf("outbox: commit %s: %w", partition, err)
		}
		actions, err := t.actions(partition, own, recs, next, etag, commitID)
		if err != nil {
			return err
		}
		err = t.submit(ctx, actions)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrTransient) {
			return fmt.Errorf("outbox: commit %s: %w", partition, err)
		}
		// A lost answer: the counter holds this commit's ID.
		_, etag2, last, rerr := t.counter(ctx, partition)
		switch {
		case rerr == nil && last == commitID:
			return nil
		case errors.Is(err, ErrConflict) && rerr == nil && etag2 != etag && attempt < maxCommitRetries:
			continue
		}
		return fmt.Errorf("outbox: commit %s: %w", partition, err)
	}
}

func (t *Table) checkOwn(partition string, i int, a aztables.TransactionAction) error {
	var keys struct {
		PartitionKey *string `json:"PartitionKey"`
		RowKey       *string `json:"RowKey"`
	}
	if err := json.Unmarshal(a.Entity, &keys); err != nil || keys.PartitionKey == nil || keys.RowKey == nil {
		return fmt.Errorf("outbox: commit %s: op %d: want an entity with string PartitionKey and RowKey: %w", partition, i, contract.ErrInvalid)
	}
	if *keys.PartitionKey != partition {
		return fmt.Errorf("outbox: commit %s: op %d: PartitionKey %q is not the commit's partition (one transaction is one partition): %w",
			partition, i, *keys.PartitionKey, contract.ErrInvalid)
	}
	if strings.HasPrefix(*keys.RowKey, t.prefix) {
		return fmt.Errorf("outbox: commit %s: op %d: RowKey %q starts with the outbox's prefix %q: %w", partition, i, *keys.RowKey, t.prefix, contract.ErrInvalid)
	}
	n, name, largest, err := entitySize(a.Entity)
	if err != nil {
		return fmt.Errorf("outbox: commit %s: op %d: %v: %w", partition, i, err, contract.ErrInvalid)
	}
	if n > MaxEntityBytes {
		return fmt.Errorf("outbox: commit %s: op %d: entity of %d bytes as Table Storage counts it (strings in UTF-16), at most %d: %w",
			partition, i, n, MaxEntityBytes, ErrTooLarge)
	}
	if largest > MaxPropertyBytes {
		return fmt.Errorf("outbox: commit %s: op %d: property %s of %d bytes as Table Storage counts it (strings in UTF-16), at most %d: %w",
			partition, i, name, largest, MaxPropertyBytes, ErrTooLarge)
	}
	return nil
}

// entitySize is entity's size as Table Storage counts it against
// MaxEntityBytes: 4, plus 2 per key character, plus per property 8, 2 per
// name character and valueSize (characters being UTF-16 code units). Sources:
// "How the size of an entity is calculated in Windows Azure table storage"
// (learn.microsoft.com/archive/blogs/avkashchauhan), "Understanding the Table
// service data model" and "Payload format for Table service operations"
// (Microsoft Learn). A null value counts its name only. largest is its largest
// string or binary property and that value's size against MaxPropertyBytes.
func entitySize(entity []byte) (size int, largest string, largestSize int, err error) {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(entity, &props); err != nil {
		return 0, "", 0, fmt.Errorf("entity is not a JSON object: %v", err)
	}
	size = 4
	for name, raw := range props {
		switch {
		case name == "Timestamp" || strings.HasPrefix(name, "odata.") || strings.Contains(name, "@odata."):
			continue
		case name == "PartitionKey" || name == "RowKey":
			var key string
			_ = json.Unmarshal(raw, &key) // not a string: checkOwn refuses it
			size += 2 * utf16Units(key)
			continue
		}
		var typ, str string
		if t, ok := props[name+"@odata.type"]; ok {
			_ = json.Unmarshal(t, &typ)
		}
		n := valueSize(typ, raw)
		size += 8 + 2*utf16Units(name) + n
		// A string, or a binary: a string in JSON; its data is n without its 4 bytes of length.
		if (typ == "" || typ == "Edm.String" || typ == "Edm.Binary") && json.Unmarshal(raw, &str) == nil && n-4 > largestSize {
			largest, largestSize = name, n-4
		}
	}
	return size, largest, largestSize, nil
}

// valueSize is the size of a value of OData type typ ("": by JSON kind).
func valueSize(typ string, raw json.RawMessage) int {
	v := strings.TrimSpace(string(raw))
	var s string
	isString := strings.HasPrefix(v, `"`) && json.Unmarshal(raw, &s) == nil
	switch typ {
	case "Edm.Guid":
		return 16
	case "Edm.DateTime", "Edm.Int64", "Edm.Double":
		return 8
	case "Edm.Int32":
		return 4
	case "Edm.Boolean":
		return 1
	case "Edm.Binary":
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return 4 + len(b)
		}
		return 4 + base64.StdEncoding.DecodedLen(len(s))
	}
	switch {
	case isString:
		return 4 + 2*utf16Units(s)
	case v == "true" || v == "false":
		return 1
	case v == "null":
		return 0
	}
	if _, err := strconv.ParseInt(v, 10, 32); err == nil {
		return 4
	}
	return 8
}

// utf16Units is how many UTF-16 code units s is (2 outside the BMP).
func utf16Units(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// counter reads the partition's last Seq, the counter's ETag ("": none) and
// the last commit's ID.
func (t *Table) counter(ctx context.Context, partition string) (int64, string, string, error) {
	cctx, cancel := t.call(ctx)
	defer cancel()
	resp, err := t.c.GetEntity(cctx, partition, t.counterKey(), nil)
	if err != nil {
		err = classify(cctx, err)
		if errors.Is(err, ErrNotFound) {
			return 0, "", "", nil
		}
		return 0, "", "", fmt.Errorf("read counter: %w", err)
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return 0, "", "", fmt.Errorf("read counter: %v: %w", err, ErrTransient)
	}
	last, _ := e.Properties[colLastCommit].(string)
	return int64Prop(e.Properties[colNext]), string(resp.ETag), last, nil
}

// actions builds the transaction: counter, own operations, records, index.
func (t *Table) actions(partition string, own []aztables.TransactionAction, recs []Record, next int64, etag, commitID string) ([]aztables.TransactionAction, error) {
	var actions []aztables.TransactionAction
	add := func(kind aztables.TransactionType, ifMatch string, e aztables.EDMEntity) error {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("outbox: commit %s: encode %s: %w", partition, e.RowKey, err)
		}
		if n, _, _, err := entitySize(b); err != nil || n > MaxEntityBytes {
			return fmt.Errorf("outbox: commit %s: row %s of %d bytes as Table Storage counts it, at most %d: %w", partition, e.RowKey, n, MaxEntityBytes, ErrTooLarge)
		}
		a := aztables.TransactionAction{ActionType: kind, Entity: b}
		if ifMatch != "" {
			a.IfMatch = to.Ptr(azcore.ETag(ifMatch))
		}
		actions = append(actions, a)
		return nil
	}
	counter := aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: partition, RowKey: t.counterKey()},
		Properties: map[string]any{colNext: aztables.EDMInt64(next + int64(len(recs))), colLastCommit: commitID}}
	var err error
	if etag == "" {
		err = add(aztables.TransactionTypeAdd, "", counter)
	} else {
		err = add(aztables.TransactionTypeUpdateReplace, etag, counter)
	}
	if err != nil {
		return nil, err
	}
	actions = append(actions, own...)
	for i, r := range recs {
		seq := next + 1 + int64(i)
		body := string(r.Message.Body)
		if n := 2 * utf16Units(body); n > MaxPropertyBytes {
			return nil, fmt.Errorf("outbox: commit %s: message %s: body of %d bytes as UTF-16, at most %d: %w", partition, r.Message.MessageID, n, MaxPropertyBytes, ErrTooLarge)
		}
		p := map[string]any{
			colKind: string(r.Kind), colSeq: aztables.EDMInt64(seq), colState: string(Pending), colOrder: r.OrderID,
			colCommittedAt: aztables.EDMDateTime(r.CommittedAt),
		}
		if r.Kind != KindCancel {
			p[colMessageID], p[colSessionID], p[colSubject], p[colContentType], p[colBody] =
				r.Message.MessageID, r.Message.SessionID, r.Message.Subject, r.Message.ContentType, body
		}
		if r.Kind == KindSchedule {
			p[colAfterMs] = aztables.EDMInt64(r.After.Milliseconds())
		}
		key := t.recordKey(seq)
		if err := add(aztables.TransactionTypeAdd, "", aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: partition, RowKey: key}, Properties: p}); err != nil {
			return nil, err
		}
		if r.Kind == KindSchedule {
			if err := add(aztables.TransactionTypeAdd, "", aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: partition, RowKey: t.timeoutKey(r)},
				Properties: map[string]any{colRecord: key}}); err != nil {
				return nil, err
			}
		}
	}
	total := 0
	for _, a := range actions {
		total += len(a.Entity) + 512 // each operation's request line and headers
	}
	if total > MaxTransactionBytes {
		return nil, fmt.Errorf("outbox: commit %s: about %d bytes, at most %d in one transaction: %w", partition, total, MaxTransactionBytes, ErrTooLarge)
	}
	return actions, nil
}

func (t *Table) submit(ctx context.Context, actions []aztables.TransactionAction) error {
	cctx, cancel := t.call(ctx)
	defer cancel()
	_, err := t.c.SubmitTransaction(cctx, actions, nil)
	return classify(cctx, err)
}

// Pending implements Store with one query over the records' RowKey range.
func (t *Table) Pending(ctx context.Context, max int) ([]Record, error) {
	if max <= 0 {
		return nil, nil
	}
	filter := fmt.Sprintf("RowKey ge '%s:r:' and RowKey lt '%s:r;' and State eq '%s'", t.prefix, t.prefix, Pending)
	return t.query(ctx, filter, max)
}

func (t *Table) query(ctx context.Context, filter string, max int) ([]Record, error) {
	cctx, cancel := t.call(ctx)
	defer cancel()
	pager := t.c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: to.Ptr(int32(min(max, 1000)))})
	var out []Record
	for pager.More() && len(out) < max {
		page, err := pager.NextPage(cctx)
		if err != nil {
			return nil, fmt.Errorf("outbox: query: %w", classify(cctx, err))
		}
		for _, b := range page.Entities {
			r, err := t.decode(b, "")
			if err != nil {
				return nil, err
			}
			out = append(out, r)
			if len(out) == max {
				break
			}
		}
	}
	return out, nil
}

// decode reads a record row; etag overrides the row's odata.etag.
func (t *Table) decode(b []byte, etag string) (Record, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(b, &e); err != nil {
		return Record{}, fmt.Errorf("outbox: decode record: %v: %w", err, ErrTransient)
	}
	str := func(k string) string { s, _ := e.Properties[k].(string); return s }
	r := Record{
		Partition: e.PartitionKey, ID: e.RowKey, Seq: int64Prop(e.Properties[colSeq]), Kind: Kind(str(colKind)),
		OrderID: str(colOrder), State: State(str(colState)), Error: str(colError),
		After:          time.Duration(int64Prop(e.Properties[colAfterMs])) * time.Millisecond,
		SequenceNumber: int64Prop(e.Properties[colSequenceNo]),
		CommittedAt:    timeProp(e.Properties[colCommittedAt]), DoneAt: timeProp(e.Properties[colDoneAt]),
		Version: e.ETag,
	}
	if etag != "" {
		r.Version = etag
	}
	if r.Kind != KindCancel {
		r.Message.MessageID, r.Message.SessionID, r.Message.Subject, r.Message.ContentType =
			str(colMessageID), str(colSessionID), str(colSubject), str(colContentType)
		r.Message.Body = []byte(str(colBody))
	}
	return r, nil
}

// Timeouts implements Store: the order's index rows, then their records.
func (t *Table) Timeouts(ctx context.Context, partition, orderID string) ([]Record, error) {
	cctx, cancel := t.call(ctx)
	defer cancel()
	base := t.timeoutBase(orderID)
	filter := fmt.Sprintf("PartitionKey eq '%s' and (RowKey eq '%s' or (RowKey ge '%s:' and RowKey lt '%s;'))",
		odataQuote(partition), odataQuote(base), odataQuote(base), odataQuote(base))
	pager := t.c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Select: to.Ptr(colRecord)})
	var out []Record
	for pager.More() {
		page, err := pager.NextPage(cctx)
		if err != nil {
			return nil, fmt.Errorf("outbox: timeouts %s/%s: %w", partition, orderID, classify(cctx, err))
		}
		for _, b := range page.Entities {
			var idx aztables.EDMEntity
			if err := json.Unmarshal(b, &idx); err != nil {
				return nil, fmt.Errorf("outbox: timeouts %s/%s: %v: %w", partition, orderID, err, ErrTransient)
			}
			key, _ := idx.Properties[colRecord].(string)
			resp, err := t.c.GetEntity(cctx, partition, key, nil)
			if err != nil {
				return nil, fmt.Errorf("outbox: timeouts %s/%s: record %s: %w", partition, orderID, key, classify(cctx, err))
			}
			r, err := t.decode(resp.Value, string(resp.ETag))
			if err != nil {
				return nil, err
			}
			if r.OrderID == orderID { // the range also holds orders whose ID continues with ":"
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Mark implements Store: one transaction of merges, If-Match Version or *.
func (t *Table) Mark(ctx context.Context, partition string, marks []Mark) error {
	if len(marks) == 0 {
		return nil
	}
	if len(marks) > MaxMarks {
		return fmt.Errorf("outbox: mark %d in %s: at most %d: %w", len(marks), partition, MaxMarks, ErrTooLarge)
	}
	actions := make([]aztables.TransactionAction, 0, len(marks))
	seen := map[string]bool{}
	for _, m := range marks {
		if m.State != Sent && m.State != Failed {
			return fmt.Errorf("outbox: mark %s/%s: state %q: want sent or failed: %w", partition, m.ID, m.State, contract.ErrInvalid)
		}
		if seen[m.ID] {
			continue // one operation per row in a transaction
		}
		seen[m.ID] = true
		p := map[string]any{colState: string(m.State), colDoneAt: aztables.EDMDateTime(m.DoneAt.UTC())}
		if m.SequenceNumber != 0 {
			p[colSequenceNo] = aztables.EDMInt64(m.SequenceNumber)
		}
		if m.Error != "" {
			p[colError] = truncate(m.Error, 1024)
		}
		b, err := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: partition, RowKey: m.ID}, Properties: p})
		if err != nil {
			return fmt.Errorf("outbox: mark %s/%s: %w", partition, m.ID, err)
		}
		ifMatch := azcore.ETagAny
		if m.Version != "" {
			ifMatch = azcore.ETag(m.Version)
		}
		actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeUpdateMerge, Entity: b, IfMatch: &ifMatch})
	}
	if err := t.submit(ctx, actions); err != nil {
		return fmt.Errorf("outbox: mark %d in %s: %w", len(actions), partition, err)
	}
	return nil
}

// Purge implements Store: a query, then per-partition delete transactions.
func (t *Table) Purge(ctx context.Context, before time.Time, max int) (int, error) {
	if max <= 0 {
		return 0, nil
	}
	filter := fmt.Sprintf("RowKey ge '%s:r:' and RowKey lt '%s:r;' and State eq '%s' and DoneAt lt datetime'%s'",
		t.prefix, t.prefix, Sent, before.UTC().Format(time.RFC3339Nano))
	recs, err := t.query(ctx, filter, max)
	if err != nil {
		return 0, fmt.Errorf("outbox: purge: %w", err)
	}
	byPart := map[string][]Record{}
	var parts []string
	for _, r := range recs {
		if _, ok := byPart[r.Partition]; !ok {
			parts = append(parts, r.Partition)
		}
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	del := func(partition, key string) aztables.TransactionAction {
		b, _ := json.Marshal(aztables.Entity{PartitionKey: partition, RowKey: key})
		return aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: b}
	}
	purged := 0
	for _, p := range parts {
		for rs := byPart[p]; len(rs) > 0; {
			var actions []aztables.TransactionAction // records, each with its index row
			n := 0
			for ; n < len(rs) && len(actions) < MaxTransactionOps-1; n++ {
				actions = append(actions, del(p, rs[n].ID))
				if rs[n].Kind == KindSchedule {
					actions = append(actions, del(p, t.timeoutKey(rs[n])))
				}
			}
			// ErrNotFound: another purge deleted some first.
			if err := t.submit(ctx, actions); err == nil {
				purged += n
			} else if !errors.Is(err, ErrNotFound) {
				return purged, fmt.Errorf("outbox: purge in %s: %w", p, err)
			}
			rs = rs[n:]
		}
	}
	return purged, nil
}

func (t *Table) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, t.timeout, tableerr.ErrCallTimeout)
}

func int64Prop(v any) int64 {
	switch v := v.(type) {
	case aztables.EDMInt64:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	case float64:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

func timeProp(v any) time.Time {
	switch v := v.(type) {
	case aztables.EDMDateTime:
		return time.Time(v).UTC()
	case string:
		t, _ := time.Parse(time.RFC3339Nano, v)
		return t
	}
	return time.Time{}
}

// ErrStorage is matched by a request refused for good (400, 403 on a key).
var ErrStorage = errors.New("outbox: storage request failed")

// ErrTableNotFound is matched by a request on a missing table (404
// TableNotFound). It is ErrTransient too, as a new table may still be
// propagating, so Relay.Run waits for it.
var ErrTableNotFound = errors.New("outbox: table not found")

// classify maps err from an aztables call made with callCtx onto the
// sentinels via tableerr.Classify; anything unrecognised is ErrStorage.
func classify(callCtx context.Context, err error) error {
	e := tableerr.Classify(callCtx, "", err)
	if e == nil {
		return nil
	}
	switch e.Kind {
	case tableerr.Conflict, tableerr.Exists:
		return e.Wrap(ErrConflict)
	case tableerr.NotFound:
		return e.Wrap(ErrNotFound)
	case tableerr.TableNotFound:
		return e.Wrap(ErrTransient, ErrTableNotFound)
	case tableerr.Forbidden, tableerr.Unavailable:
		return e.Wrap(ErrTransient)
	case tableerr.TooLarge:
		return e.Wrap(ErrTooLarge)
	case tableerr.Canceled:
		return e.Wrap(callCtx.Err())
	}
	return e.Wrap(ErrStorage)
}
