// Package wording words counts and durations for people: "1 order", "2
// entries", "1h30m", never "1 replays" or "30m0s".
package wording

import (
	"strconv"
	"strings"
	"time"
)

// Count says n of noun, adding "s" unless n is 1 ("1 order", "0 orders");
// other plurals take CountAs.
func Count(n int, noun string) string {
	return CountAs(n, noun, noun+"s")
}

// CountAs says n of one when n is 1, else n of many: "2 entries".
func CountAs(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Duration says d to the second without trailing zero units: 30m, 1h30m, 45s.
func Duration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
