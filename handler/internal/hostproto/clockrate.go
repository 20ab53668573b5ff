package hostproto

import (
	"math"
	"net/http"
	"strconv"
)

// HeaderClockRate is not part of the Functions host's protocol: the host
// never sends it. The development host adds it to every invocation while
// its clock runs faster than the wall clock (orderstatus-dev dev --time-scale, the
// bench, the simulation's outage schedules), with the clock's present
// rate, so that a handler can keep time-bounded work inside one call on
// the host's clock as it keeps everything else there: an in-call retry
// budget of 5 s is 5 s of the host's time at every speed, as the message
// lock is. Without it, a budget fixed in wall time is the lock's length or
// more at 12 times and above, and a call that retries through a refusing
// store outlives its lock.
const HeaderClockRate = "X-Orderstatus-Clock-Rate"

// MaxClockRate bounds the rates ClockRate accepts. It is the development
// host's fastest clock (devhost.MaxTimeScale is this constant).
const MaxClockRate = 10000

// ClockRate returns the clock rate r's invocation carries: how many times
// faster than the wall clock the host's clock runs. It is 1 when the
// header is absent or is not a number above 1 and at most MaxClockRate: a
// value it cannot use never lengthens anything, it is only ignored.
func ClockRate(r *http.Request) float64 {
	s := r.Header.Get(HeaderClockRate)
	if s == "" {
		return 1
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || !(f > 1) || f > MaxClockRate {
		return 1
	}
	return f
}

// FormatClockRate is the header's value for rate (shortest form).
func FormatClockRate(rate float64) string { return strconv.FormatFloat(rate, 'g', -1, 64) }
