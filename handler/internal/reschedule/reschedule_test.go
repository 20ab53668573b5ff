package reschedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/msgid"
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
	id := strings.Repeat("x", msgid.MaxLength)
	for _, a := range []int64{1, 99, 1 << 62} {
		got := CopyID(id, a)
		if len(got) > msgid.MaxLength {
			t.Errorf("CopyID(128 chars, %d) has %d characters", a, len(got))
		}
		if got == CopyID(id, a+1) {
			t.Errorf("attempts %d and %d share id %s", a, a+1, got)
		}
	}
	if CopyID("o-1:2", 2) != "o-1:2:retry:2" {
		t.Errorf("CopyID = %s", CopyID("o-1:2", 2))
	}
	if got := Truncate(strings.Repeat("é", 300), MaxLastError); len([]rune(got)) != MaxLastError {
		t.Errorf("Truncate kept %d characters", len([]rune(got)))
	}
}

// dedupScheduler drops a message whose MessageId it has seen, as Service
// Bus's duplicate detection does.
type dedupScheduler struct {
	mu    sync.Mutex
	seen  map[string]bool
	kept  []broker.Message
	at    []time.Time
	err   error
	clock time.Time
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

func (s *dedupScheduler) Now(context.Context) (time.Time, error) { return s.clock, nil }

// A lost answer makes the host deliver the same message again; the second
// copy has the same MessageId as the first, so duplicate detection keeps
// one.
func TestScheduleTwiceGivesOneCopy(t *testing.T) {
	s := &dedupScheduler{seen: map[string]bool{}, clock: t0}
	r := New(s, "order-status", Policy{Base: time.Second, Cap: time.Minute, Window: time.Hour}, nil)
	o := original()
	for range 2 {
		d, err := r.Decide(context.Background(), o)
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
	s := &dedupScheduler{seen: map[string]bool{}, err: broker.ErrTransient, clock: t0}
	r := New(s, "q", Policy{}, nil)
	if _, err := r.Schedule(context.Background(), original(), Decision{Attempt: 1, At: t0}, ""); !errors.Is(err, broker.ErrTransient) {
		t.Errorf("Schedule = %v, want broker.ErrTransient", err)
	}
	var none *Rescheduler
	if _, err := none.Schedule(context.Background(), original(), Decision{}, ""); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("nil Rescheduler: %v, want ErrNotConfigured", err)
	}
	if _, err := New(nil, "q", Policy{}, nil).Decide(context.Background(), original()); !errors.Is(err, ErrNotConfigured) {
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
	long := strings.Repeat("o", msgid.MaxLength)
	if id := TimeoutCheckID(long, 1); len(id) > msgid.MaxLength || !msgid.Hashed(id) {
		t.Errorf("TimeoutCheckID(128 chars) = %q (%d characters), want a hashed id within 128", id, len(id))
	}
	created := t0.Add(-10 * time.Minute)
	if got := TimeoutDue(created, t0); !got.Equal(created.Add(30 * time.Minute)) {
		t.Errorf("TimeoutDue = %s, want occurredAt + 30m", got)
	}
	if got := TimeoutDue(t0.Add(-2*time.Hour), t0); !got.Equal(t0) {
		t.Errorf("TimeoutDue of an overdue order = %s, want now", got)
	}
	s := &dedupScheduler{seen: map[string]bool{}, clock: t0}
	r := New(s, "order-status", Policy{}, nil)
	at, err := dueOf(r.ScheduleCreatedCheck(context.Background(), "o-1", 1, created, false))
	if err != nil || !at.Equal(created.Add(30*time.Minute)) || len(s.kept) != 1 || !s.at[0].Equal(at) {
		t.Errorf("ScheduleCreatedCheck = %s, %v; scheduled %d", at, err, len(s.kept))
	}
}

func TestSettle(t *testing.T) {
	p := Policy{Cap: 5 * time.Minute}
	if p.Settle() != 10*time.Minute {
		t.Errorf("Settle = %s, want twice the cap", p.Settle())
	}
	o := original()
	if s := StateOf(o); s.Delayed() || s.Settling() {
		t.Errorf("an original is delayed %v, settling %v", s.Delayed(), s.Settling())
	}
	o.ApplicationProperties = map[string]any{PropRetryAttempt: json.Number("2")}
	if s := StateOf(o); !s.Delayed() || !s.Settling() {
		t.Errorf("a copy: delayed %v, settling %v; want both", s.Delayed(), s.Settling())
	}
	m := SettleCopy(o, Decision{Attempt: 3, FirstFailure: t0})
	if m.ApplicationProperties[PropSettled] != int64(3) || m.MessageID != "o-1:2:retry:3" {
		t.Errorf("settle copy %s %v", m.MessageID, m.ApplicationProperties)
	}
	o.ApplicationProperties = m.ApplicationProperties
	if s := StateOf(o); s.Settling() {
		t.Error("the settle copy still settles")
	}
	o.ApplicationProperties[PropRetryAttempt] = int64(4) // delayed again after it settled
	if s := StateOf(o); !s.Settling() {
		t.Error("a settle copy delayed again does not settle again")
	}
	o.ApplicationProperties = map[string]any{PropReplayedFromDeadLetter: true}
	if s := StateOf(o); !s.Delayed() || !s.Settling() {
		t.Errorf("a replay (retry properties stripped): delayed %v settling %v; want both", s.Delayed(), s.Settling())
	}
	o.ApplicationProperties = SettleCopy(o, Decision{Attempt: 1, FirstFailure: t0}).ApplicationProperties
	if s := StateOf(o); s.Settling() {
		t.Error("a replay's settle copy still settles")
	}

	bus := &dedupScheduler{seen: map[string]bool{}, clock: t0}
	r := New(bus, "q", Policy{Base: time.Second, Cap: time.Minute, Window: time.Hour}, nil)
	at, err := dueOf(r.ScheduleCreatedCheck(context.Background(), "o-1", 1, t0.Add(-time.Hour), true))
	if err != nil || !at.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("a delayed overdue Created: check due %s (%v), want now + Settle", at, err)
	}
	at, _ = dueOf(r.ScheduleCreatedCheck(context.Background(), "o-3", 1, t0.Add(-time.Hour), false))
	if !at.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("an overdue Created: check due %s, want now + Settle (its Paid may follow)", at)
	}
	at, _ = dueOf(r.ScheduleCreatedCheck(context.Background(), "o-2", 1, t0, true))
	if !at.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("a delayed Created not yet due: %s, want occurredAt + 30m", at)
	}
	at, _ = dueOf(r.ScheduleCreatedCheck(context.Background(), "o-4", 1, time.Time{}, false))
	if !at.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("a Created without occurredAt: check due %s, want the broker's now + 30m", at)
	}
	for _, covers := range []bool{false, true} {
		if _, at, err := r.ScheduleSettle(context.Background(), original(), time.Time{}, covers); err != nil || !at.Equal(t0.Add(2*time.Minute)) {
			t.Errorf("ScheduleSettle with no horizon (covers %v): due %s (%v), want now + Settle", covers, at, err)
		}
	}
	if _, at, _ := r.ScheduleSettle(context.Background(), original(), t0.Add(-time.Second), false); !at.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("ScheduleSettle with a horizon passed that does not cover the check: due %s, want now + Settle", at)
	}
	if _, at, _ := r.ScheduleSettle(context.Background(), original(), t0.Add(-time.Second), true); !at.Equal(t0) {
		t.Errorf("ScheduleSettle with a horizon passed that covers the check: due %s, want now (behind every copy already due)", at)
	}
	m, at, _ = r.ScheduleSettle(context.Background(), original(), t0.Add(40*time.Second), false)
	if margin := r.Policy().Margin(); at.Before(t0.Add(40*time.Second)) || !at.Before(t0.Add(40*time.Second+margin)) {
		t.Errorf("ScheduleSettle until a horizon ahead: due %s, want within one Margin (%s) after it (%s)", at, margin, t0.Add(40*time.Second))
	}
	if s := StateOf(Original{ApplicationProperties: m.ApplicationProperties}); !s.SettleCopy() || s.SettleRound != 1 {
		t.Errorf("a first settle copy: settle copy %v, round %d; want true, 1", s.SettleCopy(), s.SettleRound)
	}
	m2, _, _ := r.ScheduleSettle(context.Background(), Original{MessageID: m.MessageID, SessionID: "o-1", ApplicationProperties: m.ApplicationProperties}, time.Time{}, false)
	if s := StateOf(Original{ApplicationProperties: m2.ApplicationProperties}); !s.SettleCopy() || s.SettleRound != 2 {
		t.Errorf("a settle copy's settle copy: settle copy %v, round %d; want true, 2", s.SettleCopy(), s.SettleRound)
	}
}

func TestHorizonIsTheCapAndAFirstBackoff(t *testing.T) {
	if got := (Policy{}).Horizon(); got != DefaultCap+DefaultBase {
		t.Errorf("default Horizon %s, want the cap plus the base (%s)", got, DefaultCap+DefaultBase)
	}
	if got := (Policy{Base: time.Second, Cap: time.Minute}).Horizon(); got != time.Minute+time.Second {
		t.Errorf("Horizon %s, want 1m1s", got)
	}
	// Every backoff is due within the cap of its schedule: the Horizon
	// covers the longest with its margin.
	p := Policy{Base: time.Second, Cap: time.Minute}
	for attempt := int64(1); attempt < 20; attempt++ {
		if b := p.Backoff(attempt, func() float64 { return 0.999999 }); b > p.Horizon()-p.WithDefaults().Base {
			t.Fatalf("attempt %d: backoff %s beyond the cap", attempt, b)
		}
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

func TestReplayPropertyIsTheSweepers(t *testing.T) {
	if PropReplayedFromDeadLetter != deadletter.PropReplayedFrom {
		t.Errorf("PropReplayedFromDeadLetter %q, the sweeper sets %q", PropReplayedFromDeadLetter, deadletter.PropReplayedFrom)
	}
}

// A replay of a parked retry starts a fresh retry window: the sweeper
// strips exactly this package's retry properties.
func TestReplayDropsTheRetryProperties(t *testing.T) {
	e := dlstore.Entry{ID: "x", Source: dlstore.Poison, MessageID: "o-1:2:retry:3:parked", SessionID: "", Reason: "RetryWindowExceeded",
		Properties: map[string]any{PropRetryAttempt: int64(3), PropFirstFailureTime: time.Now(), PropLastError: "refused",
			PropSettled: int64(2), PropOriginalMessageID: "o-1:2", "OriginalSessionId": "o-1", "tenant": "t"}}
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

// TestSettleCopiesSpreadOverTheMargin: the checks an outage settled until
// one horizon come back spread over the Margin after it, not at one
// instant (ScheduleSettle's jitter), and never before it.
func TestSettleCopiesSpreadOverTheMargin(t *testing.T) {
	until := t0.Add(5 * time.Minute)
	p := Policy{Base: 10 * time.Second, Cap: 5 * time.Minute, Window: time.Hour}
	for _, c := range []struct {
		r    float64
		want time.Time
	}{
		{0, until},
		{0.5, until.Add(5 * time.Second)},
		{0.999, until.Add(9990 * time.Millisecond)},
	} {
		r := New(&dedupScheduler{seen: map[string]bool{}, clock: t0}, "q", p, &Options{Rand: func() float64 { return c.r }})
		if _, at, err := r.ScheduleSettle(context.Background(), original(), until, false); err != nil || !at.Equal(c.want) {
			t.Errorf("rand %v: settle copy due %s (%v), want %s", c.r, at, err, c.want)
		}
	}
	r := New(&dedupScheduler{seen: map[string]bool{}, clock: t0}, "q", p, nil)
	seen := map[time.Time]bool{}
	for i := range 50 {
		o := original()
		o.MessageID = fmt.Sprintf("o-%d:payment-timeout", i)
		_, at, err := r.ScheduleSettle(context.Background(), o, until, false)
		if err != nil || at.Before(until) || !at.Before(until.Add(p.Base)) {
			t.Fatalf("settle copy due %s (%v), want in [%s, %s)", at, err, until, until.Add(p.Base))
		}
		seen[at] = true
	}
	if len(seen) < 40 {
		t.Errorf("50 settle copies until one horizon came due at %d instants: not spread", len(seen))
	}
}

// A Created whose occurredAt is ahead of the broker's clock is checked no
// later than now + the payment timeout, and the skew is reported.
func TestTimeoutCheckOfACreatedFromTheFuture(t *testing.T) {
	ahead := t0.Add(24 * time.Hour)
	if got := TimeoutDue(ahead, t0); !got.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("TimeoutDue(a day ahead) = %s, want now + 30m", got)
	}
	s := &dedupScheduler{seen: map[string]bool{}, clock: t0}
	r := New(s, "order-status", Policy{}, nil)
	sc, err := r.ScheduleCreatedCheck(context.Background(), "o-1", 1, ahead, false)
	if err != nil || !sc.At.Equal(t0.Add(30*time.Minute)) || sc.Skew != 24*time.Hour {
		t.Errorf("ScheduleCreatedCheck = %+v, %v; want due now + 30m, skew 24h", sc, err)
	}
	if len(s.kept) != 1 || s.kept[0].MessageID != "o-1:payment-timeout-1" {
		t.Errorf("scheduled %+v, want o-1:payment-timeout-1", s.kept)
	}
}

// dueOf is the due time of what ScheduleCreatedCheck scheduled.
func dueOf(s CheckScheduled, err error) (time.Time, error) { return s.At, err }
