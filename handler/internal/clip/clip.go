// Package clip shortens text for error descriptions and message properties.
package clip

// String returns s if it has at most n runes, else its first n-3 runes and
// "...", so that the result never exceeds n runes (Service Bus bounds
// properties in characters). n is at least 4.
func String(s string, n int) string {
	i, runes := 0, 0
	for j := range s {
		if runes == n-3 {
			i = j
		}
		if runes++; runes > n {
			return s[:i] + "..."
		}
	}
	return s
}
