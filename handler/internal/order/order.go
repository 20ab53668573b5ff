// Package order owns the order-status domain: decoding and validating the
// message contract (package contract, aliased here) and the pure rules that
// decide what a message does to an order's state. It performs no I/O.
package order

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/orderstatus/orderstatus/handler/contract"
	"github.com/orderstatus/orderstatus/handler/internal/clip"
)

// Subjects of the messages on the order-status queue (package contract).
const (
	SubjectStatusChanged  = contract.SubjectStatusChanged
	SubjectPaymentTimeout = contract.SubjectPaymentTimeout
)

// Subjects lists the known subjects; any other is poison (UnknownSubject). The
// Messages section of docs/messages.md is checked against it.
var Subjects = []string{SubjectStatusChanged, SubjectPaymentTimeout}

// MaxIDLength is the longest order id accepted (characters).
const MaxIDLength = contract.MaxIDLength

// Status is an order's lifecycle state (package contract), named in JSON.
type Status = contract.Status

// The statuses; contract.Transitions says which may follow which.
const (
	Created   = contract.Created
	Paid      = contract.Paid
	Shipped   = contract.Shipped
	Delivered = contract.Delivered
	Cancelled = contract.Cancelled
)

// Statuses lists every known status in lifecycle order.
var Statuses = contract.Statuses

// Update is the body of an OrderStatusChanged message.
type Update = contract.StatusChanged

// TimeoutCheck is the body of a PaymentTimeoutCheck message.
type TimeoutCheck = contract.PaymentTimeoutCheck

// State is what the store keeps per order.
type State struct {
	Status       Status
	LastSequence int64
	OccurredAt   time.Time
	UpdatedAt    time.Time
	// Deadline (payment-timeout cancellations only) is the Created's OccurredAt plus the timeout.
	Deadline time.Time
}

// TimedOut reports whether st is a cancellation by the payment timeout.
func (st *State) TimedOut() bool {
	return st != nil && st.Status == Cancelled && !st.Deadline.IsZero()
}

// Poison reasons, stable: alerts, the sweeper policy and runbooks match them.
const (
	ReasonInvalidPayload    = "InvalidPayload"
	ReasonUnknownSubject    = "UnknownSubject"
	ReasonInvalidTransition = "InvalidTransition"
	// ReasonRetryWindowExceeded: failures outlasted the retry window; replayed after the cool-down.
	ReasonRetryWindowExceeded = "RetryWindowExceeded"
	// ReasonOrderNeverCreated: a check's order never appeared; a human looks.
	ReasonOrderNeverCreated = "OrderNeverCreated"
)

// Reasons lists every poison reason the handler gives.
var Reasons = []string{ReasonInvalidPayload, ReasonUnknownSubject, ReasonInvalidTransition,
	ReasonRetryWindowExceeded, ReasonOrderNeverCreated}

// PoisonError marks a message no retry can fix; Reason is a Reason constant.
type PoisonError struct {
	Reason      string
	Description string
}

func (e *PoisonError) Error() string { return e.Reason + ": " + e.Description }

func poison(reason, format string, args ...any) *PoisonError {
	return &PoisonError{Reason: reason, Description: fmt.Sprintf(format, args...)}
}

// ValidateID is contract.ValidateOrderID; failures are *PoisonError, InvalidPayload.
func ValidateID(id string) error {
	if err := contract.ValidateOrderID(id); err != nil {
		return poison(ReasonInvalidPayload, "%s", err.Error())
	}
	return nil
}

// ParseUpdate decodes and validates an OrderStatusChanged body of session sessionID:
// orderId equal to sessionID, a known status, a sequence >= 1, an optional RFC 3339
// occurredAt in 1601-9999. Failures are *PoisonError, InvalidPayload.
func ParseUpdate(body []byte, sessionID string) (Update, error) {
	return Rules{}.ParseUpdate(body, sessionID)
}

// ParseUpdate is the package's ParseUpdate with the statuses of r.Table.
func (r Rules) ParseUpdate(body []byte, sessionID string) (Update, error) {
	table := r.table()
	var raw struct {
		OrderID    *string          `json:"orderId"`
		Status     *string          `json:"status"`
		Sequence   *json.RawMessage `json:"sequence"`
		OccurredAt *string          `json:"occurredAt"`
	}
	if err := decodeObject(body, &raw); err != nil {
		return Update{}, err
	}
	if raw.OrderID == nil {
		return Update{}, poison(ReasonInvalidPayload, "orderId is missing")
	}
	u := Update{OrderID: *raw.OrderID}
	if err := ValidateID(u.OrderID); err != nil {
		return Update{}, err
	}
	if u.OrderID != sessionID {
		return Update{}, poison(ReasonInvalidPayload, "orderId %q does not match SessionId %q", u.OrderID, sessionID)
	}
	if raw.Status == nil {
		return Update{}, poison(ReasonInvalidPayload, "status is missing")
	}
	status, ok := table.Parse(*raw.Status)
	if !ok {
		return Update{}, poison(ReasonInvalidPayload, "status %q is not one of %s", clip.String(*raw.Status, maxQuoted), table.Names())
	}
	u.Status = status
	if raw.Sequence == nil {
		return Update{}, poison(ReasonInvalidPayload, "sequence is missing")
	}
	if err := json.Unmarshal(*raw.Sequence, &u.Sequence); err != nil {
		return Update{}, poison(ReasonInvalidPayload, "sequence is not an integer: %s", clip.String(string(*raw.Sequence), maxQuoted))
	}
	if u.Sequence < 1 {
		return Update{}, poison(ReasonInvalidPayload, "sequence %d is below 1", u.Sequence)
	}
	if raw.OccurredAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *raw.OccurredAt)
		if err != nil {
			return Update{}, poison(ReasonInvalidPayload, "occurredAt %q is not an RFC 3339 time", clip.String(*raw.OccurredAt, maxQuoted))
		}
		t = t.UTC()
		if t.Before(contract.MinOccurredAt) || t.After(contract.MaxOccurredAt) {
			return Update{}, poison(ReasonInvalidPayload, "occurredAt %q is outside the years 1601 to 9999", *raw.OccurredAt)
		}
		u.OccurredAt = t
	}
	return u, nil
}

// ParseTimeoutCheck decodes and validates a PaymentTimeoutCheck body as
// ParseUpdate does; createdSequence, when present, must be an integer >= 1.
func ParseTimeoutCheck(body []byte, sessionID string) (TimeoutCheck, error) {
	var raw struct {
		OrderID         *string          `json:"orderId"`
		CreatedSequence *json.RawMessage `json:"createdSequence"`
	}
	if err := decodeObject(body, &raw); err != nil {
		return TimeoutCheck{}, err
	}
	if raw.OrderID == nil {
		return TimeoutCheck{}, poison(ReasonInvalidPayload, "orderId is missing")
	}
	if err := ValidateID(*raw.OrderID); err != nil {
		return TimeoutCheck{}, err
	}
	if *raw.OrderID != sessionID {
		return TimeoutCheck{}, poison(ReasonInvalidPayload, "orderId %q does not match SessionId %q", *raw.OrderID, sessionID)
	}
	c := TimeoutCheck{OrderID: *raw.OrderID}
	if raw.CreatedSequence != nil {
		if err := json.Unmarshal(*raw.CreatedSequence, &c.CreatedSequence); err != nil {
			return TimeoutCheck{}, poison(ReasonInvalidPayload, "createdSequence is not an integer: %s", clip.String(string(*raw.CreatedSequence), maxQuoted))
		}
		if c.CreatedSequence < 1 {
			return TimeoutCheck{}, poison(ReasonInvalidPayload, "createdSequence %d is below 1", c.CreatedSequence)
		}
	}
	return c, nil
}

// decodeObject decodes body, one JSON object in valid UTF-8 (RFC 8259), into v.
func decodeObject(body []byte, v any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return poison(ReasonInvalidPayload, "body is empty")
	case trimmed[0] != '{':
		return poison(ReasonInvalidPayload, "body is not a JSON object")
	case !utf8.Valid(body):
		return poison(ReasonInvalidPayload, "body is not valid UTF-8")
	}
	// Unmarshal, unlike a Decoder, rejects anything after the object.
	if err := json.Unmarshal(body, v); err != nil {
		return poison(ReasonInvalidPayload, "body is not valid JSON of the contract: %s", clip.String(err.Error(), maxQuoted))
	}
	return nil
}

// maxQuoted bounds the input an error description quotes, in characters.
const maxQuoted = 120

// Result is the outcome of applying a message to an order.
type Result string

// The results: Applied changed the state, Duplicate and Stale settle as success; InvalidTransition is poison.
const (
	Applied           Result = "Applied"
	Duplicate         Result = "Duplicate"
	Stale             Result = "Stale"
	InvalidTransition Result = "InvalidTransition"
)

// Settled lists the results that complete a message without parking it.
var Settled = []Result{Applied, Duplicate, Stale}

// Decision is what Decide and DecideExpire conclude.
type Decision struct {
	Result Result
	// Next is the state to write when Result is Applied.
	Next State
	// Gap is how many sequence numbers were skipped (still applied).
	Gap int64
	// Poison explains an InvalidTransition.
	Poison *PoisonError
}

// Rules runs the decisions on Table; the zero Rules uses contract.Transitions.
type Rules struct {
	Table contract.Rules
}

func (r Rules) table() contract.Rules {
	if r.Table == nil {
		return contract.Transitions
	}
	return r.Table
}

// Decide applies u to current (nil: unknown order) at now by contract.Transitions:
// equal to LastSequence is Duplicate, lower Stale; a proof of payment by a timed-out
// row's Deadline is judged as from Created; a move the table lacks is InvalidTransition.
func Decide(current *State, u Update, now time.Time) Decision {
	return Rules{}.Decide(current, u, now)
}

// Decide is the package's Decide on r.Table.
func (r Rules) Decide(current *State, u Update, now time.Time) Decision {
	table := r.table()
	var last int64
	var from Status
	if current != nil {
		last, from = current.LastSequence, current.Status
		switch {
		case u.Sequence == last:
			return Decision{Result: Duplicate}
		case u.Sequence < last:
			return Decision{Result: Stale}
		}
	}
	if current.TimedOut() && table.ProvesPayment(u.Status) {
		if u.OccurredAt.IsZero() || u.OccurredAt.After(current.Deadline) {
			return Decision{Result: InvalidTransition, Poison: poison(ReasonInvalidTransition,
				"order %s was cancelled by its payment timeout (deadline %s); %s (sequence %d) occurred %s, after it",
				u.OrderID, current.Deadline.UTC().Format(time.RFC3339), u.Status, u.Sequence, occurredText(u.OccurredAt))}
		}
		from = Created // paid in time: the timeout's cancellation is superseded
	}
	if !table.Allows(from, u.Status) {
		return Decision{Result: InvalidTransition, Poison: poison(ReasonInvalidTransition,
			"order %s is %s; cannot move to %s (sequence %d): %s", u.OrderID, orNew(from), u.Status, u.Sequence, table.Why(from, u.Status))}
	}
	occurred := u.OccurredAt
	if occurred.IsZero() {
		occurred = now
	}
	d := Decision{Result: Applied, Next: State{Status: u.Status, LastSequence: u.Sequence, OccurredAt: occurred.UTC(), UpdatedAt: now.UTC()}}
	if u.Sequence-last > 1 {
		d.Gap = u.Sequence - last - 1
	}
	return d
}

func occurredText(t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	return "at " + t.UTC().Format(time.RFC3339)
}

// orNew names a status for a description: "new" for an unknown order.
func orNew(s Status) string {
	if s == "" {
		return "new"
	}
	return string(s)
}

// DecideExpire decides a PaymentTimeoutCheck: an order still Created becomes
// Cancelled (LastSequence kept, Deadline set); anything else is Stale.
func DecideExpire(current *State, timeout time.Duration, now time.Time) Decision {
	if current == nil || current.Status != Created {
		return Decision{Result: Stale}
	}
	return Decision{Result: Applied, Next: State{Status: Cancelled, LastSequence: current.LastSequence,
		OccurredAt: now.UTC(), UpdatedAt: now.UTC(), Deadline: current.OccurredAt.Add(timeout).UTC()}}
}

// CheckApplies reports whether check c concerns current: it names its last change, or none.
func CheckApplies(current *State, c TimeoutCheck) bool {
	return c.CreatedSequence == 0 || current != nil && current.LastSequence == c.CreatedSequence
}

// DecideExpireOf is DecideExpire for check c: Stale unless CheckApplies.
func DecideExpireOf(current *State, c TimeoutCheck, timeout time.Duration, now time.Time) Decision {
	if !CheckApplies(current, c) {
		return Decision{Result: Stale}
	}
	return DecideExpire(current, timeout, now)
}
