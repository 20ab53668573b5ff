package dlstore

import (
	"bytes"
	"strings"
)

// matchText is the --text match (Filter.Text).
func matchText(text string, e Entry) bool {
	t := strings.ToLower(text)
	for _, s := range []string{e.MessageID, e.OrderID, e.Description} {
		if strings.Contains(strings.ToLower(s), t) {
			return true
		}
	}
	return bytes.Contains(bytes.ToLower(e.Body), []byte(t))
}

// NeedsBody reports whether f needs an entry's body (a --text filter), which a
// summary index lacks.
func (f Filter) NeedsBody() bool { return f.Text != "" }
