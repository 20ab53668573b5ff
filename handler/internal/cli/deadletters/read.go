package deadletters

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

func jsonLines[T any](w io.Writer, vs []T) {
	enc := json.NewEncoder(w)
	for _, v := range vs {
		_ = enc.Encode(v)
	}
}

func (c *cli) stats(args []string) int {
	fs := c.flags()
	asJSON := fs.Bool("json", false, "JSON Lines, one source and reason per line")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	s, err := c.open(reads)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	st, unreadable, err := s.sw.Stats(c.ctx)
	if err != nil && len(unreadable) == 0 {
		return c.fail(err)
	}
	unreadable = s.serviceBusParts(unreadable)
	if *asJSON {
		jsonLines(c.stdout, st)
	} else if len(st) > 0 {
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE\tREASON\tDEPTH\tOLDEST AGE\tIN QUEUE\tLEFT")
		for _, x := range st {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\n", x.Source, orDash(x.Reason), x.Depth, age(x.OldestAgeSeconds), x.InQueue, x.Left)
		}
		_ = tw.Flush()
	}
	return c.unreadable(unreadable)
}

// serviceBusParts replaces the unread sources by one, saying why.
func (s *session) serviceBusParts(parts []string) []string {
	if s.NoBroker == nil {
		return parts
	}
	sources := map[string]bool{}
	for _, k := range dlstore.Sources {
		sources[s.Queues.Source(k).String()] = true
	}
	var out []string
	said := false
	for _, p := range parts {
		switch {
		case !sources[p]:
			out = append(out, p)
		case !said:
			out = append(out, "Service Bus ("+s.NoBroker.Error()+")")
			said = true
		}
	}
	return out
}

// unreadable names what could not be read: exit 1 (none: 0).
func (c *cli) unreadable(parts []string) int {
	if len(parts) == 0 {
		return exitOK
	}
	fmt.Fprintf(c.stderr, "%s: could not read %s; the rest is reported\n", c.name, oneLine(strings.Join(parts, "; ")))
	return exitFailure
}

// checkFilter parses the FILTER flags (exit 2 on a bad one).
func (c *cli) checkFilter(ff *filterFlags, states []dlstore.State) (filter, int) {
	f, err := ff.check(states)
	if err != nil {
		return f, c.usage("%v", err)
	}
	return f, -1
}

// resolve resolves f's relative times against the command's now.
func (c *cli) resolve(s *session, f filter) (dlstore.Filter, int) {
	now := s.sw.Now()
	out, err := f.at(now)
	if err != nil {
		return out, c.usage("%v", err)
	}
	return out, -1
}

func (c *cli) groups(args []string) int {
	fs := c.flags()
	ff := addFilterFlags(fs)
	asJSON := fs.Bool("json", false, "JSON Lines, one group per line")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	pf, code := c.checkFilter(ff, nil) // Groups defaults to the entries not closed
	if code >= 0 {
		return code
	}
	s, err := c.open(reads)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	f, code := c.resolve(s, pf)
	if code >= 0 {
		return code
	}
	gs, err := s.sw.Groups(c.ctx, f)
	if err != nil {
		return c.fail(err)
	}
	if len(gs) == 0 {
		return c.notFound("no dead letters match")
	}
	if *asJSON {
		jsonLines(c.stdout, gs)
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSOURCE\tREASON\tCOUNT\tORDERS\tFIRST SEEN\tLAST SEEN\tPOLICY\tDESCRIPTION")
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", g.ID, g.Source, orDash(g.Reason), g.Count, g.Orders,
			stamp(g.First), stamp(g.Last), g.Action, shorten(g.Template, 60))
	}
	_ = tw.Flush()
	return exitOK
}

// entryOut is an entry as list and find print it, without the body.
type entryOut struct {
	ID             string         `json:"id"`
	Source         dlstore.Source `json:"source"`
	SequenceNumber int64          `json:"sequence_number"`
	MessageID      string         `json:"message_id"`
	OrderID        string         `json:"order_id"`
	Subject        string         `json:"subject,omitempty"`
	Reason         string         `json:"reason"`
	Description    string         `json:"description"`
	Group          string         `json:"group"`
	State          dlstore.State  `json:"state"`
	StoredAt       time.Time      `json:"stored_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
	AgeSeconds     int64          `json:"age_seconds"`
	DeliveryCount  int32          `json:"delivery_count"`
	ReplayCount    int            `json:"replay_count"`
	NewMessageID   string         `json:"new_message_id,omitempty"`
}

func entryOf(e dlstore.Entry, now time.Time) entryOut {
	return entryOut{ID: e.ID, Source: e.Source, SequenceNumber: e.SequenceNumber, MessageID: e.MessageID, OrderID: e.OrderID,
		Subject: e.Subject, Reason: e.Reason, Description: e.Description, Group: e.Group, State: e.State,
		StoredAt: e.StoredAt.UTC(), UpdatedAt: e.UpdatedAt.UTC(), AgeSeconds: int64(max(now.Sub(e.StoredAt), 0) / time.Second),
		DeliveryCount: e.DeliveryCount, ReplayCount: e.ReplayCount, NewMessageID: e.NewMessageID}
}

func (c *cli) list(args []string) int {
	fs := c.flags()
	ff := addFilterFlags(fs)
	maxN := fs.Int("max", 50, "list at most `N` entries (the oldest)")
	asJSON := fs.Bool("json", false, "JSON Lines, one entry per line")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	if *maxN < 1 {
		return c.usage("--max %d: want at least 1", *maxN)
	}
	pf, code := c.checkFilter(ff, dlstore.NotClosed().States)
	if code >= 0 {
		return code
	}
	s, err := c.open(reads)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	f, code := c.resolve(s, pf)
	if code >= 0 {
		return code
	}
	now := s.sw.Now()
	es, err := s.sw.Select(c.ctx, f) // the set an action with this filter takes
	if err != nil {
		return c.fail(err)
	}
	if len(es) == 0 {
		return c.notFound("no dead letters match")
	}
	more := max(len(es)-*maxN, 0)
	es = es[:min(len(es), *maxN)]
	if *asJSON {
		out := make([]entryOut, len(es))
		for i, e := range es {
			out[i] = entryOf(e, now)
		}
		jsonLines(c.stdout, out)
	} else {
		printEntries(c.stdout, es, now)
	}
	if more > 0 {
		fmt.Fprintf(c.stderr, "%s: %d more not shown (raise --max or narrow the filter)\n", c.name, more)
	}
	return exitOK
}

func printEntries(w io.Writer, es []dlstore.Entry, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tMESSAGE ID\tORDER\tREASON\tAGE\tREPLAYS\tGROUP\tDESCRIPTION")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID, e.State, e.MessageID, orDash(e.OrderID), orDash(e.Reason),
			age(int64(max(now.Sub(e.StoredAt), 0)/time.Second)), e.ReplayCount, e.Group, shorten(e.Description, 50))
	}
	_ = tw.Flush()
}

// orderRow is the order's row in the order table.
type orderRow struct {
	OrderID      string    `json:"order_id"`
	Status       string    `json:"status"`
	LastSequence int64     `json:"last_sequence"`
	OccurredAt   time.Time `json:"occurred_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// auditOut is an audit entry as find prints it.
type auditOut struct {
	EntryID        string         `json:"entry_id"`
	N              int            `json:"n"`
	Action         string         `json:"action"`
	From           dlstore.State  `json:"from,omitempty"`
	To             dlstore.State  `json:"to"`
	Actor          string         `json:"actor"`
	Source         dlstore.Source `json:"source"`
	SequenceNumber int64          `json:"sequence_number"`
	MessageID      string         `json:"message_id"`
	Reason         string         `json:"reason,omitempty"`
	NewMessageID   string         `json:"new_message_id,omitempty"`
	Detail         string         `json:"detail,omitempty"`
}

// event is one line of find: the order row, an entry or an audit entry.
type event struct {
	Kind  string    `json:"kind"` // "order", "entry" or "audit"
	At    time.Time `json:"at"`
	Order *orderRow `json:"order,omitempty"`
	Entry *entryOut `json:"entry,omitempty"`
	Audit *auditOut `json:"audit,omitempty"`
}

func (c *cli) find(args []string) int {
	fs := c.flags()
	orderID := fs.String("order", "", "the order `id` (its SessionId; required)")
	asJSON := fs.Bool("json", false, "JSON Lines, one event per line in time order (kind order, entry or audit)")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	if strings.TrimSpace(*orderID) == "" {
		return c.usage("--order is required")
	}
	if err := tableKey(*orderID); err != nil {
		return c.usage("--order %q: %v, so no order has it (list --order shows dead letters that carry it)", *orderID, err)
	}
	s, err := c.open(reads)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	events, unreadable := s.orderEvents(c.ctx, *orderID)
	noKey := contract.ValidateOrderID(*orderID)
	if len(events) == 0 && len(unreadable) == 0 {
		return c.notFound("nothing known of order %q: no row in the order table, no dead letters, no audit entries", *orderID)
	}
	if *asJSON {
		jsonLines(c.stdout, events)
		return c.unreadable(unreadable)
	}
	hasRow := slices.ContainsFunc(events, func(e event) bool { return e.Kind == "order" })
	switch {
	case noKey != nil:
		fmt.Fprintf(c.stdout, "order %q: no row in the order table (not an order id: %v)\n", *orderID, noKey)
	case !hasRow && len(unreadable) == 0:
		fmt.Fprintf(c.stdout, "order %s: no row in the order table\n", *orderID)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWHAT\tDETAIL")
	for _, e := range events {
		switch {
		case e.Order != nil:
			fmt.Fprintf(tw, "%s\torder row\tstatus %s, last sequence %d (occurred %s, on the producer's clock)\n", stamp(e.At),
				e.Order.Status, e.Order.LastSequence, stamp(e.Order.OccurredAt))
		case e.Entry != nil:
			x := e.Entry
			fmt.Fprintf(tw, "%s\tdead letter %s\t%s seq %d, %s, %s: now %s, %s%s\n", stamp(e.At), x.ID, x.Source, x.SequenceNumber,
				x.MessageID, orDash(x.Reason), x.State, wording.Count(x.ReplayCount, "replay"), ifSet(", last as ", x.NewMessageID))
		case e.Audit != nil:
			x := e.Audit
			fmt.Fprintf(tw, "%s\t%s by %s\t%s (%s -> %s)%s%s\n", stamp(e.At), x.Action, x.Actor, x.EntryID, orDash(string(x.From)), x.To,
				ifSet(", as ", x.NewMessageID), ifSet(": ", shorten(x.Detail, 60)))
		}
	}
	_ = tw.Flush()
	return c.unreadable(unreadable)
}

// orderEvents is everything known of one order, as find prints it: the
// order row, then the store's entries and audit entries in time order; and
// the parts that could not be read.
func (s *session) orderEvents(ctx context.Context, orderID string) (events []event, unreadable []string) {
	now := s.sw.Now()
	switch {
	case contract.ValidateOrderID(orderID) != nil: // the handler writes no row for such an id (too long)
	case s.Orders == nil:
		unreadable = append(unreadable, "the order table (not connected)")
	default:
		row, err := s.Orders.Get(ctx, orderID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			unreadable = append(unreadable, "the order table ("+err.Error()+")")
		default:
			st := row.State
			events = append(events, event{Kind: "order", At: st.UpdatedAt.UTC(), Order: &orderRow{OrderID: row.OrderID,
				Status: string(st.Status), LastSequence: st.LastSequence, OccurredAt: st.OccurredAt.UTC(), UpdatedAt: st.UpdatedAt.UTC()}})
		}
	}
	rep, err := s.sw.Order(ctx, orderID)
	if err != nil {
		unreadable = append(unreadable, "the dead-letter store ("+err.Error()+")")
	}
	for _, e := range rep.Entries {
		eo := entryOf(e, now)
		events = append(events, event{Kind: "entry", At: eo.StoredAt, Entry: &eo})
	}
	for _, a := range rep.History {
		events = append(events, event{Kind: "audit", At: a.At.UTC(), Audit: &auditOut{EntryID: a.EntryID, N: a.N, Action: a.Action,
			From: a.From, To: a.To, Actor: a.Actor, Source: a.Source, SequenceNumber: a.SequenceNumber, MessageID: a.MessageID,
			Reason: a.Reason, NewMessageID: a.NewMessageID, Detail: a.Detail}})
	}
	// The order row (the handler's latest write), then the store's events by
	// time: an entry before its audit entries, those by number.
	rank := map[string]int{"order": 0, "entry": 1, "audit": 2}
	slices.SortStableFunc(events, func(a, b event) int {
		if n := cmp.Compare(min(rank[a.Kind], 1), min(rank[b.Kind], 1)); n != 0 {
			return n
		}
		if n := a.At.Compare(b.At); n != 0 {
			return n
		}
		if n := cmp.Compare(rank[a.Kind], rank[b.Kind]); n != 0 {
			return n
		}
		if a.Audit != nil && b.Audit != nil {
			return cmp.Or(cmp.Compare(a.Audit.EntryID, b.Audit.EntryID), cmp.Compare(a.Audit.N, b.Audit.N))
		}
		return 0
	})
	return events, unreadable
}

func ifSet(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// tableKey reports why id cannot be a Table Storage key (/ \ # ? or a control
// character), or nil: "Understanding the Table service data model", Microsoft
// Learn: Characters disallowed in key fields.
func tableKey(id string) error {
	if i := strings.IndexAny(id, `/\#?`); i >= 0 {
		return fmt.Errorf("a Table Storage key cannot contain %q", id[i])
	}
	if i := strings.IndexFunc(id, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("a Table Storage key cannot contain the control character %U", r)
	}
	return nil
}

// messageOut is a message as a replay would send it (replay --dry-run).
type messageOut struct {
	MessageID     string         `json:"message_id"`
	SessionID     string         `json:"session_id"`
	Subject       string         `json:"subject"`
	ContentType   string         `json:"content_type,omitempty"`
	CorrelationID string         `json:"correlation_id,omitempty"`
	Properties    map[string]any `json:"properties"`
	// Body is the body as text; BodyBase64 instead when it is not UTF-8.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
}

func messageOf(m broker.Message) *messageOut {
	out := &messageOut{MessageID: m.MessageID, SessionID: m.SessionID, Subject: m.Subject, ContentType: m.ContentType,
		CorrelationID: m.CorrelationID, Properties: propertiesOf(m.ApplicationProperties)}
	out.Body, out.BodyBase64 = bodyOf(m.Body)
	return out
}

// shownEntry is one entry with its message: list's keys, then the rest.
type shownEntry struct {
	entryOut
	SessionID     string         `json:"session_id"`
	ContentType   string         `json:"content_type,omitempty"`
	CorrelationID string         `json:"correlation_id,omitempty"`
	EnqueuedTime  time.Time      `json:"enqueued_time"`
	ClaimedBy     string         `json:"claimed_by,omitempty"`
	Properties    map[string]any `json:"properties"`
	Body          string         `json:"body,omitempty"`
	BodyBase64    string         `json:"body_base64,omitempty"`
}

func shownOf(e dlstore.Entry, now time.Time) shownEntry {
	out := shownEntry{entryOut: entryOf(e, now), SessionID: e.SessionID, ContentType: e.ContentType, CorrelationID: e.CorrelationID,
		EnqueuedTime: e.EnqueuedTime.UTC(), ClaimedBy: e.ClaimedBy, Properties: propertiesOf(e.Properties)}
	out.Body, out.BodyBase64 = bodyOf(e.Body)
	return out
}

// propertiesOf is props for JSON: never null, times in UTC.
func propertiesOf(props map[string]any) map[string]any {
	out := make(map[string]any, len(props))
	for k, v := range props {
		if t, ok := v.(time.Time); ok {
			v = t.UTC()
		}
		out[k] = v
	}
	return out
}

// bodyOf is b as text, or in base64 when it is not UTF-8.
func bodyOf(b []byte) (text, b64 string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return "", base64.StdEncoding.EncodeToString(b)
}

// printMessage prints m as replay --dry-run shows it: headers, properties
// (sorted), then the body.
func printMessage(w io.Writer, m broker.Message) {
	fmt.Fprintln(w, "the message as it would be sent:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, h := range [][2]string{{"MessageId", m.MessageID}, {"SessionId", m.SessionID}, {"Subject", m.Subject},
		{"ContentType", m.ContentType}, {"CorrelationId", m.CorrelationID}} {
		fmt.Fprintf(tw, "  %s\t%s\n", h[0], orDash(h[1]))
	}
	for _, k := range slices.Sorted(maps.Keys(m.ApplicationProperties)) {
		v := m.ApplicationProperties[k]
		if t, ok := v.(time.Time); ok {
			v = t.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(tw, "  property %s\t%v (%T)\n", k, v, m.ApplicationProperties[k])
	}
	_ = tw.Flush()
	text, b64 := bodyOf(m.Body)
	if b64 != "" {
		fmt.Fprintf(w, "  body (%d bytes, not UTF-8; base64): %s\n", len(m.Body), b64)
		return
	}
	fmt.Fprintf(w, "  body (%d bytes): %s\n", len(m.Body), text)
}
