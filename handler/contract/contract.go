// Package contract is the message contract of the order-status queue, the one
// source of truth for producers (package publish) and the handler (internal/order
// aliases its types): subjects, statuses and Transitions, the camelCase JSON bodies,
// the Service Bus ids (SessionId = order id, MessageIds by DeriveMessageID) and the
// validation a message must pass, else the handler parks it. It performs no I/O.
package contract

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Subjects of the messages on the order-status queue.
const (
	SubjectStatusChanged  = "OrderStatusChanged"
	SubjectPaymentTimeout = "PaymentTimeoutCheck"
)

// ContentType is the content type of every contract message.
const ContentType = "application/json"

// MaxIDLength is the longest order id, as it is the SessionId (learn.microsoft.com,
// "Service Bus quotas": "Maximum size of MessageId, SessionId: 128").
const MaxIDLength = MaxServiceBusIDLength

// MaxServiceBusIDLength is the longest SessionId or MessageId, in ServiceBusLength.
const MaxServiceBusIDLength = 128

// PaymentTimeout is how long after creation an order still Created is cancelled.
const PaymentTimeout = 30 * time.Minute

// Status is an order's lifecycle state. Its JSON form is the name.
type Status string

// The statuses an order can have (see Transitions); Delivered and Cancelled are terminal.
const (
	Created   Status = "Created"
	Paid      Status = "Paid"
	Shipped   Status = "Shipped"
	Delivered Status = "Delivered"
	Cancelled Status = "Cancelled"
)

// Valid reports whether s is a status of Transitions, canonically spelled.
func (s Status) Valid() bool { return Transitions.Valid(s) }

// Terminal reports whether no row of Transitions leaves s.
func (s Status) Terminal() bool { return Transitions.Terminal(s) }

// ParseStatus returns the canonical status whose name equals name ignoring
// ASCII case, as .NET's JsonStringEnumConverter reads it, or false.
func ParseStatus(name string) (Status, bool) { return Transitions.Parse(name) }

// asciiEqualFold is strings.EqualFold for ASCII only (no Kelvin sign makes a status).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// StatusChanged is the body of an OrderStatusChanged message; a zero OccurredAt is
// omitted and the handler records when it applied it.
type StatusChanged struct {
	OrderID    string    `json:"orderId"`
	Status     Status    `json:"status"`
	Sequence   int64     `json:"sequence"`
	OccurredAt time.Time `json:"occurredAt,omitzero"`
}

// PaymentTimeoutCheck is the body of a PaymentTimeoutCheck message: it cancels the order
// only while Created CreatedSequence is its last change (0, the older form: the one in effect).
type PaymentTimeoutCheck struct {
	OrderID         string `json:"orderId"`
	CreatedSequence int64  `json:"createdSequence,omitzero"`
}

// ErrInvalid is wrapped by every validation error of this package.
var ErrInvalid = errors.New("invalid")

// invalid returns an error wrapping ErrInvalid whose text is the description alone.
func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return ErrInvalid }

// ServiceBusLength is s's length as Service Bus counts it: UTF-16 units (an emoji is two).
func ServiceBusLength(s string) int {
	n := 0
	for _, r := range s {
		n += max(1, utf16.RuneLen(r))
	}
	return n
}

// ValidateOrderID checks that id is usable as a SessionId and PartitionKey:
// non-empty, valid UTF-8, at most MaxIDLength (ServiceBusLength), none of
// / \ # ? and no control characters. The error wraps ErrInvalid.
func ValidateOrderID(id string) error {
	switch {
	case id == "":
		return invalid("orderId is empty")
	case !utf8.ValidString(id):
		return invalid("orderId is not valid UTF-8")
	case ServiceBusLength(id) > MaxIDLength:
		return invalid("orderId is longer than %d characters", MaxIDLength)
	case strings.ContainsAny(id, `/\#?`):
		return invalid("orderId %q contains one of / \\ # ?", id)
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return invalid("orderId %q contains a control character", id)
	}
	return nil
}

// Bounds of OccurredAt: Table Storage's Edm.DateTime range (outside it, a 400).
var (
	MinOccurredAt = time.Date(1601, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxOccurredAt = time.Date(9999, time.December, 31, 23, 59, 59, 999999900, time.UTC)
)

// ValidateOccurredAt checks that t is zero or within [MinOccurredAt, MaxOccurredAt].
func ValidateOccurredAt(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if u := t.UTC(); u.Before(MinOccurredAt) || u.After(MaxOccurredAt) {
		return invalid("occurredAt %s is outside the years 1601 to 9999", t.Format(time.RFC3339Nano))
	}
	return nil
}

// Validate checks c as the handler will: order id, status, sequence >= 1, occurredAt.
func (c StatusChanged) Validate() error {
	if err := ValidateOrderID(c.OrderID); err != nil {
		return err
	}
	if !c.Status.Valid() {
		return invalid("status %q is not one of %s", c.Status, StatusNames())
	}
	if c.Sequence < 1 {
		return invalid("sequence %d is below 1", c.Sequence)
	}
	return ValidateOccurredAt(c.OccurredAt)
}

// Validate checks the order id and that CreatedSequence is not negative.
func (c PaymentTimeoutCheck) Validate() error {
	if err := ValidateOrderID(c.OrderID); err != nil {
		return err
	}
	if c.CreatedSequence < 0 {
		return invalid("createdSequence %d is below 0", c.CreatedSequence)
	}
	return nil
}

// StatusMessageID is DeriveMessageID(orderID, ":<sequence>"), the MessageId of an
// OrderStatusChanged: a resend keeps it, so duplicate detection drops it.
func StatusMessageID(orderID string, sequence int64) string {
	return DeriveMessageID(orderID, ":"+strconv.FormatInt(sequence, 10))
}

// TimeoutMessageID is DeriveMessageID(orderID, ":payment-timeout-<createdSequence>")
// (0: the older form's ":payment-timeout"), shared by the handler's own check so
// duplicate detection makes them one; no StatusMessageID equals it.
func TimeoutMessageID(orderID string, createdSequence int64) string {
	if createdSequence == 0 {
		return DeriveMessageID(orderID, ":payment-timeout")
	}
	return DeriveMessageID(orderID, ":payment-timeout-"+strconv.FormatInt(createdSequence, 10))
}
