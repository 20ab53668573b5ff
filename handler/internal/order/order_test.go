package order

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/orderstatus/orderstatus/handler/contract"
)

// wantPoison reports whether err is a *PoisonError with the given reason.
func wantPoison(t *testing.T, err error, reason string) {
	t.Helper()
	var pe *PoisonError
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v (%T), want a *PoisonError with reason %s", err, err, reason)
	}
	if pe.Reason != reason {
		t.Fatalf("reason = %q, want %q (description %q)", pe.Reason, reason, pe.Description)
	}
	if pe.Description == "" {
		t.Errorf("description is empty, want an explanation")
	}
}

// updateBody builds an OrderStatusChanged body from raw JSON values; an
// empty value leaves the field out.
func updateBody(orderID, status, sequence, occurredAt string) string {
	var fields []string
	for _, f := range [][2]string{{"orderId", orderID}, {"status", status}, {"sequence", sequence}, {"occurredAt", occurredAt}} {
		if f[1] != "" {
			fields = append(fields, fmt.Sprintf("%q:%s", f[0], f[1]))
		}
	}
	return "{" + strings.Join(fields, ",") + "}"
}

func TestParseUpdateAccepts(t *testing.T) {
	id128 := strings.Repeat("a", MaxIDLength)   // 128 characters: the longest SessionId
	idRunes := strings.Repeat("é", MaxIDLength) // 128 characters, 256 bytes
	tests := []struct {
		name    string
		body    string
		session string
		want    Update
	}{
		{"contract example", `{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}`, "o-1",
			Update{OrderID: "o-1", Status: Paid, Sequence: 2, OccurredAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}},
		{"occurredAt absent", `{"orderId":"o-1","status":"Created","sequence":1}`, "o-1",
			Update{OrderID: "o-1", Status: Created, Sequence: 1}},
		{"occurredAt null", `{"orderId":"o-1","status":"Created","sequence":1,"occurredAt":null}`, "o-1",
			Update{OrderID: "o-1", Status: Created, Sequence: 1}},
		{"occurredAt offset converted to UTC", `{"orderId":"o-1","status":"Shipped","sequence":3,"occurredAt":"2026-11-29T12:00:00.5+02:00"}`, "o-1",
			Update{OrderID: "o-1", Status: Shipped, Sequence: 3, OccurredAt: time.Date(2026, 11, 29, 10, 0, 0, 500_000_000, time.UTC)}},
		{"unknown fields ignored", `{"orderId":"o-1","status":"Paid","sequence":2,"extra":{"a":[1,2]}}`, "o-1",
			Update{OrderID: "o-1", Status: Paid, Sequence: 2}},
		{"whitespace around the object", " \t\r\n{\"orderId\":\"o-1\",\"status\":\"Paid\",\"sequence\":2}\n ", "o-1",
			Update{OrderID: "o-1", Status: Paid, Sequence: 2}},
		{"field names in any case (as .NET's web defaults)", `{"OrderId":"o-1","STATUS":"Paid","Sequence":2}`, "o-1",
			Update{OrderID: "o-1", Status: Paid, Sequence: 2}},
		{"lowercase status normalised", `{"orderId":"o-1","status":"paid","sequence":2}`, "o-1",
			Update{OrderID: "o-1", Status: Paid, Sequence: 2}},
		{"uppercase status normalised", `{"orderId":"o-1","status":"CANCELLED","sequence":2}`, "o-1",
			Update{OrderID: "o-1", Status: Cancelled, Sequence: 2}},
		{"mixed-case status normalised", `{"orderId":"o-1","status":"dElIvErEd","sequence":9}`, "o-1",
			Update{OrderID: "o-1", Status: Delivered, Sequence: 9}},
		{"id of 128 characters", updateBody(`"`+id128+`"`, `"Paid"`, "2", ""), id128,
			Update{OrderID: id128, Status: Paid, Sequence: 2}},
		{"id of 128 two-byte characters", updateBody(`"`+idRunes+`"`, `"Paid"`, "2", ""), idRunes,
			Update{OrderID: idRunes, Status: Paid, Sequence: 2}},
		{"largest sequence", updateBody(`"o-1"`, `"Paid"`, "9223372036854775807", ""), "o-1",
			Update{OrderID: "o-1", Status: Paid, Sequence: 1<<63 - 1}},
		{"two-digit sequence", updateBody(`"o-1"`, `"Paid"`, "10", ""), "o-1",
			Update{OrderID: "o-1", Status: Paid, Sequence: 10}},
		{"earliest occurredAt Table Storage holds", updateBody(`"o-1"`, `"Paid"`, "2", `"1601-01-01T00:00:00Z"`), "o-1",
			Update{OrderID: "o-1", Status: Paid, Sequence: 2, OccurredAt: time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"escaped unicode id", `{"orderId":"o-\u00e9","status":"Paid","sequence":2}`, "o-é",
			Update{OrderID: "o-é", Status: Paid, Sequence: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUpdate([]byte(tt.body), tt.session)
			if err != nil {
				t.Fatalf("ParseUpdate(%s) error = %v, want nil", tt.body, err)
			}
			if got.OrderID != tt.want.OrderID || got.Status != tt.want.Status || got.Sequence != tt.want.Sequence || !got.OccurredAt.Equal(tt.want.OccurredAt) {
				t.Errorf("ParseUpdate(%s) = %+v, want %+v", tt.body, got, tt.want)
			}
			if got.OccurredAt.Location() != time.UTC {
				t.Errorf("OccurredAt location = %v, want UTC", got.OccurredAt.Location())
			}
		})
	}
}

// TestParseUpdateRejects has one row per validation rule of the message
// contract; every failure is poison InvalidPayload.
func TestParseUpdateRejects(t *testing.T) {
	long := strings.Repeat("a", MaxIDLength+1)
	tests := []struct {
		name    string
		body    string
		session string
	}{
		{"empty body", "", "o-1"},
		{"whitespace body", " \n\t", "o-1"},
		{"not JSON", "orderId=o-1&status=Paid", "o-1"},
		{"truncated JSON", `{"orderId":"o-1","status":"Paid"`, "o-1"},
		{"JSON array", `[{"orderId":"o-1","status":"Paid","sequence":2}]`, "o-1"},
		{"JSON string", `"{\"orderId\":\"o-1\"}"`, "o-1"},
		{"JSON null", `null`, "o-1"},
		{"trailing data", `{"orderId":"o-1","status":"Paid","sequence":2} x`, "o-1"},
		{"trailing object", `{"orderId":"o-1","status":"Paid","sequence":2}{}`, "o-1"},
		{"trailing brace", `{"orderId":"o-1","status":"Paid","sequence":2}}`, "o-1"},
		{"non-JSON whitespace before", "\u00a0" + updateBody(`"o-1"`, `"Paid"`, "2", ""), "o-1"},
		{"invalid UTF-8 in body", "{\"orderId\":\"o-1\",\"status\":\"Paid\",\"sequence\":2,\"note\":\"\xff\"}", "o-1"},
		{"invalid UTF-8 in orderId", "{\"orderId\":\"o-\xff\",\"status\":\"Paid\",\"sequence\":2}", "o-\xff"},
		{"missing orderId", updateBody("", `"Paid"`, "2", ""), "o-1"},
		{"null orderId", updateBody("null", `"Paid"`, "2", ""), "o-1"},
		{"empty orderId", updateBody(`""`, `"Paid"`, "2", ""), ""},
		{"numeric orderId", updateBody("1", `"Paid"`, "2", ""), "1"},
		{"orderId too long (257)", updateBody(`"`+long+`"`, `"Paid"`, "2", ""), long},
		{"orderId with /", updateBody(`"o/1"`, `"Paid"`, "2", ""), "o/1"},
		{`orderId with \`, updateBody(`"o\\1"`, `"Paid"`, "2", ""), `o\1`},
		{"orderId with #", updateBody(`"o#1"`, `"Paid"`, "2", ""), "o#1"},
		{"orderId with ?", updateBody(`"o?1"`, `"Paid"`, "2", ""), "o?1"},
		{"orderId with control char U+0001", updateBody(`"o\u00011"`, `"Paid"`, "2", ""), "o\x011"},
		{"orderId with tab", updateBody(`"o\t1"`, `"Paid"`, "2", ""), "o\t1"},
		{"orderId with DEL", updateBody(`"o\u007f1"`, `"Paid"`, "2", ""), "o\x7f1"},
		{"orderId with C1 control U+0085", updateBody(`"o\u00851"`, `"Paid"`, "2", ""), "o\u00851"},
		{"session mismatch", updateBody(`"o-1"`, `"Paid"`, "2", ""), "o-2"},
		{"session empty", updateBody(`"o-1"`, `"Paid"`, "2", ""), ""},
		{"session differs in case", updateBody(`"o-1"`, `"Paid"`, "2", ""), "O-1"},
		{"missing status", updateBody(`"o-1"`, "", "2", ""), "o-1"},
		{"null status", updateBody(`"o-1"`, "null", "2", ""), "o-1"},
		{"empty status", updateBody(`"o-1"`, `""`, "2", ""), "o-1"},
		{"unknown status", updateBody(`"o-1"`, `"Refunded"`, "2", ""), "o-1"},
		{"status with spaces", updateBody(`"o-1"`, `" Paid"`, "2", ""), "o-1"},
		{"status as .NET enum number", updateBody(`"o-1"`, "1", "2", ""), "o-1"},
		{"status spelled with the long s (no Unicode folding)", updateBody(`"o-1"`, `"ſhipped"`, "2", ""), "o-1"},
		{"missing sequence", updateBody(`"o-1"`, `"Paid"`, "", ""), "o-1"},
		{"null sequence", updateBody(`"o-1"`, `"Paid"`, "null", ""), "o-1"},
		{"sequence 0", updateBody(`"o-1"`, `"Paid"`, "0", ""), "o-1"},
		{"negative sequence", updateBody(`"o-1"`, `"Paid"`, "-1", ""), "o-1"},
		{"non-integer sequence 1.5", updateBody(`"o-1"`, `"Paid"`, "1.5", ""), "o-1"},
		{"integral float sequence 2.0", updateBody(`"o-1"`, `"Paid"`, "2.0", ""), "o-1"},
		{"exponent sequence 1e2", updateBody(`"o-1"`, `"Paid"`, "1e2", ""), "o-1"},
		{`string sequence "2"`, updateBody(`"o-1"`, `"Paid"`, `"2"`, ""), "o-1"},
		{"boolean sequence", updateBody(`"o-1"`, `"Paid"`, "true", ""), "o-1"},
		{"sequence overflows int64", updateBody(`"o-1"`, `"Paid"`, "9223372036854775808", ""), "o-1"},
		{"huge sequence", updateBody(`"o-1"`, `"Paid"`, "1"+strings.Repeat("0", 400), ""), "o-1"},
		{"occurredAt not a time", updateBody(`"o-1"`, `"Paid"`, "2", `"yesterday"`), "o-1"},
		{"occurredAt without zone", updateBody(`"o-1"`, `"Paid"`, "2", `"2026-11-29T10:00:00"`), "o-1"},
		{"occurredAt as number", updateBody(`"o-1"`, `"Paid"`, "2", "1764410400"), "o-1"},
		{"occurredAt before 1601", updateBody(`"o-1"`, `"Paid"`, "2", `"1600-12-31T23:59:59Z"`), "o-1"},
		{"occurredAt year 0001", updateBody(`"o-1"`, `"Paid"`, "2", `"0001-01-01T00:00:00Z"`), "o-1"},
		{"occurredAt past 9999 in UTC", updateBody(`"o-1"`, `"Paid"`, "2", `"9999-12-31T23:00:00-02:00"`), "o-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUpdate([]byte(tt.body), tt.session)
			if err == nil {
				t.Fatalf("ParseUpdate(%q, %q) = %+v, want poison %s", tt.body, tt.session, got, ReasonInvalidPayload)
			}
			wantPoison(t, err, ReasonInvalidPayload)
			if got != (Update{}) {
				t.Errorf("ParseUpdate returned %+v with its error, want the zero Update", got)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		in     string
		want   Status
		wantOK bool
	}{
		{"Created", Created, true},
		{"paid", Paid, true},
		{"SHIPPED", Shipped, true},
		{"delivered", Delivered, true},
		{"cancelled", Cancelled, true},
		{"Canceled", "", false},
		{"", "", false},
		{"Paid ", "", false},
		{"ſhipped", "", false},
		{"1", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := contract.ParseStatus(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseStatus(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestStatusValidAndTerminal(t *testing.T) {
	tests := []struct {
		s               Status
		valid, terminal bool
	}{
		{Created, true, false},
		{Paid, true, false},
		{Shipped, true, false},
		{Delivered, true, true},
		{Cancelled, true, true},
		{"paid", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.s), func(t *testing.T) {
			if got := tt.s.Valid(); got != tt.valid {
				t.Errorf("%q.Valid() = %v, want %v", tt.s, got, tt.valid)
			}
			if got := tt.s.Terminal(); got != tt.terminal {
				t.Errorf("%q.Terminal() = %v, want %v", tt.s, got, tt.terminal)
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	tests := []struct {
		name    string
		id      string
		wantErr bool
	}{
		{"simple", "o-1", false},
		{"128 characters", strings.Repeat("x", 128), false},
		{"128 two-byte characters", strings.Repeat("é", 128), false},
		{"64 four-byte characters (128 UTF-16 units)", strings.Repeat("😀", 64), false},
		{"65 four-byte characters (130 UTF-16 units)", strings.Repeat("😀", 65), true},
		{"129 characters", strings.Repeat("x", 129), true},
		{"unicode letters", "commande-é-ß", false},
		{"space inside", "o 1", false},
		{"empty", "", true},
		{"256 characters (the old limit)", strings.Repeat("x", 256), true},
		{"invalid UTF-8", "o-\xff", true},
		{"slash", "a/b", true},
		{"backslash", `a\b`, true},
		{"hash", "a#b", true},
		{"question mark", "a?b", true},
		{"NUL", "a\x00b", true},
		{"newline", "a\nb", true},
		{"DEL", "a\x7fb", true},
		{"C1 control", "a\u009fb", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateID(tt.id)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("ValidateID(%q) = %v, want nil", tt.id, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateID(%q) = nil, want poison %s", tt.id, ReasonInvalidPayload)
			}
			wantPoison(t, err, ReasonInvalidPayload)
		})
	}
}

func TestParseTimeoutCheck(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		session string
		want    string // "" = poison InvalidPayload
	}{
		{"contract example", `{"orderId":"o-1"}`, "o-1", "o-1"},
		{"unknown fields ignored", `{"orderId":"o-1","dueAt":"2026-11-29T10:30:00Z"}`, "o-1", "o-1"},
		{"field name in any case", `{"OrderID":"o-1"}`, "o-1", "o-1"},
		{"empty body", ``, "o-1", ""},
		{"not JSON", `o-1`, "o-1", ""},
		{"JSON array", `["o-1"]`, "o-1", ""},
		{"trailing data", `{"orderId":"o-1"} {}`, "o-1", ""},
		{"invalid UTF-8", "{\"orderId\":\"o-1\",\"x\":\"\xfe\"}", "o-1", ""},
		{"missing orderId", `{}`, "o-1", ""},
		{"null orderId", `{"orderId":null}`, "o-1", ""},
		{"empty orderId", `{"orderId":""}`, "", ""},
		{"orderId too long", `{"orderId":"` + strings.Repeat("a", 257) + `"}`, strings.Repeat("a", 257), ""},
		{"orderId with #", `{"orderId":"o#1"}`, "o#1", ""},
		{"orderId with control char", `{"orderId":"o\u00001"}`, "o\x001", ""},
		{"session mismatch", `{"orderId":"o-1"}`, "o-2", ""},
		{"createdSequence", `{"orderId":"o-1","createdSequence":3}`, "o-1", "o-1"},
		{"createdSequence 0", `{"orderId":"o-1","createdSequence":0}`, "o-1", ""},
		{"createdSequence not an integer", `{"orderId":"o-1","createdSequence":1.5}`, "o-1", ""},
		{"createdSequence a string", `{"orderId":"o-1","createdSequence":"1"}`, "o-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTimeoutCheck([]byte(tt.body), tt.session)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseTimeoutCheck(%q, %q) = %+v, want poison", tt.body, tt.session, got)
				}
				wantPoison(t, err, ReasonInvalidPayload)
				return
			}
			if err != nil {
				t.Fatalf("ParseTimeoutCheck(%q, %q) error = %v, want nil", tt.body, tt.session, err)
			}
			if got.OrderID != tt.want {
				t.Errorf("OrderID = %q, want %q", got.OrderID, tt.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 20, 30, 0, time.UTC)
	occurred := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	state := func(s Status, seq int64) *State {
		return &State{Status: s, LastSequence: seq, OccurredAt: occurred.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour)}
	}
	update := func(s Status, seq int64) Update {
		return Update{OrderID: "o-1", Status: s, Sequence: seq, OccurredAt: occurred}
	}
	tests := []struct {
		name     string
		current  *State
		u        Update
		want     Result
		wantNext State // checked when want is Applied
		wantGap  int64
	}{
		{"new order", nil, update(Created, 1), Applied, State{Created, 1, occurred, now, time.Time{}}, 0},
		{"new order starting later counts a gap", nil, update(Paid, 3), Applied, State{Paid, 3, occurred, now, time.Time{}}, 2},
		{"new order already terminal is applied", nil, update(Cancelled, 1), Applied, State{Cancelled, 1, occurred, now, time.Time{}}, 0},
		{"next", state(Created, 1), update(Paid, 2), Applied, State{Paid, 2, occurred, now, time.Time{}}, 0},
		{"next without occurredAt uses now", state(Paid, 2), Update{OrderID: "o-1", Status: Shipped, Sequence: 3}, Applied, State{Shipped, 3, now, now, time.Time{}}, 0},
		{"gap of one", state(Created, 1), update(Shipped, 3), Applied, State{Shipped, 3, occurred, now, time.Time{}}, 1},
		{"gap of many", state(Created, 1), update(Delivered, 10), Applied, State{Delivered, 10, occurred, now, time.Time{}}, 8},
		{"same status, higher sequence", state(Paid, 2), update(Paid, 3), Applied, State{Paid, 3, occurred, now, time.Time{}}, 0},
		{"backwards status, higher sequence (sequence rules)", state(Shipped, 3), update(Paid, 4), Applied, State{Paid, 4, occurred, now, time.Time{}}, 0},
		{"duplicate", state(Paid, 2), update(Paid, 2), Duplicate, State{}, 0},
		{"duplicate with another status", state(Paid, 2), update(Shipped, 2), Duplicate, State{}, 0},
		{"stale", state(Shipped, 3), update(Paid, 2), Stale, State{}, 0},
		{"stale by many", state(Shipped, 30), update(Created, 1), Stale, State{}, 0},
		{"after Delivered", state(Delivered, 4), update(Shipped, 5), InvalidTransition, State{}, 0},
		{"after Cancelled", state(Cancelled, 2), update(Paid, 3), InvalidTransition, State{}, 0},
		{"Cancelled after Cancelled", state(Cancelled, 2), update(Cancelled, 3), InvalidTransition, State{}, 0},
		{"duplicate of a Delivered order", state(Delivered, 4), update(Delivered, 4), Duplicate, State{}, 0},
		{"duplicate of a Cancelled order", state(Cancelled, 2), update(Paid, 2), Duplicate, State{}, 0},
		{"stale for a Delivered order", state(Delivered, 4), update(Paid, 2), Stale, State{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before State
			if tt.current != nil {
				before = *tt.current
			}
			got := Decide(tt.current, tt.u, now)
			if got.Result != tt.want {
				t.Fatalf("Result = %s, want %s (decision %+v)", got.Result, tt.want, got)
			}
			if tt.current != nil && *tt.current != before {
				t.Errorf("Decide changed current to %+v, want it untouched (%+v)", *tt.current, before)
			}
			switch tt.want {
			case Applied:
				if got.Next != tt.wantNext {
					t.Errorf("Next = %+v, want %+v", got.Next, tt.wantNext)
				}
				if got.Gap != tt.wantGap {
					t.Errorf("Gap = %d, want %d", got.Gap, tt.wantGap)
				}
				if got.Poison != nil {
					t.Errorf("Poison = %v, want nil", got.Poison)
				}
			case InvalidTransition:
				if got.Poison == nil {
					t.Fatalf("Poison = nil, want reason %s", ReasonInvalidTransition)
				}
				wantPoison(t, got.Poison, ReasonInvalidTransition)
				if got.Next != (State{}) {
					t.Errorf("Next = %+v, want zero", got.Next)
				}
			default:
				if got.Next != (State{}) || got.Gap != 0 || got.Poison != nil {
					t.Errorf("decision = %+v, want only Result %s", got, tt.want)
				}
			}
		})
	}
}

func TestDecideConvertsTimesToUTC(t *testing.T) {
	zone := time.FixedZone("UTC+2", 2*60*60)
	now := time.Date(2026, 11, 29, 12, 20, 30, 0, zone)
	occurred := time.Date(2026, 11, 29, 12, 0, 0, 0, zone)
	got := Decide(nil, Update{OrderID: "o-1", Status: Created, Sequence: 1, OccurredAt: occurred}, now)
	if got.Next.OccurredAt.Location() != time.UTC || got.Next.UpdatedAt.Location() != time.UTC {
		t.Errorf("Next times in %v and %v, want UTC", got.Next.OccurredAt.Location(), got.Next.UpdatedAt.Location())
	}
	if !got.Next.OccurredAt.Equal(occurred) || !got.Next.UpdatedAt.Equal(now) {
		t.Errorf("Next = %+v, want OccurredAt %v and UpdatedAt %v", got.Next, occurred, now)
	}
}

func TestDecideExpire(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 50, 0, 0, time.UTC)
	earlier := now.Add(-30 * time.Minute)
	tests := []struct {
		name     string
		current  *State
		want     Result
		wantNext State
	}{
		{"unknown order", nil, Stale, State{}},
		{"still Created: the deadline is its occurredAt plus the timeout", &State{Created, 1, earlier, earlier, time.Time{}}, Applied, State{Cancelled, 1, now, now, now}},
		{"Created with a later sequence keeps it", &State{Created, 7, earlier, earlier, time.Time{}}, Applied, State{Cancelled, 7, now, now, now}},
		{"Paid", &State{Paid, 2, earlier, earlier, time.Time{}}, Stale, State{}},
		{"Shipped", &State{Shipped, 3, earlier, earlier, time.Time{}}, Stale, State{}},
		{"Delivered", &State{Delivered, 4, earlier, earlier, time.Time{}}, Stale, State{}},
		{"already Cancelled", &State{Cancelled, 2, earlier, earlier, time.Time{}}, Stale, State{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideExpire(tt.current, 30*time.Minute, now)
			if got.Result != tt.want {
				t.Fatalf("Result = %s, want %s", got.Result, tt.want)
			}
			if got.Next != tt.wantNext {
				t.Errorf("Next = %+v, want %+v", got.Next, tt.wantNext)
			}
			if got.Gap != 0 || got.Poison != nil {
				t.Errorf("Gap = %d, Poison = %v; want 0 and nil", got.Gap, got.Poison)
			}
		})
	}
}

func TestPoisonErrorMessage(t *testing.T) {
	err := error(&PoisonError{Reason: ReasonInvalidPayload, Description: "orderId is empty"})
	if got, want := err.Error(), "InvalidPayload: orderId is empty"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestPoisonDescriptionsAreShortValidUTF8 guards the description copied
// into the poison message's properties: bounded, and cut on a rune
// boundary.
func TestPoisonDescriptionsAreShortValidUTF8(t *testing.T) {
	status := strings.Repeat("é", 200) // 400 bytes
	body := updateBody(`"o-1"`, `"x`+status+`"`, "2", "")
	_, err := ParseUpdate([]byte(body), "o-1")
	var pe *PoisonError
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v, want a *PoisonError", err)
	}
	if !utf8.ValidString(pe.Description) {
		t.Errorf("description %q is not valid UTF-8", pe.Description)
	}
	if n := utf8.RuneCountInString(pe.Description); n > 200 {
		t.Errorf("description is %d characters, want at most 200", n)
	}
}

// TestDecideSupersedesATimeout: on a row the payment timeout cancelled, a
// change that proves payment and occurred by the deadline is applied as
// if the order were still Created; anything else keeps the rules of a
// final Cancelled.
func TestDecideSupersedesATimeout(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	deadline := now.Add(-time.Minute)
	timedOut := &State{Status: Cancelled, LastSequence: 1, OccurredAt: deadline, UpdatedAt: deadline, Deadline: deadline}
	byProducer := &State{Status: Cancelled, LastSequence: 1, OccurredAt: deadline, UpdatedAt: deadline}
	u := func(s Status, seq int64, at time.Time) Update {
		return Update{OrderID: "o-1", Status: s, Sequence: seq, OccurredAt: at}
	}
	tests := []struct {
		name    string
		current *State
		u       Update
		want    Result
		poison  string // in the description of an InvalidTransition
	}{
		{"Paid before the deadline", timedOut, u(Paid, 2, deadline.Add(-time.Second)), Applied, ""},
		{"Paid at exactly the deadline", timedOut, u(Paid, 2, deadline), Applied, ""},
		{"Shipped in time, its Paid late (a gap)", timedOut, u(Shipped, 3, deadline.Add(-time.Second)), Applied, ""},
		{"Delivered in time", timedOut, u(Delivered, 4, deadline.Add(-time.Second)), Applied, ""},
		{"Paid after the deadline", timedOut, u(Paid, 2, deadline.Add(time.Second)), InvalidTransition, "deadline " + deadline.Format(time.RFC3339)},
		{"Paid at an unknown time", timedOut, u(Paid, 2, time.Time{}), InvalidTransition, "at an unknown time"},
		{"Created again after a timeout", timedOut, u(Created, 2, deadline.Add(-time.Second)), InvalidTransition, "terminal"},
		{"Cancelled after a timeout", timedOut, u(Cancelled, 2, deadline.Add(-time.Second)), InvalidTransition, "terminal"},
		{"a producer's Cancelled stays final", byProducer, u(Paid, 2, deadline.Add(-time.Hour)), InvalidTransition, "terminal"},
		{"an equal sequence is a duplicate", timedOut, u(Paid, 1, deadline.Add(-time.Second)), Duplicate, ""},
		{"a lower sequence is stale", &State{Status: Cancelled, LastSequence: 3, Deadline: deadline}, u(Paid, 2, deadline.Add(-time.Second)), Stale, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.current, tt.u, now)
			if d.Result != tt.want {
				t.Fatalf("Result = %s (%v), want %s", d.Result, d.Poison, tt.want)
			}
			switch d.Result {
			case Applied:
				if d.Next.Status != tt.u.Status || d.Next.LastSequence != tt.u.Sequence || !d.Next.Deadline.IsZero() || d.Next.TimedOut() {
					t.Errorf("Next = %+v, want %s/%d with no deadline", d.Next, tt.u.Status, tt.u.Sequence)
				}
			case InvalidTransition:
				if d.Poison == nil || d.Poison.Reason != ReasonInvalidTransition || !strings.Contains(d.Poison.Description, tt.poison) {
					t.Errorf("Poison = %+v, want InvalidTransition naming %q", d.Poison, tt.poison)
				}
			}
		})
	}
}
