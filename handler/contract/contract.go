// Package contract is the message contract of the order-status queue, the
// one source of truth for producers (package publish) and for the handler
// (package internal/order, which aliases these types): the subjects, the
// statuses and the transition table of the moves between them
// (Transitions), the bodies in their camelCase JSON form, the Service Bus ids
// (SessionId = order id, MessageId = <order>:<sequence> and
// <order>:payment-timeout-<Created's sequence>, hashed within 128
// characters when needed: DeriveMessageID, the one rule every derived
// MessageId of the project follows) and the validation rules a message
// must pass.
//
// A message that breaks a rule is parked by the handler as InvalidPayload;
// producers check the same rules before sending (Validate, ValidateOrderID).
// Nothing here performs I/O.
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

// MaxIDLength is the longest order id accepted (characters): an order id is
// the SessionId, which Service Bus limits to 128 characters ("Service Bus
// quotas", learn.microsoft.com: "Maximum size of MessageId, SessionId:
// 128"). Table Storage's 1 KiB keys allow more. The MessageIds derived
// from an order id (StatusMessageID, TimeoutMessageID) stay within 128
// whatever its length: DeriveMessageID hashes the order id when the suffix
// would not fit.
const MaxIDLength = MaxServiceBusIDLength

// MaxServiceBusIDLength is the longest SessionId or MessageId Service Bus
// accepts (characters, as ServiceBusLength counts them).
const MaxServiceBusIDLength = 128

// PaymentTimeout is the walkthrough's payment timeout: an order still
// Created this long after creation is cancelled.
const PaymentTimeout = 30 * time.Minute

// Status is an order's lifecycle state. Its JSON form is the name.
type Status string

// The statuses an order can have; the transition table (Transitions)
// says which may follow which. Delivered and Cancelled are terminal.
const (
	Created   Status = "Created"
	Paid      Status = "Paid"
	Shipped   Status = "Shipped"
	Delivered Status = "Delivered"
	Cancelled Status = "Cancelled"
)

// Valid reports whether s is a status of Transitions, in its canonical
// spelling.
func (s Status) Valid() bool { return Transitions.Valid(s) }

// Terminal reports whether no further change may be applied after s: no
// row of Transitions leaves it.
func (s Status) Terminal() bool { return Transitions.Terminal(s) }

// ParseStatus returns the known status whose name equals name ignoring the
// case of ASCII letters ("paid" and "PAID" are Paid), as .NET's
// JsonStringEnumConverter reads it. The result is always the canonical
// name. It reports false when name is not a status of Transitions.
func ParseStatus(name string) (Status, bool) { return Transitions.Parse(name) }

// asciiEqualFold is strings.EqualFold restricted to ASCII letters, so that
// no Unicode folding (the Kelvin sign, the long s) makes an odd spelling
// name a status.
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

// StatusChanged is the body of an OrderStatusChanged message:
//
//	{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}
//
// A zero OccurredAt is left out of the JSON; the handler then records the
// time it applied the change.
type StatusChanged struct {
	OrderID    string    `json:"orderId"`
	Status     Status    `json:"status"`
	Sequence   int64     `json:"sequence"`
	OccurredAt time.Time `json:"occurredAt,omitzero"`
}

// PaymentTimeoutCheck is the body of a PaymentTimeoutCheck message:
// {"orderId":"o-1","createdSequence":1}. CreatedSequence is the sequence
// of the Created the check belongs to: it cancels the order only while
// that Created is the order's last change. Zero (absent) is the older
// form, {"orderId":"o-1"}, which names no Created: it is taken for the
// check of the Created in effect once that Created is due.
type PaymentTimeoutCheck struct {
	OrderID         string `json:"orderId"`
	CreatedSequence int64  `json:"createdSequence,omitzero"`
}

// ErrInvalid is wrapped by every validation error of this package.
var ErrInvalid = errors.New("invalid")

// invalid returns an error wrapping ErrInvalid whose text is the
// description alone.
func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return ErrInvalid }

// ServiceBusLength is the length of s as Service Bus counts it: .NET
// characters (UTF-16 code units), so a character outside the Basic
// Multilingual Plane (an emoji) counts two.
func ServiceBusLength(s string) int {
	n := 0
	for _, r := range s {
		n += max(1, utf16.RuneLen(r))
	}
	return n
}

// ValidateOrderID checks that id is usable as an order id (a SessionId)
// and Table Storage PartitionKey: non-empty, valid UTF-8, at most
// MaxIDLength characters as Service Bus counts them (ServiceBusLength), none of / \ # ? and no control characters. The error wraps
// ErrInvalid and describes the problem in one phrase.
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

// Bounds of OccurredAt: the range of an Edm.DateTime in Table Storage, which
// rejects anything outside it with a 400 that no retry can fix.
var (
	MinOccurredAt = time.Date(1601, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxOccurredAt = time.Date(9999, time.December, 31, 23, 59, 59, 999999900, time.UTC)
)

// ValidateOccurredAt checks that t is zero (absent) or within
// [MinOccurredAt, MaxOccurredAt].
func ValidateOccurredAt(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if u := t.UTC(); u.Before(MinOccurredAt) || u.After(MaxOccurredAt) {
		return invalid("occurredAt %s is outside the years 1601 to 9999", t.Format(time.RFC3339Nano))
	}
	return nil
}

// Validate checks c as the handler will: a legal order id, a known status
// in its canonical spelling, a sequence of at least 1 and an occurredAt
// that is absent or within the years 1601 to 9999.
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

// Validate checks the order id of a timeout check and that its
// CreatedSequence is not negative.
func (c PaymentTimeoutCheck) Validate() error {
	if err := ValidateOrderID(c.OrderID); err != nil {
		return err
	}
	if c.CreatedSequence < 0 {
		return invalid("createdSequence %d is below 0", c.CreatedSequence)
	}
	return nil
}

// StatusMessageID is the MessageId of an OrderStatusChanged:
// <order>:<sequence>, or, when that would pass Service Bus's 128
// characters, sha256-<hash of the order id>:<sequence> (DeriveMessageID).
// Resending the same change reuses it, so Service Bus's duplicate
// detection drops a producer's retry.
func StatusMessageID(orderID string, sequence int64) string {
	return DeriveMessageID(orderID, ":"+strconv.FormatInt(sequence, 10))
}

// TimeoutMessageID is the MessageId of the PaymentTimeoutCheck of the
// order's Created of sequence createdSequence:
// <order>:payment-timeout-<createdSequence>, or sha256-<hash of the order
// id>:payment-timeout-<createdSequence> when that would pass 128
// characters (DeriveMessageID). The handler's own check of that Created
// has the same MessageId, so duplicate detection makes the two one
// message, and each Created of an order has a check of its own. The
// suffix ends in a number after a hyphen, so no StatusMessageID (a number
// after a colon) and no older check's id equals it. A createdSequence of
// 0 gives <order>:payment-timeout, the id of the older form that names no
// Created.
func TimeoutMessageID(orderID string, createdSequence int64) string {
	if createdSequence == 0 {
		return DeriveMessageID(orderID, ":payment-timeout")
	}
	return DeriveMessageID(orderID, ":payment-timeout-"+strconv.FormatInt(createdSequence, 10))
}
