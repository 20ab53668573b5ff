// Package plural words a count of things for the lines people read: "1
// order", "3 orders", "1 entry", "2 entries". Every CLI and the dev host's
// summary use it, so a count of one never reads "1 replays".
package plural

import "strconv"

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
