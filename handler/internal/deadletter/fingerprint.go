package deadletter

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// masks turn a dead-letter description into its template: the parts that
// differ from one message of a failure to the next (times, GUIDs, quoted
// values such as order ids, hex strings and numbers) are replaced by a
// placeholder, in this order (a time holds numbers; a quoted id may).
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?`), "<time>"},
	{regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<guid>"},
	{regexp.MustCompile(`"[^"]*"`), `"<s>"`},
	{regexp.MustCompile(`'[^']*'`), `'<s>'`},
	{regexp.MustCompile(`(?i)\b[0-9a-f]{16,}\b`), "<hex>"},
	{regexp.MustCompile(`\d+(\.\d+)?`), "<n>"},
}

// Template is description with its ids, numbers and times masked: what
// every message of one failure group shares.
func Template(description string) string {
	for _, m := range masks {
		description = m.re.ReplaceAllString(description, m.with)
	}
	return description
}

// Fingerprint is the failure group of a reason and description: 8 hex
// digits of the SHA-256 of the reason and the description's Template. Two
// messages that failed the same way (the same check, other orders, other
// times) share it; `orderstatus deadletters groups` counts by it.
func Fingerprint(reason, description string) string {
	sum := sha256.Sum256([]byte(reason + "\n" + Template(description)))
	return hex.EncodeToString(sum[:4])
}
