package deadletter

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// masks replace what differs between messages of one failure, times before numbers.
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

// Template is description with times, ids and numbers masked: what a failure group shares.
func Template(description string) string {
	for _, m := range masks {
		description = m.re.ReplaceAllString(description, m.with)
	}
	return description
}

// Fingerprint is the failure group of a reason and description (what `orderstatus
// deadletters groups` counts by): 8 hex digits of the SHA-256 of reason and Template(description).
func Fingerprint(reason, description string) string {
	sum := sha256.Sum256([]byte(reason + "\n" + Template(description)))
	return hex.EncodeToString(sum[:4])
}
