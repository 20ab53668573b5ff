package hostproto

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestQuoteJSONFastPath checks quoteJSON, with its shortcut for plain
// ASCII, against the encoder it shortcuts.
func TestQuoteJSONFastPath(t *testing.T) {
	for _, s := range []string{
		"", "order-42", "OrderStatusChanged", "a b<c>&d", "~!@#$%^*()_+{}|:?`", "quote\"inside",
		`back\slash`, "tab\there", "new\nline", "del\x7f", "ünïcödé", "\u2028sep", "bad\xffutf8", "\x00",
	} {
		t.Run(s, func(t *testing.T) {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			want := string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
			if got := quoteJSON(s); got != want {
				t.Errorf("quoteJSON(%q) = %s, want %s", s, got, want)
			}
		})
	}
}
