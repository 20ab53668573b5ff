// Package reschedule turns a transient failure into a delay: it schedules a
// copy of the failing message to the queue it came from, at now plus an
// exponential backoff with full jitter, and says when a message has been
// failing for longer than the retry window and must be parked instead.
//
// A custom handler cannot abandon a message with a delay (the host
// abandons on any non-2xx answer, and Service Bus redelivers at once, up to
// the max delivery count), so "retry later" is built from what it can do:
// schedule a message, then answer 200. The copy is a new message of the
// same session with the same subject, body, content type, correlation id
// and application properties, plus the properties named below; its
// MessageId is derived from the original MessageId and the attempt
// (msgid.Derive), so the copy scheduled again after a lost answer has the
// same id as the first. Whether Service Bus's duplicate detection drops
// that second copy or not, applying it changes nothing: the sequence rule
// makes it Duplicate or Stale, and a second PaymentTimeoutCheck re-reads
// the state.
//
// Times are on the local clock (Options.Now).
package reschedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/msgid"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
)

// Application properties a rescheduled copy carries. The dead-letter
// sweeper strips them (Properties lists them) before a replay, so that a
// replayed message starts a fresh retry window.
const (
	// PropRetryAttempt (int64) is 1 on the first copy, 2 on the copy of
	// the copy, and so on.
	PropRetryAttempt = "RetryAttempt"
	// PropFirstFailureTime (time.Time, UTC) is when the first transient
	// failure of the original was seen, on the broker's clock.
	PropFirstFailureTime = "FirstFailureTime"
	// PropOriginalMessageID (string) is the MessageId of the message first
	// sent; the same name parking uses, and parking keeps it.
	PropOriginalMessageID = parking.PropOriginalMessageID
	// PropLastError (string, at most MaxLastError characters) is why the
	// last attempt failed.
	PropLastError = "LastError"
	// PropScheduledAt (time.Time, UTC) is when the copy was scheduled: a
	// copy scheduled before the store last answered starts its backoff
	// over (see Rescheduler.Restart).
	PropScheduledAt = "RetryScheduledAt"
	// PropEpisodeAttempt (int64) is the attempt within the present run
	// of failures: what the backoff grows with. It equals RetryAttempt
	// until a Restart (the store answered in between) sets it back to 1.
	PropEpisodeAttempt = "RetryEpisodeAttempt"
)

// PropOriginalEnqueuedTime (time.Time, UTC) is when the message first
// sent was enqueued: Copy sets it from the original's EnqueuedTime when it
// is absent, and parking and dead-letter replays keep it, so that a
// change without an occurredAt is still known to have occurred by then
// (see order.Decide).
const PropOriginalEnqueuedTime = parking.PropOriginalEnqueuedTime

// Properties lists the properties Copy sets that the dead-letter sweeper
// strips before a replay (a replay starts a fresh retry window; it keeps
// PropOriginalEnqueuedTime).
var Properties = []string{PropRetryAttempt, PropFirstFailureTime, PropOriginalMessageID, PropLastError, PropScheduledAt, PropEpisodeAttempt}

// MaxLastError bounds PropLastError (characters).
const MaxLastError = 256

// Defaults of Policy; docs/outages.md ("The defaults and their reasons")
// gives the reasons.
const (
	// DefaultBase is the first backoff's upper bound.
	DefaultBase = 10 * time.Second
	// DefaultCap bounds every backoff: half the queue's 10-minute
	// duplicate detection window, so that two copies of one attempt (a
	// lost answer) schedule their next copy within the window of each
	// other, and a recovered store is seen within the cap.
	DefaultCap = 5 * time.Minute
	// DefaultWindow is how long a message may keep failing before it is
	// parked: long enough for a regional storage incident, far below
	// the queue's 7-day time to live.
	DefaultWindow = 24 * time.Hour
)

// Policy bounds rescheduling. The zero value gives the defaults.
type Policy struct {
	// Base is the first backoff's upper bound; each next one doubles, up
	// to Cap.
	Base, Cap time.Duration
	// Window is how long after the first failure a message is still
	// rescheduled; after it, Decide says park.
	Window time.Duration
}

// WithDefaults fills the zero fields of p.
func (p Policy) WithDefaults() Policy {
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Cap <= 0 {
		p.Cap = DefaultCap
	}
	if p.Cap < p.Base {
		p.Cap = p.Base
	}
	if p.Window <= 0 {
		p.Window = DefaultWindow
	}
	return p
}

// Ceiling is the upper bound of the backoff of attempt (1-based):
// min(Cap, Base * 2^(attempt-1)).
func (p Policy) Ceiling(attempt int64) time.Duration {
	p = p.WithDefaults()
	d := p.Base
	for i := int64(1); i < attempt && d < p.Cap; i++ {
		d *= 2
	}
	return min(d, p.Cap)
}

// Backoff is the delay of attempt with "full jitter" (uniform in
// [0, Ceiling(attempt)]), which spreads the copies of many messages that
// failed together, so a recovered store is not hit by all of them at once.
// r is a float in [0, 1); nil means math/rand/v2.
func (p Policy) Backoff(attempt int64, r func() float64) time.Duration {
	return uniform(p.Ceiling(attempt), r)
}

// uniform is a duration uniform in [0, bound): r's float (nil:
// math/rand/v2) times bound.
func uniform(bound time.Duration, r func() float64) time.Duration {
	if r == nil {
		r = rand.Float64
	}
	return time.Duration(r() * float64(bound))
}

// Original is what Decide and Copy need of the failing message.
type Original struct {
	MessageID      string
	SessionID      string
	SequenceNumber int64
	Subject        string
	ContentType    string
	CorrelationID  string
	// EnqueuedTime is the message's EnqueuedTimeUtc (zero: unknown).
	EnqueuedTime time.Time
	Body         []byte
	// ApplicationProperties as the host decoded them (json.Number for
	// numbers) or as a broker returned them.
	ApplicationProperties map[string]any
}

// State is what a message's properties say about earlier attempts.
type State struct {
	// Attempt is the RetryAttempt of the message (0 for the original).
	Attempt int64
	// FirstFailure is FirstFailureTime (zero for the original).
	FirstFailure time.Time
	// OriginalMessageID is OriginalMessageId, else the message's own id,
	// else seq-<SequenceNumber>.
	OriginalMessageID string
	// ScheduledAt is RetryScheduledAt (zero when absent).
	ScheduledAt time.Time
	// EpisodeAttempt is RetryEpisodeAttempt, else Attempt.
	EpisodeAttempt int64
}

// StateOf reads the retry properties of o. Unreadable values count as
// absent: such a message starts a new window rather than failing.
func StateOf(o Original) State {
	s := State{OriginalMessageID: o.MessageID}
	if s.OriginalMessageID == "" {
		s.OriginalMessageID = fmt.Sprintf("seq-%d", o.SequenceNumber)
	}
	p := o.ApplicationProperties
	if id, ok := p[PropOriginalMessageID].(string); ok && id != "" {
		s.OriginalMessageID = id
	}
	if n, ok := intValue(p[PropRetryAttempt]); ok && n > 0 {
		s.Attempt = n
	}
	if t, ok := timeValue(p[PropFirstFailureTime]); ok {
		s.FirstFailure = t
	}
	if t, ok := timeValue(p[PropScheduledAt]); ok {
		s.ScheduledAt = t
	}
	s.EpisodeAttempt = s.Attempt
	if n, ok := intValue(p[PropEpisodeAttempt]); ok && n > 0 && n <= s.Attempt {
		s.EpisodeAttempt = n
	}
	return s
}

// FirstEnqueued is when the message first sent as o was enqueued: its
// PropOriginalEnqueuedTime, else its own EnqueuedTime (zero: unknown).
func FirstEnqueued(o Original) time.Time {
	if t, ok := timeValue(o.ApplicationProperties[PropOriginalEnqueuedTime]); ok {
		return t
	}
	return o.EnqueuedTime
}

// Decision is what to do with a message that failed transiently.
type Decision struct {
	// Park is true when the window is over: park the message with its
	// last error instead of scheduling it again.
	Park bool
	// Attempt is the copy's RetryAttempt, At when it becomes visible.
	Attempt int64
	At      time.Time
	// Episode is the copy's RetryEpisodeAttempt: the attempt its backoff
	// was drawn for.
	Episode int64
	// FirstFailure is the first failure's time (now for the original).
	FirstFailure time.Time
	// Elapsed is how long the message has been failing.
	Elapsed time.Duration
	// Now is when it was decided: the copy's RetryScheduledAt.
	Now time.Time
}

// Decide says what to do with o, failing at now: park it when now is more
// than the window after its first failure, else schedule copy number
// attempt+1 at now plus the backoff of its next episode attempt (see
// PropEpisodeAttempt and Restart).
func (p Policy) Decide(o Original, now time.Time, r func() float64) Decision {
	p = p.WithDefaults()
	s := StateOf(o)
	first := s.FirstFailure
	if first.IsZero() || first.After(now) {
		first = now
	}
	d := Decision{Attempt: s.Attempt + 1, Episode: s.EpisodeAttempt + 1, FirstFailure: first.UTC(), Elapsed: now.Sub(first), Now: now.UTC()}
	if d.Elapsed > p.Window {
		d.Park = true
		return d
	}
	d.At = now.Add(p.Backoff(d.Episode, r))
	return d
}

// CopyID is the MessageId of copy number attempt of the message first sent
// as original: `<original>:retry:<attempt>`, within 128 characters.
func CopyID(original string, attempt int64) string {
	return msgid.Derive(original, ":retry:"+strconv.FormatInt(attempt, 10))
}

// Copy builds the scheduled copy of o for decision d: the same session,
// subject, body, content type, correlation id and application properties
// (normalised to the broker's types), with the retry properties set over
// them and MessageId CopyID; a trace context is carried on as the next hop
// of the same trace (tracectx.Hop).
func Copy(o Original, d Decision, lastError string) broker.Message {
	s := StateOf(o)
	props := parking.Properties(o.ApplicationProperties)
	if props == nil {
		props = make(map[string]any, 4)
	}
	props[PropRetryAttempt] = d.Attempt
	props[PropFirstFailureTime] = d.FirstFailure.UTC()
	props[PropOriginalMessageID] = s.OriginalMessageID
	props[PropLastError] = Truncate(lastError, MaxLastError)
	if !d.Now.IsZero() {
		props[PropScheduledAt] = d.Now.UTC()
	} else {
		delete(props, PropScheduledAt)
	}
	if _, ok := timeValue(props[PropOriginalEnqueuedTime]); !ok && !o.EnqueuedTime.IsZero() {
		props[PropOriginalEnqueuedTime] = o.EnqueuedTime.UTC()
	}
	if d.Episode > 0 {
		props[PropEpisodeAttempt] = d.Episode
	} else {
		delete(props, PropEpisodeAttempt)
	}
	tracectx.Hop(props)
	return broker.Message{
		MessageID:             CopyID(s.OriginalMessageID, d.Attempt),
		SessionID:             o.SessionID,
		Subject:               o.Subject,
		ContentType:           o.ContentType,
		CorrelationID:         o.CorrelationID,
		Body:                  append([]byte(nil), o.Body...),
		ApplicationProperties: props,
	}
}

// Scheduler is the part of the broker port rescheduling needs.
type Scheduler interface {
	Schedule(ctx context.Context, queue string, msg broker.Message, at time.Time) (int64, error)
}

var _ Scheduler = broker.Broker(nil)

// ErrNotConfigured is returned when no Service Bus is configured: nothing
// can be scheduled, and the message must not be completed.
var ErrNotConfigured = errors.New("reschedule: no Service Bus configured, cannot reschedule")

// Rescheduler schedules copies to one queue.
type Rescheduler struct {
	s       Scheduler
	queue   string
	policy  Policy
	timeout time.Duration
	now     func() time.Time
	rand    func() float64
}

// Options tune New. nil means defaults.
type Options struct {
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Rand returns floats in [0, 1) for the jitter (nil: math/rand/v2).
	Rand func() float64
	// PaymentTimeout is how long after its Created an order's own check is
	// due (zero: contract.PaymentTimeout).
	PaymentTimeout time.Duration
}

// New returns a Rescheduler that schedules to queue through s (nil: not
// configured, every Reschedule fails with ErrNotConfigured).
func New(s Scheduler, queue string, p Policy, opts *Options) *Rescheduler {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PaymentTimeout <= 0 {
		o.PaymentTimeout = contract.PaymentTimeout
	}
	return &Rescheduler{s: s, queue: queue, policy: p.WithDefaults(), timeout: o.PaymentTimeout, now: o.Now, rand: o.Rand}
}

// Policy returns the policy in force (defaults filled in).
func (r *Rescheduler) Policy() Policy { return r.policy }

// Decide is Policy.Decide at now.
func (r *Rescheduler) Decide(o Original) (Decision, error) {
	if r == nil || r.s == nil {
		return Decision{}, ErrNotConfigured
	}
	return r.policy.Decide(o, r.now(), r.rand), nil
}

// Restart returns d with its backoff started over: episode attempt 1,
// due the first backoff (with its jitter) after d.Now, whatever
// d.Attempt; the copies after it grow again from there. The caller
// restarts a failure when the store answered it since the message last
// failed (a new run of failures, not the same one): the exponential growth
// is for a store that keeps failing, and a copy back from a long outage
// that meets one slow call, or a circuit that opens again for seconds,
// would otherwise wait a whole cap again. The attempt number, and with it
// the copy's MessageId, does not restart.
func (r *Rescheduler) Restart(d Decision) Decision {
	if d.Park || d.Now.IsZero() {
		return d
	}
	d.Episode = 1
	d.At = d.Now.Add(r.policy.Backoff(1, r.rand))
	return d
}

// Schedule schedules the copy of o that d describes. It returns nil only
// when the broker accepted it; errors wrap the broker's sentinels.
func (r *Rescheduler) Schedule(ctx context.Context, o Original, d Decision, lastError string) (broker.Message, error) {
	if r == nil || r.s == nil {
		return broker.Message{}, ErrNotConfigured
	}
	m := Copy(o, d, lastError)
	if _, err := r.s.Schedule(ctx, r.queue, m, d.At); err != nil {
		return m, fmt.Errorf("reschedule: schedule %s at %s: %w", m.MessageID, d.At.UTC().Format(time.RFC3339), err)
	}
	return m, nil
}

// Truncate shortens s to at most n characters, on a rune boundary.
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

func intValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		return int64(x), x == float64(int64(x))
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// timeLayouts are the forms a time property arrives in: RFC 3339 from a
// broker, and the Functions host's DateTime form without a zone (UTC).
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04:05"}

func timeValue(v any) (time.Time, bool) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), !x.IsZero()
	case string:
		for _, l := range timeLayouts {
			if t, err := time.Parse(l, strings.TrimSpace(x)); err == nil {
				return t.UTC(), true
			}
		}
	}
	return time.Time{}, false
}

// Now is the clock's time (Options.Now).
func (r *Rescheduler) Now() time.Time { return r.now() }
