package reschedule

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"slices"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

func TestCeilingDoublesUpToTheCap(t *testing.T) {
	p := Policy{Base: 10 * time.Second, Cap: 5 * time.Minute}
	tests := []struct {
		attempt int64
		want    time.Duration
	}{
		{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {4, 80 * time.Second},
		{5, 160 * time.Second}, {6, 5 * time.Minute}, {7, 5 * time.Minute}, {1000, 5 * time.Minute},
	}
	for _, tt := range tests {
		if got := p.Ceiling(tt.attempt); got != tt.want {
			t.Errorf("Ceiling(%d) = %s, want %s", tt.attempt, got, tt.want)
		}
	}
}

func TestBackoffIsFullJitter(t *testing.T) {
	p := Policy{Base: time.Second, Cap: time.Minute}
	for _, r := range []float64{0, 0.25, 0.5, 0.999} {
		got := p.Backoff(3, func() float64 { return r })
		if want := time.Duration(r * float64(4*time.Second)); got != want {
			t.Errorf("Backoff(3) with rand %v = %s, want %s", r, got, want)
		}
	}
	for range 1000 {
		if d := p.Backoff(10, nil); d < 0 || d > time.Minute {
			t.Fatalf("Backoff(10) = %s, want within [0, 1m]", d)
		}
	}
}

func TestDefaults(t *testing.T) {
	p := Policy{}.WithDefaults()
	if p.Base != DefaultBase || p.Cap != DefaultCap || p.Window != DefaultWindow {
		t.Errorf("defaults = %+v", p)
	}
	if p.Cap > 10*time.Minute/2 {
		t.Errorf("cap %s is above half the 10-minute duplicate detection window", p.Cap)
	}
	if p.Window >= 7*24*time.Hour {
		t.Errorf("window %s is not below the queue's 7-day TTL", p.Window)
	}
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func original() Original {
	return Original{
		MessageID: "o-1:2", SessionID: "o-1", SequenceNumber: 17, Subject: "OrderStatusChanged",
		ContentType: "application/json", CorrelationID: "corr-1",
		Body:                  []byte(`{"orderId":"o-1","status":"Paid","sequence":2}`),
		ApplicationProperties: map[string]any{"Source": "checkout", "Hops": json.Number("3")},
	}
}

func TestDecideAndCopyOfAnOriginal(t *testing.T) {
	p := Policy{Base: 10 * time.Second, Cap: time.Minute, Window: time.Hour}
	o := original()
	d := p.Decide(o, t0, func() float64 { return 0.5 })
	if d.Park || d.Attempt != 1 || !d.FirstFailure.Equal(t0) || !d.At.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("Decide = %+v, want attempt 1 at +5s, first failure now", d)
	}
	m := Copy(o, d, "store: transient")
	if m.MessageID != "o-1:2:retry:1" || m.SessionID != "o-1" || m.Subject != o.Subject ||
		m.ContentType != o.ContentType || m.CorrelationID != "corr-1" || string(m.Body) != string(o.Body) {
		t.Errorf("copy = %+v, want the original's session, subject, body, content type, correlation id", m)
	}
	want := map[string]any{"Source": "checkout", "Hops": int64(3), PropRetryAttempt: int64(1),
		PropFirstFailureTime: t0, PropOriginalMessageID: "o-1:2", PropLastError: "store: transient", PropScheduledAt: t0, PropEpisodeAttempt: int64(1)}
	if len(m.ApplicationProperties) != len(want) {
		t.Errorf("properties = %v, want %v", m.ApplicationProperties, want)
	}
	for k, v := range want {
		if got := m.ApplicationProperties[k]; got != v {
			t.Errorf("property %s = %#v, want %#v", k, got, v)
		}
	}
	o.Body[0] = 'X'
	if m.Body[0] == 'X' {
		t.Error("the copy shares the original's body")
	}
}

// A copy as the host hands it back (numbers as json.Number, times as
// strings) continues the count and keeps the first failure and the
// original id.
func TestDecideOfACopy(t *testing.T) {
	p := Policy{Base: 10 * time.Second, Cap: time.Minute, Window: time.Hour}
	o := original()
	o.MessageID = "o-1:2:retry:3"
	o.ApplicationProperties = map[string]any{PropRetryAttempt: json.Number("3"),
		PropFirstFailureTime: "2026-12-01T09:30:00", PropOriginalMessageID: "o-1:2", PropLastError: "old"}
	d := p.Decide(o, t0, func() float64 { return 0 })
	if d.Park || d.Attempt != 4 || !d.FirstFailure.Equal(t0.Add(-30*time.Minute)) || d.Elapsed != 30*time.Minute {
		t.Fatalf("Decide = %+v, want attempt 4, first failure 09:30", d)
	}
	m := Copy(o, d, "again")
	if m.MessageID != "o-1:2:retry:4" || m.ApplicationProperties[PropOriginalMessageID] != "o-1:2" ||
		m.ApplicationProperties[PropLastError] != "again" || m.ApplicationProperties[PropRetryAttempt] != int64(4) {
		t.Errorf("copy = %s %v", m.MessageID, m.ApplicationProperties)
	}
}

func TestDecideParksAfterTheWindow(t *testing.T) {
	p := Policy{Base: time.Second, Cap: time.Minute, Window: time.Hour}
	o := original()
	for _, tt := range []struct {
		first time.Time
		park  bool
	}{
		{t0.Add(-time.Hour), false},
		{t0.Add(-time.Hour - time.Second), true},
		{t0.Add(time.Hour), false}, // a first failure in the future counts as now
	} {
		o.ApplicationProperties = map[string]any{PropRetryAttempt: int64(9), PropFirstFailureTime: tt.first}
		if d := p.Decide(o, t0, nil); d.Park != tt.park {
			t.Errorf("first failure %s, now %s: Park = %v, want %v", tt.first, t0, d.Park, tt.park)
		}
	}
}

func TestStateOfIgnoresUnreadableValues(t *testing.T) {
	o := original()
	o.MessageID = ""
	o.ApplicationProperties = map[string]any{PropRetryAttempt: "many", PropFirstFailureTime: "yesterday", PropOriginalMessageID: 7}
	s := StateOf(o)
	if s.Attempt != 0 || !s.FirstFailure.IsZero() || s.OriginalMessageID != "seq-17" {
		t.Errorf("StateOf = %+v, want a fresh state named seq-17", s)
	}
}

func TestCopyIDWithin128(t *testing.T) {
	id := strings.Repeat("x", contract.MaxServiceBusIDLength)
	for _, a := range []int64{1, 99, 1 << 62} {
		got := CopyID(id, a)
		if len(got) > contract.MaxServiceBusIDLength {
			t.Errorf("CopyID(128 chars, %d) has %d characters", a, len(got))
		}
		if got == CopyID(id, a+1) {
			t.Errorf("attempts %d and %d share id %s", a, a+1, got)
		}
	}
	if CopyID("o-1:2", 2) != "o-1:2:retry:2" {
		t.Errorf("CopyID = %s", CopyID("o-1:2", 2))
	}
}

// dedupScheduler drops a message whose MessageId it has seen, as Service
// Bus's duplicate detection does.
type dedupScheduler struct {
	mu   sync.Mutex
	seen map[string]bool
	kept []broker.Message
	at   []time.Time
	err  error
}

func (s *dedupScheduler) Schedule(_ context.Context, _ string, m broker.Message, at time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	if s.seen[m.MessageID] {
		return 1, nil
	}
	s.seen[m.MessageID] = true
	s.kept, s.at = append(s.kept, m), append(s.at, at)
	return int64(len(s.kept)), nil
}

// at is Options whose clock stands at t.
func at(t time.Time) *Options { return &Options{Now: func() time.Time { return t }} }

// A lost answer makes the host deliver the same message again; the second
// copy has the same MessageId as the first, so duplicate detection keeps
// one.
func TestScheduleTwiceGivesOneCopy(t *testing.T) {
	s := &dedupScheduler{seen: map[string]bool{}}
	r := New(s, "order-status", Policy{Base: time.Second, Cap: time.Minute, Window: time.Hour}, at(t0))
	o := original()
	for range 2 {
		d, err := r.Decide(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Schedule(context.Background(), o, d, "boom"); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.kept) != 1 || s.kept[0].MessageID != "o-1:2:retry:1" {
		t.Fatalf("scheduled %d copies, want one o-1:2:retry:1", len(s.kept))
	}
	if s.at[0].Before(t0) || s.at[0].After(t0.Add(time.Second)) {
		t.Errorf("scheduled at %s, want within the first backoff after the broker's now %s", s.at[0], t0)
	}
}

func TestScheduleErrors(t *testing.T) {
	s := &dedupScheduler{seen: map[string]bool{}, err: broker.ErrTransient}
	r := New(s, "q", Policy{}, nil)
	if _, err := r.Schedule(context.Background(), original(), Decision{Attempt: 1, At: t0}, ""); !errors.Is(err, broker.ErrTransient) {
		t.Errorf("Schedule = %v, want broker.ErrTransient", err)
	}
	var none *Rescheduler
	if _, err := none.Schedule(context.Background(), original(), Decision{}, ""); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("nil Rescheduler: %v, want ErrNotConfigured", err)
	}
	if _, err := New(nil, "q", Policy{}, nil).Decide(original()); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("no scheduler: %v, want ErrNotConfigured", err)
	}
}

func TestTimeoutCheck(t *testing.T) {
	m := TimeoutCheck("o-1", 2)
	if m.MessageID != "o-1:payment-timeout-2" || m.SessionID != "o-1" || m.Subject != "PaymentTimeoutCheck" ||
		m.ContentType != "application/json" || string(m.Body) != `{"orderId":"o-1","createdSequence":2}` {
		t.Errorf("TimeoutCheck = %+v, want the producer's message", m)
	}
	if m := TimeoutCheck("o-1", 0); m.MessageID != "o-1:payment-timeout" || string(m.Body) != `{"orderId":"o-1"}` {
		t.Errorf("TimeoutCheck naming no Created = %+v, want the older id and body", m)
	}
	long := strings.Repeat("o", contract.MaxServiceBusIDLength)
	if id := TimeoutCheckID(long, 1); len(id) > contract.MaxServiceBusIDLength || !contract.HashedMessageID(id) {
		t.Errorf("TimeoutCheckID(128 chars) = %q (%d characters), want a hashed id within 128", id, len(id))
	}
	created := t0.Add(-10 * time.Minute)
	if got := TimeoutDue(created, t0, 30*time.Minute); !got.Equal(created.Add(30 * time.Minute)) {
		t.Errorf("TimeoutDue = %s, want occurredAt + 30m", got)
	}
	if got := TimeoutDue(t0.Add(-2*time.Hour), t0, 30*time.Minute); !got.Equal(t0) {
		t.Errorf("TimeoutDue of an overdue order = %s, want now", got)
	}
	s := &dedupScheduler{seen: map[string]bool{}}
	r := New(s, "order-status", Policy{}, at(t0))
	due, err := dueOf(r.ScheduleCreatedCheck(context.Background(), "o-1", 1, created))
	if err != nil || !due.Equal(created.Add(30*time.Minute)) || len(s.kept) != 1 || !s.at[0].Equal(due) {
		t.Errorf("ScheduleCreatedCheck = %s, %v; scheduled %d", due, err, len(s.kept))
	}
	// A late Created's check is due at once: a Paid that occurred in time
	// supersedes the cancellation when it comes (order.Decide).
	if due, _ := dueOf(r.ScheduleCreatedCheck(context.Background(), "o-2", 1, t0.Add(-time.Hour))); !due.Equal(t0) {
		t.Errorf("an overdue Created: check due %s, want now (%s)", due, t0)
	}
	if due, _ := dueOf(r.ScheduleCreatedCheck(context.Background(), "o-3", 1, time.Time{})); !due.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("a Created with no occurredAt: check due %s, want now + 30m", due)
	}
	// The payment timeout is a setting.
	short := New(s, "order-status", Policy{}, &Options{Now: func() time.Time { return t0 }, PaymentTimeout: 20 * time.Second})
	if due, _ := dueOf(short.ScheduleCreatedCheck(context.Background(), "o-4", 1, t0)); !due.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("PaymentTimeout 20s: check due %s, want now + 20s", due)
	}
}

// After a Restart the backoff grows from the first again: the copy
// carries its episode attempt, and the next Decide draws from the one
// after it, while the attempt (and the MessageId) go on counting.
func TestRestartStartsTheBackoffOver(t *testing.T) {
	p := Policy{Base: 10 * time.Second, Cap: time.Minute, Window: time.Hour}
	r := New(nil, "q", p, &Options{Rand: func() float64 { return 0.999 }})
	o := Original{MessageID: "m:retry:6", SessionID: "o-1", ApplicationProperties: map[string]any{PropRetryAttempt: int64(6), PropOriginalMessageID: "m"}}
	d := p.Decide(o, t0, func() float64 { return 0.999 })
	if d.Attempt != 7 || d.Episode != 7 || d.At.Sub(t0) < 59*time.Second {
		t.Fatalf("Decide of attempt 6 = %+v, want attempt 7 at about the cap", d)
	}
	d = r.Restart(d)
	if d.Attempt != 7 || d.Episode != 1 || d.At.Sub(t0) > p.Base {
		t.Fatalf("Restart = %+v, want attempt 7, episode 1, within the base", d)
	}
	m := Copy(o, d, "boom")
	if m.MessageID != "m:retry:7" {
		t.Errorf("the restarted copy's id %q, want m:retry:7", m.MessageID)
	}
	next := p.Decide(Original{MessageID: m.MessageID, SessionID: "o-1", ApplicationProperties: m.ApplicationProperties}, t0, func() float64 { return 0.999 })
	if next.Attempt != 8 || next.Episode != 2 || next.At.Sub(t0) > p.Ceiling(2) {
		t.Errorf("Decide after a restart = %+v, want attempt 8, episode 2, within %s", next, p.Ceiling(2))
	}
	// An episode attempt beyond the attempt (a hand-made property) is
	// ignored: the attempt decides.
	bad := map[string]any{PropRetryAttempt: int64(2), PropEpisodeAttempt: int64(9)}
	if s := StateOf(Original{ApplicationProperties: bad}); s.EpisodeAttempt != 2 {
		t.Errorf("episode attempt %d from %v, want 2", s.EpisodeAttempt, bad)
	}
}

func TestCopyCarriesWhenItWasScheduled(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	d := (Policy{}).Decide(Original{MessageID: "m-1", SessionID: "o-1"}, now, func() float64 { return 0.5 })
	m := Copy(Original{MessageID: "m-1", SessionID: "o-1"}, d, "boom")
	if got := StateOf(Original{ApplicationProperties: m.ApplicationProperties}).ScheduledAt; !got.Equal(now) {
		t.Errorf("the copy's RetryScheduledAt reads %s, want %s", got, now)
	}
	// As the Functions host hands it on: a string without a zone.
	hostForm := map[string]any{PropScheduledAt: "2026-12-01T10:00:00.0000000"}
	if got := StateOf(Original{ApplicationProperties: hostForm}).ScheduledAt; !got.Equal(now) {
		t.Errorf("RetryScheduledAt from the host reads %s, want %s", got, now)
	}
}

// A replay of a parked retry starts a fresh retry window: the sweeper
// strips exactly this package's retry properties.
func TestReplayDropsTheRetryProperties(t *testing.T) {
	e := dlstore.Entry{ID: "x", Source: dlstore.Poison, MessageID: "o-1:2:retry:3:parked", SessionID: "", Reason: "RetryWindowExceeded",
		Properties: map[string]any{PropRetryAttempt: int64(3), PropFirstFailureTime: time.Now(), PropLastError: "refused",
			PropOriginalMessageID: "o-1:2", "OriginalSessionId": "o-1", "tenant": "t"}}
	got := deadletter.ReplayMessage(e, nil)
	for _, k := range Properties {
		if _, ok := got.ApplicationProperties[k]; ok {
			t.Errorf("the replay kept %s", k)
		}
	}
	if got.MessageID != "o-1:2:replay:1" || got.ApplicationProperties["tenant"] != "t" {
		t.Errorf("replay %s props %v", got.MessageID, got.ApplicationProperties)
	}
}

// A Created whose occurredAt is ahead of the broker's clock is checked no
// later than now + the payment timeout, and the skew is reported.
func TestTimeoutCheckOfACreatedFromTheFuture(t *testing.T) {
	ahead := t0.Add(24 * time.Hour)
	if got := TimeoutDue(ahead, t0, 30*time.Minute); !got.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("TimeoutDue(a day ahead) = %s, want now + 30m", got)
	}
	s := &dedupScheduler{seen: map[string]bool{}}
	r := New(s, "order-status", Policy{}, at(t0))
	sc, err := r.ScheduleCreatedCheck(context.Background(), "o-1", 1, ahead)
	if err != nil || !sc.At.Equal(t0.Add(30*time.Minute)) || sc.Skew != 24*time.Hour {
		t.Errorf("ScheduleCreatedCheck = %+v, %v; want due now + 30m, skew 24h", sc, err)
	}
	if len(s.kept) != 1 || s.kept[0].MessageID != "o-1:payment-timeout-1" {
		t.Errorf("scheduled %+v, want o-1:payment-timeout-1", s.kept)
	}
}

// dueOf is the due time of what ScheduleCreatedCheck scheduled.
func dueOf(s CheckScheduled, err error) (time.Time, error) { return s.At, err }

// TestCopyCarriesTheFirstEnqueuedTime: a copy carries when the message
// first sent was enqueued, a copy of a copy keeps it, and FirstEnqueued
// reads it (else the message's own EnqueuedTime), in the host's form too.
func TestCopyCarriesTheFirstEnqueuedTime(t *testing.T) {
	first := t0.Add(-time.Hour)
	o := original()
	o.EnqueuedTime = first
	if got := FirstEnqueued(o); !got.Equal(first) {
		t.Errorf("FirstEnqueued(original) = %s, want its EnqueuedTime %s", got, first)
	}
	c1 := Copy(o, Decision{Attempt: 1, FirstFailure: t0}, "boom")
	if got := c1.ApplicationProperties[PropOriginalEnqueuedTime]; got != first.UTC() {
		t.Errorf("copy 1 %s = %v, want %s", PropOriginalEnqueuedTime, got, first)
	}
	again := Original{MessageID: c1.MessageID, SessionID: "o-1", EnqueuedTime: t0, ApplicationProperties: c1.ApplicationProperties}
	if got := FirstEnqueued(again); !got.Equal(first) {
		t.Errorf("FirstEnqueued(copy 1, enqueued later) = %s, want the first %s", got, first)
	}
	c2 := Copy(again, Decision{Attempt: 2, FirstFailure: t0}, "boom")
	if got := c2.ApplicationProperties[PropOriginalEnqueuedTime]; got != first.UTC() {
		t.Errorf("copy 2 %s = %v, want the first %s", PropOriginalEnqueuedTime, got, first)
	}
	host := Original{EnqueuedTime: t0, ApplicationProperties: map[string]any{PropOriginalEnqueuedTime: first.UTC().Format("2006-01-02T15:04:05.0000000")}}
	if got := FirstEnqueued(host); !got.Equal(first) {
		t.Errorf("FirstEnqueued(the host's form) = %s, want %s", got, first)
	}
	if got := FirstEnqueued(Original{}); !got.IsZero() {
		t.Errorf("FirstEnqueued(nothing known) = %s, want zero", got)
	}
	if slices.Contains(Properties, PropOriginalEnqueuedTime) {
		t.Errorf("Properties lists %s: a replay must keep it", PropOriginalEnqueuedTime)
	}
}

func TestCopyBoundsLastError(t *testing.T) {
	m := Copy(Original{MessageID: "m-1", SessionID: "o-1"}, Decision{Attempt: 1}, strings.Repeat("é", 300))
	if got, _ := m.ApplicationProperties[PropLastError].(string); utf8.RuneCountInString(got) != MaxLastError || !utf8.ValidString(got) {
		t.Errorf("LastError has %d characters (valid UTF-8: %v), want %d", utf8.RuneCountInString(got), utf8.ValidString(got), MaxLastError)
	}
}
