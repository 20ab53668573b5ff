// Package reschedule turns a transient failure into a delay: a copy of the
// message scheduled at now plus an exponential backoff with full jitter, then a
// 200; past the retry window the message is parked instead. A copy's MessageId
// derives from the original's and the attempt (contract.DeriveMessageID), so
// applying a copy twice changes nothing. Times are on the local clock.
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

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/contract/tracectx"
	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/clip"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
)

// Application properties a rescheduled copy carries (see Properties).
const (
	// PropRetryAttempt (int64) is 1 on the first copy, 2 on its copy, and so on.
	PropRetryAttempt = "RetryAttempt"
	// PropFirstFailureTime (time.Time, UTC) is when the original first failed.
	PropFirstFailureTime = "FirstFailureTime"
	// PropOriginalMessageID (string) is the first message's MessageId.
	PropOriginalMessageID = parking.PropOriginalMessageID
	// PropLastError (string, at most MaxLastError characters): the last error.
	PropLastError = "LastError"
	// PropScheduledAt (time.Time, UTC) is when the copy was scheduled.
	PropScheduledAt = "RetryScheduledAt"
	// PropEpisodeAttempt (int64) is the backoff's attempt: RetryAttempt until Restart sets it to 1.
	PropEpisodeAttempt = "RetryEpisodeAttempt"
)

// PropOriginalEnqueuedTime (time.Time, UTC) is the first enqueue; Copy sets it, parking and replays keep it.
const PropOriginalEnqueuedTime = parking.PropOriginalEnqueuedTime

// Properties lists what Copy sets that the sweeper strips before a replay.
var Properties = []string{PropRetryAttempt, PropFirstFailureTime, PropOriginalMessageID, PropLastError, PropScheduledAt, PropEpisodeAttempt}

// MaxLastError bounds PropLastError (characters).
const MaxLastError = 256

// Defaults of Policy; docs/outages.md, "The defaults and their reasons".
const (
	// DefaultBase is the first backoff's upper bound.
	DefaultBase = 10 * time.Second
	// DefaultCap bounds every backoff: half the duplicate detection window.
	DefaultCap = 5 * time.Minute
	// DefaultWindow is how long a message may keep failing before it is parked.
	DefaultWindow = 24 * time.Hour
)

// Policy bounds rescheduling. The zero value gives the defaults.
type Policy struct {
	// Base is the first backoff's bound; each next one doubles, up to Cap.
	Base, Cap time.Duration
	// Window is how long after its first failure a message is rescheduled.
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

// Ceiling is attempt's backoff bound: min(Cap, Base * 2^(attempt-1)).
func (p Policy) Ceiling(attempt int64) time.Duration {
	p = p.WithDefaults()
	d := p.Base
	for i := int64(1); i < attempt && d < p.Cap; i++ {
		d *= 2
	}
	return min(d, p.Cap)
}

// Backoff is attempt's delay, uniform up to Ceiling(attempt); r (nil: math/rand/v2) gives [0, 1).
func (p Policy) Backoff(attempt int64, r func() float64) time.Duration {
	return uniform(p.Ceiling(attempt), r)
}

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
	// ApplicationProperties as the host (json.Number) or a broker decoded them.
	ApplicationProperties map[string]any
}

// State is what a message's properties say about earlier attempts.
type State struct {
	// Attempt is the RetryAttempt of the message (0 for the original).
	Attempt int64
	// FirstFailure is FirstFailureTime (zero for the original).
	FirstFailure time.Time
	// OriginalMessageID is OriginalMessageId, else MessageID, else seq-<SequenceNumber>.
	OriginalMessageID string
	// ScheduledAt is RetryScheduledAt (zero when absent).
	ScheduledAt time.Time
	// EpisodeAttempt is RetryEpisodeAttempt, else Attempt.
	EpisodeAttempt int64
}

// StateOf reads o's retry properties; unreadable values count as absent.
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

// FirstEnqueued is o's PropOriginalEnqueuedTime, else its EnqueuedTime.
func FirstEnqueued(o Original) time.Time {
	if t, ok := timeValue(o.ApplicationProperties[PropOriginalEnqueuedTime]); ok {
		return t
	}
	return o.EnqueuedTime
}

// Decision is what to do with a message that failed transiently.
type Decision struct {
	// Park: the window is over; park the message with its last error.
	Park bool
	// Attempt is the copy's RetryAttempt, At when it becomes visible.
	Attempt int64
	At      time.Time
	// Episode is the copy's RetryEpisodeAttempt, its backoff's attempt.
	Episode int64
	// FirstFailure is the first failure's time (now for the original).
	FirstFailure time.Time
	// Elapsed is how long the message has been failing.
	Elapsed time.Duration
	// Now is when it was decided: the copy's RetryScheduledAt.
	Now time.Time
}

// Decide says what to do with o failing at now: park past the window, else
// schedule copy attempt+1 at now plus the backoff of its next episode attempt.
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

// CopyID is the MessageId of copy attempt: `<original>:retry:<attempt>`.
func CopyID(original string, attempt int64) string {
	return contract.DeriveMessageID(original, ":retry:"+strconv.FormatInt(attempt, 10))
}

// Copy builds o's copy for d: the retry properties set, MessageId CopyID, the trace's next hop.
func Copy(o Original, d Decision, lastError string) broker.Message {
	s := StateOf(o)
	props := parking.Properties(o.ApplicationProperties)
	if props == nil {
		props = make(map[string]any, 4)
	}
	props[PropRetryAttempt] = d.Attempt
	props[PropFirstFailureTime] = d.FirstFailure.UTC()
	props[PropOriginalMessageID] = s.OriginalMessageID
	props[PropLastError] = clip.String(lastError, MaxLastError)
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

// ErrNotConfigured is returned when no Service Bus is configured.
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
	Now func() time.Time
	// Rand returns floats in [0, 1) for the jitter (nil: math/rand/v2).
	Rand func() float64
	// PaymentTimeout delays an order's own check (0: contract.PaymentTimeout).
	PaymentTimeout time.Duration
}

// New returns a Rescheduler to queue through s (nil: ErrNotConfigured).
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

// Restart returns d with its backoff started over (episode 1, one first backoff
// after d.Now) for a new run; the attempt number, and the MessageId, go on.
func (r *Rescheduler) Restart(d Decision) Decision {
	if d.Park || d.Now.IsZero() {
		return d
	}
	d.Episode = 1
	d.At = d.Now.Add(r.policy.Backoff(1, r.rand))
	return d
}

// Schedule schedules d's copy of o; errors wrap the broker's sentinels.
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

// timeLayouts: RFC 3339 from a broker; the Functions host's zone-less DateTime.
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
