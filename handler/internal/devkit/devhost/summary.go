package devhost

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	handlerconfig "github.com/orderstatus/orderstatus/handler/internal/config"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore/dltable"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// Summary is what a run did. Its JSON form is the --summary-json file (no key
// null); the fields without a JSON key are for the table and Go callers.
type Summary struct {
	// Orders maps every order the host saw to its row, read through GetOrder.
	Orders map[string]OrderRow `json:"orders"`
	// Results counts invocations by outcome (the handler's result, Abandoned, LockLost).
	Results map[string]int `json:"results"`
	// Parked lists the parked copies the handler sent, by original MessageId.
	Parked []Entry `json:"parked"`
	// DeadLettered lists the dead-lettered messages, those taken out included.
	DeadLettered []Entry `json:"deadLettered"`
	// Archived lists the dead-letter store's archived or discarded entries.
	Archived []Entry `json:"archived"`
	// Accounting says where every message sent to the workload queue went.
	Accounting Accounting `json:"accounting"`
	// Instances is what each instance of the app did, in start order.
	Instances []InstanceSummary `json:"instances"`
	// Outages lists the run's outages in start order, with what each cost.
	Outages []OutageSummary `json:"outages"`
	// PoisonDepth and DeadLetterDepth are the poison and dead-letter depths.
	PoisonDepth     int `json:"-"`
	DeadLetterDepth int `json:"-"`
	// Violations lists the invariants that do not hold (see Check).
	Violations []string `json:"-"`
}

// MarshalJSON writes the --summary-json keys, empty rather than null.
func (s Summary) MarshalJSON() ([]byte, error) {
	type file Summary // Summary without this method
	f := file(s)
	f.Orders = orEmpty(f.Orders)
	f.Results = orEmpty(f.Results)
	f.Accounting.Completed = orEmpty(f.Accounting.Completed)
	f.Parked = append([]Entry{}, f.Parked...)
	f.DeadLettered = append([]Entry{}, f.DeadLettered...)
	f.Archived = append([]Entry{}, f.Archived...)
	f.Instances = append([]InstanceSummary{}, f.Instances...)
	f.Outages = append([]OutageSummary{}, f.Outages...)
	return json.Marshal(f)
}

// orEmpty returns m, or an empty map for nil.
func orEmpty[M ~map[K]V, K comparable, V any](m M) M {
	if m == nil {
		return M{}
	}
	return m
}

func sortEntries(entries []Entry) {
	slices.SortStableFunc(entries, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.MessageID, b.MessageID), strings.Compare(a.Reason, b.Reason))
	})
}

// OrderRow is an order's row as GetOrder shows it.
type OrderRow struct {
	Status       string `json:"status"`
	LastSequence int64  `json:"lastSequence"`
}

// Entry is a parked or dead-lettered message.
type Entry struct {
	MessageID string `json:"messageId"`
	Reason    string `json:"reason"`
	// ParkedID is the parked copy's MessageId (parked entries).
	ParkedID string `json:"-"`
	// Queue, SessionID and DeliveryCount are where it was dead-lettered.
	Queue         string `json:"-"`
	SessionID     string `json:"-"`
	DeliveryCount int32  `json:"-"`
	// Removed: a sweeper took it out of the dead-letter subqueue.
	Removed bool `json:"-"`
}

// Summary collects the summary and checks the invariants, once WaitIdle returned.
func (h *Host) Summary(ctx context.Context) (Summary, error) {
	if h.client == nil {
		return Summary{}, errors.New("devhost: Summary before Start")
	}
	if err := h.storeErr(); err != nil {
		return Summary{}, err
	}
	sent, results := h.stats.snapshot()
	parked, removed := h.rec.snapshot()
	s := Summary{Results: results, Parked: parked, DeadLettered: []Entry{}, Instances: h.Instances(), Outages: h.Outages()}
	ps := h.broker.Stats(h.poisonQueue)
	s.PoisonDepth = ps.Active + ps.Locked
	for _, q := range h.triggered {
		dl, err := broker.PeekAll(ctx, h.broker, broker.Source{Queue: q, DeadLetter: true})
		if err != nil {
			return Summary{}, err
		}
		for _, m := range dl {
			s.DeadLettered = append(s.DeadLettered, Entry{MessageID: m.MessageID, Reason: m.DeadLetterReason, Queue: q, SessionID: m.SessionID, DeliveryCount: m.DeliveryCount})
		}
		s.DeadLetterDepth += len(dl)
	}
	for _, e := range removed {
		e.Removed = true
		s.DeadLettered = append(s.DeadLettered, e)
	}
	sortEntries(s.Parked)
	sortEntries(s.DeadLettered)
	var err error
	if s.Archived, err = h.archived(ctx); err != nil {
		return Summary{}, err
	}

	h.stats.mu.Lock()
	sessions := slices.Sorted(maps.Keys(h.stats.sessions))
	completions := slices.Clone(h.stats.completions)
	sentIDs := maps.Clone(h.stats.sentIDs)
	h.stats.mu.Unlock()

	orders, queried, err := h.readOrders(ctx, sessions)
	if err != nil {
		return Summary{}, err
	}
	s.Orders = orders

	var busy []string
	for _, q := range h.triggered {
		if st := h.broker.Stats(q); st.Active+st.Locked+st.Scheduled > 0 {
			busy = append(busy, fmt.Sprintf("queue %s is not drained: %d active, %d locked, %d scheduled", q, st.Active, st.Locked, st.Scheduled))
		}
	}
	paymentTimeout, _ := time.ParseDuration(h.app.Settings[handlerconfig.EnvPaymentTimeout]) // zero: the default
	s.Violations = Check(CheckInput{
		Completions:     slices.DeleteFunc(slices.Clone(completions), func(c Completion) bool { return c.Queue != h.queue }),
		SentIDs:         sentIDs,
		Orders:          orders,
		Queried:         queried,
		Parked:          s.Parked,
		DeadLettered:    s.DeadLettered,
		Busy:            busy,
		MaxDelivery:     h.maxDelivery,
		CallsPerSession: h.app.Host.ServiceBus.MaxConcurrentCallsPerSession,
		Instances:       messageInstances(s.Instances),
		PaymentTimeout:  paymentTimeout,
	})
	_, _, byHandler := h.rec.counts(h.queue)
	s.Accounting = account(sent, byHandler, completions, h.queue, h.broker.Totals(h.queue), h.broker.Stats(h.queue))
	if v := s.Accounting.violation(); v != "" {
		s.Violations = append(s.Violations, v)
	}
	return s, nil
}

// GetOrderFunction is the HTTP function the summary reads orders through.
const GetOrderFunction = "GetOrder"

// orderPath returns the handler's path of order id (GetOrderFunction's route).
func (h *Host) orderPath(id string) string {
	for _, r := range h.routes {
		if r.fn == GetOrderFunction {
			if p, ok := r.expand(id); ok {
				return p
			}
		}
	}
	prefix := "/" + h.app.Host.RoutePrefix
	if prefix == "/" {
		prefix = ""
	}
	return prefix + "/orders/" + url.PathEscape(id)
}

// readOrders reads the rows of the legal order ids; it returns them and the ids looked up.
func (h *Host) readOrders(ctx context.Context, ids []string) (map[string]OrderRow, map[string]bool, error) {
	base, err := groupReadier{h.pool, h.readGroup()}.Ready(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("devhost: read orders: %w", err)
	}
	var (
		mu      sync.Mutex
		rows    = map[string]OrderRow{}
		queried = map[string]bool{}
		errs    []error
		wg      sync.WaitGroup
		next    = make(chan string)
	)
	client := h.client
	for range 8 {
		wg.Go(func() {
			for id := range next {
				row, found, err := getOrder(ctx, client, base+h.orderPath(id))
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("devhost: read order %s: %w", id, err))
				case found:
					rows[id] = row
					queried[id] = true
				default:
					queried[id] = true
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		if order.ValidateID(id) == nil {
			next <- id
		}
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return rows, queried, nil
}

// getOrder GETs one order: 200 is a row, 404 none, anything else an error.
func getOrder(ctx context.Context, client *http.Client, u string) (OrderRow, bool, error) {
	var lastErr error
	for attempt := range 4 {
		if attempt > 0 {
			pause(ctx, time.Duration(attempt)*200*time.Millisecond)
		}
		if err := ctx.Err(); err != nil {
			return OrderRow{}, false, err
		}
		status, body, err := getOnce(ctx, client, u)
		switch {
		case err != nil:
			lastErr = err
		case status == http.StatusOK:
			var row OrderRow
			if err := json.Unmarshal(body, &row); err != nil {
				return OrderRow{}, false, fmt.Errorf("GetOrder answered %s", snippet(body))
			}
			return row, true, nil
		case status == http.StatusNotFound:
			return OrderRow{}, false, nil
		case status >= 500:
			lastErr = fmt.Errorf("GetOrder answered %d: %s", status, snippet(body))
		default:
			return OrderRow{}, false, fmt.Errorf("GetOrder answered %d: %s", status, snippet(body))
		}
	}
	return OrderRow{}, false, lastErr
}

// getOnce GETs u within 30 s and returns the status and body.
func getOnce(ctx context.Context, client *http.Client, u string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// WriteJSON writes s as indented JSON to path, through a renamed temporary file.
func (s Summary) WriteJSON(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".summary-*.json")
	if err != nil {
		// Name the path asked for, not the temporary file's pattern.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("devhost: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(data, '\n'))
	if err = errors.Join(err, tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("devhost: write %s: %w", path, err)
	}
	return nil
}

// WriteTable writes the summary as aligned plain text (at most 50 violations).
func (s Summary) WriteTable(w io.Writer) error {
	type section struct {
		title  string
		counts map[string]int
		order  []string
	}
	statuses := map[string]int{}
	for _, r := range s.Orders {
		statuses[r.Status]++
	}
	var statusOrder []string
	for _, st := range order.Statuses {
		statusOrder = append(statusOrder, string(st))
	}
	sections := []section{
		{fmt.Sprintf("orders by status (%s)", wording.Count(len(s.Orders), "order")), statuses, statusOrder},
		{"handler calls by result (a message abandoned and delivered again is called again)", s.Results, resultOrder},
		{fmt.Sprintf("parked by reason (poison queue depth %d)", s.PoisonDepth), byReason(s.Parked), nil},
		{fmt.Sprintf("dead-lettered by reason (DLQ depth %d)", s.DeadLetterDepth), byReason(s.DeadLettered), nil},
		{"archived by the dead-letter sweeper, by reason", byReason(s.Archived), nil},
	}
	width := max(len("(none)"), s.Accounting.accountingWidth())
	for _, sec := range sections {
		for k := range sec.counts {
			width = max(width, len(k))
		}
	}
	var b strings.Builder
	for i, sec := range sections {
		if i == 2 {
			s.Accounting.writeTable(&b, width)
		}
		b.WriteString(sec.title + "\n")
		keys := ordered(sec.counts, sec.order)
		if len(keys) == 0 {
			b.WriteString("  (none)\n")
		}
		for _, k := range keys {
			fmt.Fprintf(&b, "  %-*s %7d\n", width, k, sec.counts[k])
		}
	}
	writeInstances(&b, s.Instances)
	writeOutages(&b, s.Outages)
	if len(s.Violations) == 0 {
		b.WriteString("invariants: all hold\n")
	} else {
		fmt.Fprintf(&b, "invariants: %d violated\n", len(s.Violations))
		for i, v := range s.Violations {
			if i == 50 {
				fmt.Fprintf(&b, "  ... and %d more (see --summary-json)\n", len(s.Violations)-50)
				break
			}
			fmt.Fprintf(&b, "  - %s\n", v)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// byReason counts the entries still there (not Removed) by reason.
func byReason(entries []Entry) map[string]int {
	n := map[string]int{}
	for _, e := range entries {
		if !e.Removed {
			n[e.Reason]++
		}
	}
	return n
}

// archived reads the dead-letter store's archived and discarded entries.
func (h *Host) archived(ctx context.Context) ([]Entry, error) {
	out := []Entry{}
	if !strings.Contains(h.storeConn, "AccountName=") {
		return out, nil
	}
	svc, err := aztables.NewServiceClientFromConnectionString(h.storeConn, nil)
	if err != nil {
		return nil, fmt.Errorf("devhost: dead-letter store: %w", err)
	}
	rows, err := dltable.New(svc, h.deadLetterTable, nil).List(ctx, dlstore.Filter{States: []dlstore.State{dlstore.Archived, dlstore.Discarded}})
	if err != nil && !errors.Is(err, dlstore.ErrNotFound) {
		return nil, fmt.Errorf("devhost: read the dead-letter store: %w", err)
	}
	for _, r := range rows {
		out = append(out, Entry{MessageID: deadletter.OriginalID(r), Reason: r.Reason})
	}
	sortEntries(out)
	return out, nil
}

// messageInstances counts the instances that took message calls.
func messageInstances(inst []InstanceSummary) int {
	n := 0
	for _, in := range inst {
		if in.Invocations > 0 {
			n++
		}
	}
	return n
}

// scaled reports whether a group ran more than one instance.
func scaled(inst []InstanceSummary) bool {
	seen := map[string]bool{}
	for _, in := range inst {
		if seen[in.Group] {
			return true
		}
		seen[in.Group] = true
	}
	return false
}

// writeInstances writes what each instance did, when a group scaled.
func writeInstances(b *strings.Builder, inst []InstanceSummary) {
	if !scaled(inst) {
		return
	}
	fmt.Fprintf(b, "by instance (%d started; a group per function, as Flex Consumption scales)\n", len(inst))
	for _, in := range inst {
		results := slices.Sorted(maps.Keys(in.Results))
		var parts []string
		for _, r := range results {
			parts = append(parts, fmt.Sprintf("%s %d", r, in.Results[r]))
		}
		fmt.Fprintf(b, "  %-20s %-8s calls %5d, timer runs %3d | round trips %5d, ETag conflicts %3d, cache hits %5d | %s\n",
			in.ID, in.State, in.Invocations, in.TimerRuns, in.RoundTrips, in.ETagConflicts, in.CacheHits, strings.Join(parts, ", "))
	}
}

// writeOutages writes each outage and what it cost, when there were any.
func writeOutages(b *strings.Builder, list []OutageSummary) {
	if len(list) == 0 {
		return
	}
	fmt.Fprintf(b, "outages (%d; counted from each one's start to its end, on the host's clock)\n", len(list))
	for _, o := range list {
		state := ""
		if !o.Ended {
			state = " (not over)"
		}
		fmt.Fprintf(b, "  %-10s from %s for %s%s: %s refused | rescheduled %d, dead-lettered %d, parked %d\n",
			o.Target, o.After, o.Duration, state, wording.Count(o.Refused, "request"), o.Rescheduled, o.DeadLettered, o.Parked)
	}
}
