// Package wording words counts and durations for the lines people read:
// "1 order", "3 orders", "1 entry", "2 entries", "30m", "1h30m". Every CLI
// and the dev host's summary use it, so a count of one never reads "1
// replays" and a duration never "30m0s".
package wording

import (
	"strconv"
	"strings"
	"time"
)

// Count says n of noun, in the plural unless n is 1; the plural adds "s"
// to the noun's last letter: Count(1, "order") is "1 order", Count(0,
// "order") "0 orders". A noun whose plural is not that takes CountAs.
func Count(n int, noun string) string {
	return CountAs(n, noun, noun+"s")
}

// CountAs says n of one when n is 1, else n of many: CountAs(2, "entry",
// "entries") is "2 entries", CountAs(1, "request refused", "requests
// refused") "1 request refused".
func CountAs(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Duration says d to the second without trailing zero units: 30m, 1h,
// 1h30m, 45s, 1m30s.
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
