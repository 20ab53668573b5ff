package order

import (
	"errors"
	"testing"
	"time"
)

// FuzzParseUpdate checks that ParseUpdate never panics, that every failure
// is poison InvalidPayload, and that every success satisfies the contract.
// The seeds run in every plain go test.
func FuzzParseUpdate(f *testing.F) {
	seeds := []struct{ body, session string }{
		{`{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}`, "o-1"},
		{`{"orderId":"o-1","status":"created","sequence":1}`, "o-1"},
		{`{"OrderId":"o-1","Status":"SHIPPED","Sequence":9223372036854775807,"occurredAt":"2026-11-29T12:00:00.123+02:00"}`, "o-1"},
		{`{"orderId":"o-1","status":"Paid","sequence":2}`, "o-2"},
		{`{"orderId":"o/1","status":"Paid","sequence":2}`, "o/1"},
		{`{"orderId":"","status":"Paid","sequence":2}`, ""},
		{`{"orderId":"o-1","status":"Refunded","sequence":2}`, "o-1"},
		{`{"orderId":"o-1","status":"Paid","sequence":0}`, "o-1"},
		{`{"orderId":"o-1","status":"Paid","sequence":1.5}`, "o-1"},
		{`{"orderId":"o-1","status":"Paid","sequence":"2"}`, "o-1"},
		{`{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"1600-01-01T00:00:00Z"}`, "o-1"},
		{`{"orderId":"o-1","status":"Paid","sequence":2}}`, "o-1"},
		{`[{"orderId":"o-1"}]`, "o-1"},
		{"{\"orderId\":\"o-\xff\",\"status\":\"Paid\",\"sequence\":2}", "o-\xff"},
		{`{"orderId":"o\u0000","status":"Paid","sequence":2}`, "o\x00"},
		{``, ""},
		{`null`, ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.session)
	}
	f.Fuzz(func(t *testing.T, body []byte, session string) {
		u, err := ParseUpdate(body, session)
		if err != nil {
			var pe *PoisonError
			if !errors.As(err, &pe) || pe.Reason != ReasonInvalidPayload {
				t.Fatalf("ParseUpdate(%q, %q) error = %v (%T), want poison %s", body, session, err, err, ReasonInvalidPayload)
			}
			if u != (Update{}) {
				t.Fatalf("ParseUpdate returned %+v with error %v, want the zero Update", u, err)
			}
			return
		}
		if err := ValidateID(u.OrderID); err != nil {
			t.Errorf("accepted orderId %q fails ValidateID: %v", u.OrderID, err)
		}
		if u.OrderID != session {
			t.Errorf("accepted orderId %q in session %q", u.OrderID, session)
		}
		if !u.Status.Valid() {
			t.Errorf("accepted status %q is not canonical", u.Status)
		}
		if u.Sequence < 1 {
			t.Errorf("accepted sequence %d < 1", u.Sequence)
		}
		if !u.OccurredAt.IsZero() {
			if u.OccurredAt.Location() != time.UTC {
				t.Errorf("OccurredAt %v is not in UTC", u.OccurredAt)
			}
			if u.OccurredAt.Year() < 1601 || u.OccurredAt.Year() > 9999 {
				t.Errorf("OccurredAt %v is outside the years 1601 to 9999", u.OccurredAt)
			}
		}
		// The body decides alone: parsing again gives the same update.
		again, err := ParseUpdate(body, session)
		if err != nil || again != u {
			t.Errorf("second ParseUpdate = %+v, %v; want %+v, nil", again, err, u)
		}
	})
}
