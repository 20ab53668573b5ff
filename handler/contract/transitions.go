package contract

import (
	"slices"
	"strings"
)

// Transition is one allowed move: status From ("" for a new order) may become
// To; Why explains it to a reader of the table or of a poison description.
type Transition struct {
	From Status
	To   Status
	Why  string
}

// Rules is a transition table, one row per allowed move (any other is InvalidTransition);
// its statuses are those the rows name, in lifecycle order; one no row leaves is terminal.
type Rules []Transition

// Transitions is the order-status transition table the handler applies and
// producers validate against; docs/messages.md shows it (TestTransitionsDoc).
var Transitions = Rules{
	{From: "", To: Created, Why: "an order begins"},
	{From: "", To: Paid, Why: "its Created is late"},
	{From: "", To: Shipped, Why: "its earlier changes are late"},
	{From: "", To: Delivered, Why: "its earlier changes are late"},
	{From: "", To: Cancelled, Why: "its earlier changes are late"},

	{From: Created, To: Created, Why: "created again, at a higher sequence"},
	{From: Created, To: Paid, Why: "payment received"},
	{From: Created, To: Shipped, Why: "its Paid is late (a gap in the sequence)"},
	{From: Created, To: Delivered, Why: "its Paid and Shipped are late"},
	{From: Created, To: Cancelled, Why: "cancelled before payment, or its payment timed out"},

	{From: Paid, To: Created, Why: "created again: a higher sequence wins, even backwards"},
	{From: Paid, To: Paid, Why: "paid again, at a higher sequence"},
	{From: Paid, To: Shipped, Why: "handed to the carrier"},
	{From: Paid, To: Delivered, Why: "its Shipped is late"},
	{From: Paid, To: Cancelled, Why: "cancelled after payment"},

	{From: Shipped, To: Created, Why: "created again: a higher sequence wins, even backwards"},
	{From: Shipped, To: Paid, Why: "a higher sequence wins, even backwards"},
	{From: Shipped, To: Shipped, Why: "shipped again (another parcel, a re-scan)"},
	{From: Shipped, To: Delivered, Why: "the carrier delivered it"},
	{From: Shipped, To: Cancelled, Why: "cancelled in transit"},
	// Delivered and Cancelled: no row leaves them; they are terminal.
}

// Statuses lists every known status in lifecycle order.
var Statuses = Transitions.Statuses()

func (r Rules) row(from, to Status) *Transition {
	for i := range r {
		if r[i].From == from && r[i].To == to {
			return &r[i]
		}
	}
	return nil
}

// Allows reports whether the table has a row for from -> to ("" for a new order).
func (r Rules) Allows(from, to Status) bool { return r.row(from, to) != nil }

// Why returns the row's Why for from -> to, or a phrase saying there is no such move.
func (r Rules) Why(from, to Status) string {
	if t := r.row(from, to); t != nil {
		return t.Why
	}
	name := string(from)
	if from == "" {
		name = "a new order"
	}
	why := "no move from " + name + " to " + string(to)
	if r.Terminal(from) {
		why += " (" + string(from) + " is terminal)"
	}
	return why
}

// Statuses returns the statuses the rows name, in order of first appearance.
func (r Rules) Statuses() []Status {
	var out []Status
	for _, t := range r {
		for _, s := range []Status{t.From, t.To} {
			if s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Valid reports whether s is a status of the table, canonically spelled.
func (r Rules) Valid(s Status) bool {
	if s == "" {
		return false
	}
	for _, t := range r {
		if t.From == s || t.To == s {
			return true
		}
	}
	return false
}

// Terminal reports whether s is a status of the table that no row leaves.
func (r Rules) Terminal(s Status) bool {
	if !r.Valid(s) {
		return false
	}
	for _, t := range r {
		if t.From == s {
			return false
		}
	}
	return true
}

// ProvesPayment reports whether status s implies payment: s is Paid or is
// reached from Paid without Created or Cancelled. Such a change by the
// deadline supersedes a timeout cancellation (docs/messages.md, "Payment timeout").
func (r Rules) ProvesPayment(s Status) bool {
	seen := map[Status]bool{Paid: true}
	next := []Status{Paid}
	for len(next) > 0 {
		from := next[0]
		next = next[1:]
		for _, t := range r {
			if t.From == from && !seen[t.To] && t.To != Created && t.To != Cancelled {
				seen[t.To] = true
				next = append(next, t.To)
			}
		}
	}
	return seen[s] && r.Valid(s)
}

// Parse returns the canonical status whose name equals name ignoring ASCII case, or false.
func (r Rules) Parse(name string) (Status, bool) {
	for _, s := range r.Statuses() {
		if asciiEqualFold(name, string(s)) {
			return s, true
		}
	}
	return "", false
}

// Names returns the statuses for a message: "Created, Paid, Shipped, Delivered or Cancelled".
func (r Rules) Names() string {
	ss := r.Statuses()
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// StatusNames returns the known statuses for a message (Transitions.Names).
func StatusNames() string { return Transitions.Names() }
