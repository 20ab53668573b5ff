package dlstore

import (
	"bytes"
	"strings"
)

// matchText is the --text match: a case-insensitive substring of the
// MessageId, the order id, the description or the body.
func matchText(text string, e Entry) bool {
	t := strings.ToLower(text)
	for _, s := range []string{e.MessageID, e.OrderID, e.Description} {
		if strings.Contains(strings.ToLower(s), t) {
			return true
		}
	}
	return bytes.Contains(bytes.ToLower(e.Body), []byte(t))
}

// NeedsBody reports whether f needs an entry's body to be decided (a
// --text filter), so a backend listing from a summary index reads the
// entry itself.
func (f Filter) NeedsBody() bool { return f.Text != "" }
