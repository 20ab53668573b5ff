package contract_test

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/contract"
)

var update = flag.Bool("update", false, "rewrite the transitions table of docs/messages.md from contract.Transitions")

// TestTransitions pins the default table to the rules it stands for: an
// order with no row takes any status, Created, Paid and Shipped may move
// to any status (the sequence orders them), Delivered and Cancelled to
// none; and what is derived from it.
func TestTransitions(t *testing.T) {
	all := []contract.Status{contract.Created, contract.Paid, contract.Shipped, contract.Delivered, contract.Cancelled}
	if got := contract.Statuses; !slices.Equal(got, all) {
		t.Errorf("Statuses = %q, want %q", got, all)
	}
	if got, want := contract.StatusNames(), "Created, Paid, Shipped, Delivered or Cancelled"; got != want {
		t.Errorf("StatusNames() = %q, want %q", got, want)
	}
	for _, from := range append([]contract.Status{""}, all...) {
		final := from == contract.Delivered || from == contract.Cancelled
		for _, to := range all {
			if got := contract.Transitions.Allows(from, to); got != !final {
				t.Errorf("Transitions.Allows(%q, %q) = %v, want %v", from, to, got, !final)
			}
			why := contract.Transitions.Why(from, to)
			if final && !strings.Contains(why, "is terminal") {
				t.Errorf("Transitions.Why(%q, %q) = %q, want it to say %s is terminal", from, to, why, from)
			}
		}
		if from == "" {
			continue
		}
		if got := from.Terminal(); got != final {
			t.Errorf("%q.Terminal() = %v, want %v", from, got, final)
		}
		if !from.Valid() {
			t.Errorf("%q.Valid() = false, want true", from)
		}
	}
	if contract.Transitions.Allows(contract.Created, "Refunded") || contract.Transitions.Allows("", "Refunded") {
		t.Errorf("Transitions allows a move to Refunded, which is not a status")
	}
	for _, s := range []contract.Status{"", "paid", "Refunded"} {
		if s.Valid() || s.Terminal() {
			t.Errorf("%q: Valid() %v, Terminal() %v; want false, false", s, s.Valid(), s.Terminal())
		}
	}
	if got, ok := contract.ParseStatus("sHIPPED"); !ok || got != contract.Shipped {
		t.Errorf("ParseStatus(sHIPPED) = %q, %v; want Shipped, true", got, ok)
	}
}

// TestTransitionsWellFormed: every row has a reason, no move has two
// rows, and no row moves to "" (no status).
func TestTransitionsWellFormed(t *testing.T) {
	seen := map[[2]contract.Status]bool{}
	for i, r := range contract.Transitions {
		k := [2]contract.Status{r.From, r.To}
		switch {
		case r.To == "":
			t.Errorf("row %d (%q -> %q) moves to no status", i, r.From, r.To)
		case strings.TrimSpace(r.Why) == "":
			t.Errorf("row %d (%q -> %q) has no Why", i, r.From, r.To)
		case seen[k]:
			t.Errorf("row %d (%q -> %q) repeats an earlier row", i, r.From, r.To)
		}
		seen[k] = true
	}
	for _, s := range contract.Statuses {
		if !contract.Transitions.Allows("", s) {
			t.Errorf("no row from an order with no row to %s: a producer's first message seen may be any", s)
		}
	}
}

// TestValidateNamesTheStatuses: the validation error lists the table's
// statuses.
func TestValidateNamesTheStatuses(t *testing.T) {
	err := contract.StatusChanged{OrderID: "o-1", Status: "Refunded", Sequence: 1}.Validate()
	if err == nil || !strings.Contains(err.Error(), contract.StatusNames()) {
		t.Errorf("Validate(status Refunded) = %v, want an error naming %s", err, contract.StatusNames())
	}
}

// The markers around the generated table in docs/messages.md.
const (
	docPath  = "../../docs/messages.md"
	docBegin = "<!-- transitions: generated from contract.Transitions; regenerate with go test ./handler/contract/ -run TestTransitionsDoc -update -->\n"
	docEnd   = "<!-- end transitions -->"
)

// TestTransitionsDoc: the transitions table of docs/messages.md is
// markdown(Transitions). With -update it rewrites the doc's block.
func TestTransitionsDoc(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, docBegin)
	j := strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no block between %q and %q", docPath, strings.TrimSpace(docBegin), docEnd)
	}
	got, want := doc[i+len(docBegin):j], markdown(contract.Transitions)
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(doc[:i+len(docBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the transitions table differs from contract.Transitions; regenerate it with\n\tgo test ./handler/contract/ -run TestTransitionsDoc -update\ngot:\n%s\nwant:\n%s", docPath, got, want)
}

// TestProvesPayment: Paid and what follows it prove payment; Created and
// Cancelled do not, nor an unknown status; in a copy with Refunded after
// Delivered, Refunded does too.
func TestProvesPayment(t *testing.T) {
	for s, want := range map[contract.Status]bool{
		contract.Created: false, contract.Paid: true, contract.Shipped: true, contract.Delivered: true,
		contract.Cancelled: false, "Refunded": false, "": false,
	} {
		if got := contract.Transitions.ProvesPayment(s); got != want {
			t.Errorf("Transitions.ProvesPayment(%q) = %v, want %v", s, got, want)
		}
	}
	refunds := append(slices.Clone(contract.Transitions), contract.Transition{From: contract.Delivered, To: "Refunded", Why: "money returned"})
	if !refunds.ProvesPayment("Refunded") {
		t.Error("with Refunded after Delivered, ProvesPayment(Refunded) = false, want true")
	}
}

// markdown renders r (from, to, why) as docs/messages.md shows it.
func markdown(r contract.Rules) string {
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
