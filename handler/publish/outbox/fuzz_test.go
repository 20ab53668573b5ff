package outbox

import (
	"testing"

	"github.com/orderstatus/orderstatus/handler/publish"
)

// FuzzStatusChange: a status record's body comes from storage another
// process wrote (or another Store's backend). Whatever statusChange
// accepts re-encodes to the record's MessageId; it never panics.
func FuzzStatusChange(f *testing.F) {
	for _, s := range [][2]string{
		{"o-1:2", `{"orderId":"o-1","status":"Paid","sequence":2,"occurredAt":"2026-11-29T10:00:00Z"}`},
		{"o-1:1", `{"orderId":"o-1","status":"Created","sequence":1}`},
		{"o-1:3", `{"orderId":"o-1","status":"Paid","sequence":2}`},
		{"o-1:1", `{"orderId":"o-1","status":"Refunded","sequence":1}`},
		{"", `null`}, {"x", `{"orderId":""}`}, {"o:1", `[`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, id, body string) {
		c, err := statusChange(Record{Kind: KindStatus, Message: publish.Message{MessageID: id, Body: []byte(body)}})
		if err != nil {
			return
		}
		m, err := publish.StatusMessage(c)
		if err != nil || m.MessageID != id {
			t.Fatalf("accepted %q as %+v, which encodes to %q, %v", body, c, m.MessageID, err)
		}
	})
}
