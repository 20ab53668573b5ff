package publish_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokerpub"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
	"github.com/orderstatus/orderstatus/handler/publish"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// render is a message as its golden file holds it: every property on a
// line of its own, then the body's exact bytes.
func render(m publish.Message) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "MessageId: %s\nSessionId: %s\nSubject: %s\nContentType: %s\n", m.MessageID, m.SessionID, m.Subject, m.ContentType)
	if m.CorrelationID != "" || m.TimeToLive != 0 || len(m.ApplicationProperties) > 0 {
		fmt.Fprintf(&b, "CorrelationId: %s\nTimeToLive: %s\nApplicationProperties: %v\n", m.CorrelationID, m.TimeToLive, m.ApplicationProperties)
	}
	b.WriteString("Body: ")
	b.Write(m.Body)
	b.WriteString("\n")
	return b.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./handler/publish -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./handler/publish -update rewrites it)\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestGoldenMessages(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	paris := time.FixedZone("CET", 3600)
	statuses := []struct {
		name string
		c    contract.StatusChanged
	}{
		{"status_created", contract.StatusChanged{OrderID: "o-1", Status: contract.Created, Sequence: 1, OccurredAt: at}},
		{"status_paid", contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2, OccurredAt: at.Add(4 * time.Minute)}},
		{"status_no_occurred_at", contract.StatusChanged{OrderID: "o-1", Status: contract.Shipped, Sequence: 3}},
		{"status_offset_to_utc", contract.StatusChanged{OrderID: "o-1", Status: contract.Delivered, Sequence: 4, OccurredAt: time.Date(2026, 11, 29, 12, 30, 0, 0, paris)}},
		{"status_fraction", contract.StatusChanged{OrderID: "o-1", Status: contract.Cancelled, Sequence: 9000000000, OccurredAt: at.Add(123456789 * time.Nanosecond)}},
		{"status_unicode_id", contract.StatusChanged{OrderID: "commande-été \"7\"", Status: contract.Paid, Sequence: 2, OccurredAt: at}},
	}
	for _, tc := range statuses {
		t.Run(tc.name, func(t *testing.T) {
			m, err := publish.StatusMessage(tc.c)
			if err != nil {
				t.Fatalf("StatusMessage(%+v): %v", tc.c, err)
			}
			golden(t, tc.name, render(m))
		})
	}
	for _, tc := range []struct{ name, id string }{{"timeout", "o-1"}, {"timeout_unicode_id", "commande-été"}} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := publish.TimeoutMessage(tc.id)
			if err != nil {
				t.Fatalf("TimeoutMessage(%q): %v", tc.id, err)
			}
			golden(t, tc.name, render(m))
		})
	}
}

func TestMessagesRefuseInvalidInput(t *testing.T) {
	ok := contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2}
	with := func(f func(*contract.StatusChanged)) contract.StatusChanged { c := ok; f(&c); return c }
	tests := []struct {
		name string
		c    contract.StatusChanged
	}{
		{"empty id", with(func(c *contract.StatusChanged) { c.OrderID = "" })},
		{"slash", with(func(c *contract.StatusChanged) { c.OrderID = "a/b" })},
		{"backslash", with(func(c *contract.StatusChanged) { c.OrderID = `a\b` })},
		{"hash", with(func(c *contract.StatusChanged) { c.OrderID = "a#b" })},
		{"question mark", with(func(c *contract.StatusChanged) { c.OrderID = "a?b" })},
		{"control character", with(func(c *contract.StatusChanged) { c.OrderID = "a\tb" })},
		{"not UTF-8", with(func(c *contract.StatusChanged) { c.OrderID = "a\xffb" })},
		{"over the SessionId's 128", with(func(c *contract.StatusChanged) { c.OrderID = strings.Repeat("a", 129) })},
		{"unknown status", with(func(c *contract.StatusChanged) { c.Status = "Refunded" })},
		{"status not canonical", with(func(c *contract.StatusChanged) { c.Status = "paid" })},
		{"empty status", with(func(c *contract.StatusChanged) { c.Status = "" })},
		{"sequence 0", with(func(c *contract.StatusChanged) { c.Sequence = 0 })},
		{"sequence -1", with(func(c *contract.StatusChanged) { c.Sequence = -1 })},
		{"occurredAt before 1601", with(func(c *contract.StatusChanged) { c.OccurredAt = time.Date(1600, 12, 31, 0, 0, 0, 0, time.UTC) })},
		{"occurredAt after 9999", with(func(c *contract.StatusChanged) { c.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := publish.StatusMessage(tc.c)
			if !errors.Is(err, contract.ErrInvalid) {
				t.Errorf("StatusMessage(%+v) = %v, want contract.ErrInvalid", tc.c, err)
			}
			s := &recordingSender{}
			if err := publish.New(s, nil).Status(context.Background(), tc.c); !errors.Is(err, contract.ErrInvalid) {
				t.Errorf("Status(%+v) = %v, want contract.ErrInvalid", tc.c, err)
			}
			if len(s.sent) != 0 {
				t.Errorf("Status(%+v) sent %d messages, want none", tc.c, len(s.sent))
			}
		})
	}
	// The longest order id (the SessionId's 128 characters) is accepted,
	// one more is not.
	longest := strings.Repeat("é", contract.MaxIDLength)
	if _, err := publish.TimeoutMessage(longest); err != nil {
		t.Errorf("TimeoutMessage(%d characters) = %v, want nil", contract.MaxIDLength, err)
	}
	if _, err := publish.TimeoutMessage(longest + "é"); !errors.Is(err, contract.ErrInvalid) {
		t.Errorf("TimeoutMessage(%d characters) = %v, want contract.ErrInvalid", contract.MaxIDLength+1, err)
	}
	for _, id := range []string{"", "a/b", "a\x00"} {
		if _, err := publish.TimeoutMessage(id); !errors.Is(err, contract.ErrInvalid) {
			t.Errorf("TimeoutMessage(%q) = %v, want contract.ErrInvalid", id, err)
		}
	}
}

// recordingSender is a hand-written Sender (and BatchSender when batches
// is true) that records what it is asked to do.
type recordingSender struct {
	mu        sync.Mutex
	batching  bool
	sent      []publish.Message
	batches   [][]string
	scheduled map[int64]time.Time
	next      int64
	failAt    int // fail the send of this message index (1-based); 0 never
}

func (s *recordingSender) Send(_ context.Context, queue string, m publish.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAt > 0 && len(s.sent)+1 == s.failAt {
		return fmt.Errorf("send: %w", broker.ErrTransient)
	}
	s.sent = append(s.sent, m)
	return nil
}

func (s *recordingSender) Schedule(_ context.Context, queue string, m publish.Message, at time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scheduled == nil {
		s.scheduled = map[int64]time.Time{}
	}
	s.next++
	s.scheduled[s.next] = at
	s.sent = append(s.sent, m)
	return s.next, nil
}

func (s *recordingSender) CancelScheduled(_ context.Context, queue string, seq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.scheduled[seq]; !ok {
		return fmt.Errorf("cancel %d: %w", seq, publish.ErrNotScheduled)
	}
	delete(s.scheduled, seq)
	return nil
}

type batchingSender struct{ *recordingSender }

func (s batchingSender) SendBatch(ctx context.Context, queue string, msgs []publish.Message) error {
	var ids []string
	for _, m := range msgs {
		if err := s.Send(ctx, queue, m); err != nil {
			return err
		}
		ids = append(ids, m.MessageID)
	}
	s.mu.Lock()
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	return nil
}

func ids(ms []publish.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MessageID)
	}
	return out
}

func TestStatusesBatchesInOrderPerOrder(t *testing.T) {
	ch := func(id string, st contract.Status, seq int64) contract.StatusChanged {
		return contract.StatusChanged{OrderID: id, Status: st, Sequence: seq}
	}
	// o-1's changes arrive out of order; they go out in sequence order in
	// the places o-1's changes had.
	in := []contract.StatusChanged{
		ch("o-1", contract.Paid, 2), ch("o-2", contract.Created, 1), ch("o-1", contract.Created, 1),
		ch("o-2", contract.Paid, 2), ch("o-1", contract.Shipped, 3),
	}
	want := []string{"o-1:1", "o-2:1", "o-1:2", "o-2:2", "o-1:3"}

	t.Run("batch sender", func(t *testing.T) {
		s := batchingSender{&recordingSender{}}
		var progress []string
		n, err := publish.New(s, &publish.Options{BatchSize: 2}).Statuses(context.Background(), in, func(sent, total int) {
			progress = append(progress, fmt.Sprintf("%d/%d", sent, total))
		})
		if err != nil || n != 5 {
			t.Fatalf("Statuses = %d, %v; want 5, nil", n, err)
		}
		if got := ids(s.sent); !slices.Equal(got, want) {
			t.Errorf("sent %v, want %v", got, want)
		}
		wantBatches := [][]string{{"o-1:1", "o-2:1"}, {"o-1:2", "o-2:2"}, {"o-1:3"}}
		if !reflect.DeepEqual(s.batches, wantBatches) {
			t.Errorf("batches %v, want %v", s.batches, wantBatches)
		}
		if wantP := []string{"2/5", "4/5", "5/5"}; !slices.Equal(progress, wantP) {
			t.Errorf("progress %v, want %v", progress, wantP)
		}
	})
	t.Run("plain sender", func(t *testing.T) {
		s := &recordingSender{}
		if n, err := publish.New(s, nil).Statuses(context.Background(), in, nil); err != nil || n != 5 {
			t.Fatalf("Statuses = %d, %v; want 5, nil", n, err)
		}
		if got := ids(s.sent); !slices.Equal(got, want) {
			t.Errorf("sent %v, want %v", got, want)
		}
	})
	t.Run("a bad change sends nothing", func(t *testing.T) {
		for _, bad := range []contract.StatusChanged{ch("o-3", "Refunded", 1), ch("o-1", contract.Paid, 2), ch("a/b", contract.Paid, 1)} {
			s := batchingSender{&recordingSender{}}
			n, err := publish.New(s, nil).Statuses(context.Background(), append(slices.Clone(in), bad), nil)
			var ie *publish.IndexError
			if !errors.As(err, &ie) || ie.Index != 5 || !errors.Is(err, contract.ErrInvalid) || n != 0 {
				t.Errorf("Statuses with %+v at index 5 = %d, %v; want 0 and an IndexError 5 wrapping ErrInvalid", bad, n, err)
			}
			if len(s.sent) != 0 {
				t.Errorf("sent %v, want nothing", ids(s.sent))
			}
		}
	})
	t.Run("a failed batch reports what was sent", func(t *testing.T) {
		s := batchingSender{&recordingSender{failAt: 3}}
		n, err := publish.New(s, &publish.Options{BatchSize: 2}).Statuses(context.Background(), in, nil)
		if !errors.Is(err, broker.ErrTransient) || n != 2 {
			t.Errorf("Statuses = %d, %v; want 2 and ErrTransient", n, err)
		}
	})
}

func TestTimeoutScheduleAndCancel(t *testing.T) {
	s := &recordingSender{}
	p := publish.New(s, &publish.Options{Queue: "q"})
	before := time.Now()
	got, err := p.ScheduleTimeout(context.Background(), "o-1", 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got.MessageID != "o-1:payment-timeout" || got.SequenceNumber != 1 {
		t.Errorf("ScheduleTimeout = %+v, want MessageID o-1:payment-timeout, sequence 1", got)
	}
	if lo, hi := before.Add(30*time.Minute), time.Now().Add(30*time.Minute); got.At.Before(lo) || got.At.After(hi) || !s.scheduled[1].Equal(got.At) {
		t.Errorf("scheduled at %v (reported %v), want 30m from now (a Sender without a Clock: the real clock)", s.scheduled[1], got.At)
	}
	if err := p.CancelTimeout(context.Background(), got.SequenceNumber); err != nil {
		t.Errorf("CancelTimeout: %v", err)
	}
	if err := p.CancelTimeout(context.Background(), got.SequenceNumber); !errors.Is(err, publish.ErrNotScheduled) {
		t.Errorf("CancelTimeout twice = %v, want ErrNotScheduled", err)
	}
	for _, after := range []time.Duration{0, -time.Minute} {
		if _, err := p.ScheduleTimeout(context.Background(), "o-1", after); !errors.Is(err, contract.ErrInvalid) {
			t.Errorf("ScheduleTimeout(after %s) = %v, want ErrInvalid", after, err)
		}
	}
	if err := p.CancelTimeout(context.Background(), 0); !errors.Is(err, contract.ErrInvalid) {
		t.Errorf("CancelTimeout(0) = %v, want ErrInvalid", err)
	}
	if n := len(s.scheduled); n != 0 {
		t.Errorf("%d still scheduled, want 0", n)
	}
}

// TestStatusesSortIsStable checks a larger shuffled input: every order's
// messages go out in sequence order and every message exactly once.
func TestStatusesSortIsStable(t *testing.T) {
	var in []contract.StatusChanged
	for seq := int64(5); seq >= 1; seq-- {
		for o := range 7 {
			in = append(in, contract.StatusChanged{OrderID: fmt.Sprintf("o-%d", o), Status: contract.Paid, Sequence: seq})
		}
	}
	s := &recordingSender{}
	if _, err := publish.New(s, &publish.Options{BatchSize: 3}).Statuses(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	for _, m := range s.sent {
		var seq int64
		fmt.Sscanf(m.MessageID[strings.LastIndex(m.MessageID, ":")+1:], "%d", &seq)
		if seq <= last[m.SessionID] {
			t.Errorf("%s sent after sequence %d of its order", m.MessageID, last[m.SessionID])
		}
		last[m.SessionID] = seq
	}
	got := ids(s.sent)
	sort.Strings(got)
	if len(got) != len(in) || len(slices.Compact(got)) != len(in) {
		t.Errorf("sent %d distinct messages, want %d", len(slices.Compact(got)), len(in))
	}
}

// TestPublishedMessagesCarryTheTraceContext: what the Publisher sends
// carries the producer's trace as traceparent and Diagnostic-Id (golden),
// every message of a batch and the scheduled timeout alike; without one,
// each message gets a trace of its own; an invalid traceparent is refused.
func TestPublishedMessagesCarryTheTraceContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, err := publish.WithTraceParent(context.Background(), tp)
	if err != nil {
		t.Fatal(err)
	}
	s := &recordingSender{}
	p := publish.New(s, nil)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if err := p.Status(ctx, contract.StatusChanged{OrderID: "o-1", Status: contract.Paid, Sequence: 2, OccurredAt: at.Add(4 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Statuses(ctx, []contract.StatusChanged{{OrderID: "o-2", Status: contract.Created, Sequence: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ScheduleTimeout(ctx, "o-2", time.Minute); err != nil {
		t.Fatal(err)
	}
	golden(t, "status_traced", render(s.sent[0]))
	for _, m := range s.sent {
		if m.ApplicationProperties["traceparent"] != tp || m.ApplicationProperties["Diagnostic-Id"] != tp {
			t.Errorf("%s: properties %v, want traceparent and Diagnostic-Id %s", m.MessageID, m.ApplicationProperties, tp)
		}
	}

	s.sent = nil
	for range 2 {
		if err := p.Status(context.Background(), contract.StatusChanged{OrderID: "o-3", Status: contract.Created, Sequence: 1}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := s.sent[0].ApplicationProperties["traceparent"], s.sent[1].ApplicationProperties["traceparent"]
	if a == nil || a == b {
		t.Errorf("without a trace in ctx: traceparents %v and %v, want a new one per message", a, b)
	}

	if _, err := publish.WithTraceParent(context.Background(), "00-zz"); !errors.Is(err, contract.ErrInvalid) {
		t.Errorf("WithTraceParent(invalid) = %v, want contract.ErrInvalid", err)
	}
}

// longOrderIDs are legal order ids of the SessionId's full 128 characters
// as Service Bus counts them (an emoji counts two).
var longOrderIDs = map[string]string{
	"ASCII":   strings.Repeat("a", contract.MaxIDLength),
	"accents": strings.Repeat("é", contract.MaxIDLength),
	"emoji":   strings.Repeat("\U0001F4E6", contract.MaxIDLength/2),
}

// Any order id the contract accepts can be published through this
// package: its MessageIds are derived within 128 characters by the rule the
// handler uses, so the producer's payment-timeout check and the handler's
// own (reschedule.TimeoutCheck) are one message to duplicate detection.
func TestAnyLegalOrderIDIsPublished(t *testing.T) {
	for name, order := range longOrderIDs {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			created, err := publish.StatusMessage(contract.StatusChanged{OrderID: order, Status: contract.Created, Sequence: 1})
			if err != nil {
				t.Fatalf("StatusMessage(Created of a %d-character order id) = %v, want nil", contract.ServiceBusLength(order), err)
			}
			paid, err := publish.StatusMessage(contract.StatusChanged{OrderID: order, Status: contract.Paid, Sequence: 2})
			if err != nil {
				t.Fatalf("StatusMessage(Paid) = %v, want nil", err)
			}
			timeout, err := publish.TimeoutMessageFor(order, 1)
			if err != nil {
				t.Fatalf("TimeoutMessage = %v, want nil", err)
			}
			for _, m := range []publish.Message{created, paid, timeout} {
				if n := contract.ServiceBusLength(m.MessageID); n > contract.MaxServiceBusIDLength || !contract.HashedMessageID(m.MessageID) {
					t.Errorf("MessageId %q: %d characters, want a hashed id within %d", m.MessageID, n, contract.MaxServiceBusIDLength)
				}
				if m.SessionID != order {
					t.Errorf("SessionId %q, want the order id", m.SessionID)
				}
			}
			if created.MessageID == paid.MessageID {
				t.Errorf("Created and Paid share MessageId %q", created.MessageID)
			}
			if want := reschedule.TimeoutCheck(order, 1).MessageID; timeout.MessageID != want {
				t.Errorf("the producer's timeout check has MessageId %q, the handler's %q: want one", timeout.MessageID, want)
			}

			mb := membroker.New(nil)
			if err := mb.CreateQueue("q", membroker.DefaultQueueOptions()); err != nil {
				t.Fatal(err)
			}
			p := publish.New(brokerpub.Sender(mb), &publish.Options{Queue: "q"})
			for _, c := range []contract.StatusChanged{{OrderID: order, Status: contract.Created, Sequence: 1}, {OrderID: order, Status: contract.Paid, Sequence: 2}} {
				if err := p.Status(ctx, c); err != nil {
					t.Fatalf("Status(%s) = %v, want nil", c.Status, err)
				}
			}
			sch, err := p.ScheduleTimeoutFor(ctx, order, 1, contract.PaymentTimeout)
			if err != nil || sch.MessageID != timeout.MessageID {
				t.Fatalf("ScheduleTimeoutFor = %+v, %v; want MessageId %q", sch, err, timeout.MessageID)
			}
			// The handler schedules its own check of the order: the same
			// message, dropped by duplicate detection.
			if _, err := mb.Schedule(ctx, "q", reschedule.TimeoutCheck(order, 1), time.Now().Add(contract.PaymentTimeout)); err != nil {
				t.Fatal(err)
			}
			got, err := broker.PeekAll(ctx, mb, broker.Source{Queue: "q"})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range got {
				ids = append(ids, m.MessageID)
			}
			if want := []string{created.MessageID, paid.MessageID, timeout.MessageID}; !slices.Equal(ids, want) {
				t.Errorf("on the queue: %q, want %q (the two timeout checks one message)", ids, want)
			}
		})
	}
}
