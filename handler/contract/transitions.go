package contract

import (
	"slices"
	"strings"
)

// Transition is one move a status change may make: an order whose status
// is From may take status To. From is "" for an order that has no row yet.
// Why says, for a reader of the table and of a poison description, why the
// move is allowed.
type Transition struct {
	From Status
	To   Status
	Why  string
}

// Rules is a transition table: every allowed move, one row each; a move
// with no row is refused (InvalidTransition). The statuses are those the
// rows name, in the order they first appear, which is the lifecycle
// order; a known status with no row leaving it is terminal. Sequence
// numbers, not the table, order the changes of an order. A copy with more
// rows (another status) is a table of its own: its methods read only it.
type Rules []Transition

// Transitions is the order-status transition table the handler applies
// and producers validate against. docs/messages.md shows it
// (TestTransitionsDoc keeps the two equal).
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

// Statuses lists every known status in lifecycle order
// (Transitions.Statuses).
var Statuses = Transitions.Statuses()

// row returns the row of the move from -> to, or nil.
func (r Rules) row(from, to Status) *Transition {
	for i := range r {
		if r[i].From == from && r[i].To == to {
			return &r[i]
		}
	}
	return nil
}

// Allows reports whether the table has a row for the move from -> to
// (from "" for an order with no row).
func (r Rules) Allows(from, to Status) bool { return r.row(from, to) != nil }

// Why returns the reason of the move from -> to: its row's Why, or, when
// the table has no row for it, a phrase saying so ("no move from
// Delivered to Shipped (Delivered is terminal)").
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

// Statuses returns the statuses the table names, in the order they first
// appear in it (From or To; "" is not a status).
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

// Valid reports whether s is a status of the table, in its canonical
// spelling.
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

// Terminal reports whether s is a status of the table that no row leaves:
// no further change may be applied after it.
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

// ProvesPayment reports whether an order that took status s must have
// been paid: s is Paid, or a status the table reaches from Paid without
// passing through Created (created again) or Cancelled. Such a change,
// occurred by the payment deadline, supersedes a payment-timeout
// cancellation (see docs/messages.md, "Payment timeout").
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

// Parse returns the status of the table whose name equals name ignoring
// the case of ASCII letters, in its canonical spelling, or false.
func (r Rules) Parse(name string) (Status, bool) {
	for _, s := range r.Statuses() {
		if asciiEqualFold(name, string(s)) {
			return s, true
		}
	}
	return "", false
}

// Names returns the table's statuses in lifecycle order for a message:
// "Created, Paid, Shipped, Delivered or Cancelled".
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

// Markdown renders the table as a Markdown table (from, to, why), one row
// per move, as docs/messages.md shows it.
func (r Rules) Markdown() string {
	var b strings.Builder
	b.WriteString("| from | to | why |\n|---|---|---|\n")
	cell := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, t := range r {
		from := "(no row yet)"
		if t.From != "" {
			from = "`" + string(t.From) + "`"
		}
		b.WriteString("| " + from + " | `" + string(t.To) + "` | " + cell.Replace(t.Why) + " |\n")
	}
	return b.String()
}

// StatusNames returns the known statuses for a message (Transitions.Names):
// "Created, Paid, Shipped, Delivered or Cancelled".
func StatusNames() string { return Transitions.Names() }
