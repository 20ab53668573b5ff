package ncrontab

import (
	"errors"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestNext(t *testing.T) {
	tests := []struct {
		expr string
		from string
		want []string // successive occurrences
	}{
		{"0 */5 * * * *", "2026-11-29T10:03:17Z", []string{"2026-11-29T10:05:00Z", "2026-11-29T10:10:00Z", "2026-11-29T10:15:00Z"}},
		{"0 */5 * * * *", "2026-11-29T10:05:00Z", []string{"2026-11-29T10:10:00Z"}},
		{"0 */5 * * * *", "2026-11-29T23:58:00Z", []string{"2026-11-30T00:00:00Z"}},
		{"* * * * * *", "2026-11-29T10:00:00.5Z", []string{"2026-11-29T10:00:01Z", "2026-11-29T10:00:02Z"}},
		{"*/15 * * * * *", "2026-11-29T10:00:50Z", []string{"2026-11-29T10:01:00Z", "2026-11-29T10:01:15Z"}},
		{"30 9 * * * *", "2026-11-29T10:09:31Z", []string{"2026-11-29T11:09:30Z"}},
		{"0 30 9 * * 1-5", "2026-11-27T10:00:00Z", []string{"2026-11-30T09:30:00Z", "2026-12-01T09:30:00Z"}}, // Fri -> Mon
		{"0 30 9 * * Mon-Fri", "2026-11-27T10:00:00Z", []string{"2026-11-30T09:30:00Z"}},
		{"0 0 0 1 jan *", "2026-11-29T00:00:00Z", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"0 0 12 31 * *", "2026-01-31T12:00:00Z", []string{"2026-03-31T12:00:00Z", "2026-05-31T12:00:00Z"}},
		{"0 0 0 29 2 *", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		// Day and day-of-week must both match: 13th that is a Friday.
		{"0 0 0 13 * 5", "2026-01-01T00:00:00Z", []string{"2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z", "2026-11-13T00:00:00Z"}},
		{"0 0 8-10/2 * * *", "2026-11-29T08:00:00Z", []string{"2026-11-29T10:00:00Z", "2026-11-30T08:00:00Z"}},
		{"0 45/5 * * * *", "2026-11-29T10:00:00Z", []string{"2026-11-29T10:45:00Z", "2026-11-29T10:50:00Z", "2026-11-29T10:55:00Z", "2026-11-29T11:45:00Z"}},
		{"5,10 0 0 * * *", "2026-11-29T00:00:05Z", []string{"2026-11-29T00:00:10Z", "2026-11-30T00:00:05Z"}},
		{"0 0 0 * * 0", "2026-12-31T00:00:00Z", []string{"2027-01-03T00:00:00Z"}}, // across the year, Sunday
		{"0 59 23 31 12 *", "2026-12-31T23:59:00Z", []string{"2027-12-31T23:59:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr+"@"+tt.from, func(t *testing.T) {
			s, err := Parse(tt.expr)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.expr, err)
			}
			cur := at(tt.from)
			for i, w := range tt.want {
				got := s.Next(cur)
				if !got.Equal(at(w)) {
					t.Fatalf("occurrence %d after %s: got %s, want %s", i+1, cur.Format(time.RFC3339Nano), got.Format(time.RFC3339), w)
				}
				cur = got
			}
		})
	}
}

func TestNextImpossible(t *testing.T) {
	s := MustParse("0 0 0 30 2 *")
	if got := s.Next(at("2026-01-01T00:00:00Z")); !got.IsZero() {
		t.Errorf("Next for 30 February: got %s, want the zero time", got)
	}
}

func TestNextKeepsLocation(t *testing.T) {
	loc := time.FixedZone("UTC+2", 2*3600)
	s := MustParse("0 0 9 * * *")
	got := s.Next(time.Date(2026, 11, 29, 10, 0, 0, 0, loc))
	want := time.Date(2026, 11, 30, 9, 0, 0, 0, loc)
	if !got.Equal(want) || got.Location() != loc {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		expr string
	}{
		{""},
		{"*/5 * * * *"},     // five fields (classic cron)
		{"0 */5 * * * * *"}, // seven fields
		{"60 * * * * *"},
		{"* 60 * * * *"},
		{"* * 24 * * *"},
		{"* * * 0 * *"},
		{"* * * 32 * *"},
		{"* * * * 13 *"},
		{"* * * * * 7"},
		{"*/0 * * * * *"},
		{"*/x * * * * *"},
		{"5-1 * * * * *"},
		{"1,,2 * * * * *"},
		{"* * * * Ja *"},
		{"* * * * Foo *"},
		{"Mon * * * * *"},
		{"-1 * * * * *"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := Parse(tt.expr)
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) = %v, %v; want an error wrapping ErrSyntax", tt.expr, s, err)
			}
		})
	}
}

func TestString(t *testing.T) {
	if got, want := MustParse("  0  */5 * * *   * ").String(), "0 */5 * * * *"; got != want {
		t.Errorf("String: got %q, want %q", got, want)
	}
}

// MustParse is Parse that panics on error, for expressions fixed in the tests.
func MustParse(expr string) *Schedule {
	s, err := Parse(expr)
	if err != nil {
		panic(err)
	}
	return s
}
