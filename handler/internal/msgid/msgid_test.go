package msgid

import (
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/contract"
)

func TestDerive(t *testing.T) {
	long := strings.Repeat("x", MaxLength)
	tests := []struct {
		name, original, suffix string
		want                   string // "" = check length and hashing only
		hashed                 bool
	}{
		{"short", "o-1:2", ":replay:1", "o-1:2:replay:1", false},
		{"exactly fits", strings.Repeat("a", MaxLength-7), ":parked", strings.Repeat("a", MaxLength-7) + ":parked", false},
		{"one over", strings.Repeat("a", MaxLength-6), ":parked", "", true},
		{"128-character original", long, ":retry:3", "", true},
		{"empty suffix, long original", long + "y", "", "", true},
		{"suffix too long to keep", long, strings.Repeat(":s", 40), "", true},
		// Counted as Service Bus counts (UTF-16 code units), not in bytes:
		// the producers' ids of the same order follow the same rule.
		{"accents fit in characters", strings.Repeat("é", MaxLength-7), ":parked", strings.Repeat("é", MaxLength-7) + ":parked", false},
		{"an emoji counts two", strings.Repeat("\U0001F4E6", 61), ":parked", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Derive(tt.original, tt.suffix)
			if contract.ServiceBusLength(got) > MaxLength {
				t.Fatalf("Derive = %d characters, want at most %d", len(got), MaxLength)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("Derive = %q, want %q", got, tt.want)
			}
			if Hashed(got) != tt.hashed {
				t.Errorf("Hashed(%q) = %v, want %v", got, Hashed(got), tt.hashed)
			}
			if again := Derive(tt.original, tt.suffix); again != got {
				t.Errorf("Derive is not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestDeriveDistinct(t *testing.T) {
	a := Derive(strings.Repeat("a", 200), ":retry:1")
	b := Derive(strings.Repeat("a", 199)+"b", ":retry:1")
	c := Derive(strings.Repeat("a", 200), ":retry:2")
	if a == b || a == c || b == c {
		t.Errorf("distinct inputs gave equal ids: %q %q %q", a, b, c)
	}
	if !strings.HasSuffix(c, ":retry:2") {
		t.Errorf("Derive dropped a suffix that fits after the hash: %q", c)
	}
}
