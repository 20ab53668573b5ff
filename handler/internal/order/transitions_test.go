package order

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/contract"
)

// Refunded is the status TestRulesOnAnotherTable adds after Delivered.
const Refunded Status = "Refunded"

// withRefunded returns a copy of contract.Transitions with Refunded after
// Delivered: a new order may start at it (its earlier changes late), a
// Delivered order may be refunded, and no row leaves it.
func withRefunded() contract.Rules {
	rules := slices.Clone(contract.Transitions)
	i := slices.IndexFunc(rules, func(t contract.Transition) bool { return t.From == "" && t.To == Delivered })
	rules = slices.Insert(rules, i+1, contract.Transition{From: "", To: Refunded, Why: "its earlier changes are late"})
	return append(rules, contract.Transition{From: Delivered, To: Refunded, Why: "the customer sent it back"})
}

// TestRulesOnAnotherTable runs the rules on a copy of the table with one
// more status, and checks that the default table is unchanged by it.
func TestRulesOnAnotherTable(t *testing.T) {
	table := withRefunded()
	rules := Rules{Table: table}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	if got, want := table.Statuses(), []Status{Created, Paid, Shipped, Delivered, Refunded, Cancelled}; !slices.Equal(got, want) {
		t.Errorf("Statuses() = %q, want %q", got, want)
	}
	if got, want := table.Names(), "Created, Paid, Shipped, Delivered, Refunded or Cancelled"; got != want {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	if table.Terminal(Delivered) || !table.Terminal(Refunded) || !table.Terminal(Cancelled) {
		t.Errorf("Terminal: Delivered %v, Refunded %v, Cancelled %v; want false, true, true",
			table.Terminal(Delivered), table.Terminal(Refunded), table.Terminal(Cancelled))
	}

	state := func(s Status, seq int64) *State { return &State{Status: s, LastSequence: seq} }
	update := func(s Status, seq int64) Update { return Update{OrderID: "o-1", Status: s, Sequence: seq} }
	tests := []struct {
		name    string
		current *State
		u       Update
		want    Result
	}{
		{"Delivered to Refunded", state(Delivered, 4), update(Refunded, 5), Applied},
		{"new order at Refunded", nil, update(Refunded, 5), Applied},
		{"Refunded to Created", state(Refunded, 5), update(Created, 6), InvalidTransition},
		{"Refunded to Shipped", state(Refunded, 5), update(Shipped, 6), InvalidTransition},
		{"Refunded to Refunded", state(Refunded, 5), update(Refunded, 6), InvalidTransition},
		{"Refunded to Cancelled", state(Refunded, 5), update(Cancelled, 6), InvalidTransition},
		// No row Shipped -> Refunded: a refund while its Delivered is late
		// is parked.
		{"Shipped to Refunded", state(Shipped, 3), update(Refunded, 5), InvalidTransition},
		{"Created to Refunded", state(Created, 1), update(Refunded, 2), InvalidTransition},
		{"Delivered to Shipped", state(Delivered, 4), update(Shipped, 5), InvalidTransition},
		{"still Stale before the table", state(Refunded, 5), update(Delivered, 4), Stale},
		{"still Duplicate before the table", state(Refunded, 5), update(Refunded, 5), Duplicate},
		{"Cancelled still terminal", state(Cancelled, 2), update(Refunded, 3), InvalidTransition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := rules.Decide(tt.current, tt.u, now)
			if d.Result != tt.want {
				t.Fatalf("Rules{Table: withRefunded()}.Decide = %s (%+v), want %s", d.Result, d, tt.want)
			}
			if tt.want == InvalidTransition {
				wantPoison(t, d.Poison, ReasonInvalidTransition)
				if !strings.Contains(d.Poison.Description, table.Why(tt.current.Status, tt.u.Status)) {
					t.Errorf("description %q, want it to say why (%q)", d.Poison.Description, table.Why(tt.current.Status, tt.u.Status))
				}
			}
		})
	}

	// The copy's statuses parse; the default table's do not include Refunded.
	body := []byte(`{"orderId":"o-1","status":"refunded","sequence":5}`)
	if u, err := rules.ParseUpdate(body, "o-1"); err != nil || u.Status != Refunded {
		t.Errorf("Rules{Table: withRefunded()}.ParseUpdate = %+v, %v; want status Refunded", u, err)
	}
	_, err := ParseUpdate(body, "o-1")
	wantPoison(t, err, ReasonInvalidPayload)
	if !strings.Contains(err.Error(), contract.StatusNames()) {
		t.Errorf("ParseUpdate error %q, want it to name %s", err, contract.StatusNames())
	}

	// The default table is unchanged.
	if got, want := Statuses, []Status{Created, Paid, Shipped, Delivered, Cancelled}; !slices.Equal(got, want) {
		t.Errorf("Statuses = %q after the copy, want %q", got, want)
	}
	if !Delivered.Terminal() || Refunded.Valid() || contract.Transitions.Allows(Delivered, Refunded) {
		t.Errorf("the default table changed: Delivered terminal %v, Refunded valid %v, Delivered -> Refunded %v",
			Delivered.Terminal(), Refunded.Valid(), contract.Transitions.Allows(Delivered, Refunded))
	}
	if d := Decide(state(Delivered, 4), update(Refunded, 5), now); d.Result != InvalidTransition {
		t.Errorf("Decide(Delivered, Refunded) = %s, want InvalidTransition", d.Result)
	}
	if d := (Rules{}).Decide(state(Delivered, 4), update(Shipped, 5), now); d.Result != InvalidTransition {
		t.Errorf("Rules{}.Decide(Delivered, Shipped) = %s, want InvalidTransition (the default table)", d.Result)
	}
}

// TestDecideNamesWhy: an InvalidTransition's description names the move
// and why the table refuses it.
func TestDecideNamesWhy(t *testing.T) {
	d := Decide(&State{Status: Delivered, LastSequence: 4}, Update{OrderID: "o-1", Status: Shipped, Sequence: 5}, time.Now())
	want := "order o-1 is Delivered; cannot move to Shipped (sequence 5): no move from Delivered to Shipped (Delivered is terminal)"
	if d.Poison == nil || d.Poison.Description != want {
		t.Errorf("poison = %+v, want description %q", d.Poison, want)
	}
}
