package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 8, ""},
		{"abcdefgh", 8, "abcdefgh"},
		{"abcdefghi", 8, "abcde..."},
		{"ééééééééé", 8, "ééééé..."},
		{"ab\xffcdefghij", 8, "ab\xffcd..."},
	} {
		if got := String(tc.in, tc.n); got != tc.want {
			t.Errorf("String(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func FuzzString(f *testing.F) {
	f.Add(strings.Repeat("é", 300), 256)
	f.Add("short", 64)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = 4 + int(uint(n)%300)
		got := String(s, n)
		if utf8.RuneCountInString(got) > n {
			t.Fatalf("String(%q, %d) = %q: %d runes", s, n, got, utf8.RuneCountInString(got))
		}
		if got != s && (!strings.HasSuffix(got, "...") || !strings.HasPrefix(s, strings.TrimSuffix(got, "..."))) {
			t.Fatalf("String(%q, %d) = %q: not a marked prefix", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q: cut inside a rune", s, n, got)
		}
	})
}
