package deadletters

import (
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// clockNote tells the reader which clock the times and ages a reading
// command prints are on, when that is not real time: against a
// development host whose broker clock runs faster (its --time-scale above
// 1, which `make run` sets to 120), it writes one line to stderr with the
// scale and the broker's now against the wall clock. Against Service Bus
// in Azure, or a host at real time, it writes nothing. It never writes to
// stdout, so --json output stays JSON only.
func (c *cli) clockNote(s *session, brokerNow time.Time) {
	if !(s.TimeScale > 1) {
		return
	}
	wall := time.Now()
	if c.env.Wall != nil {
		wall = c.env.Wall()
	}
	fmt.Fprintf(c.stderr, "%s: times and ages are on the development host's broker clock, which runs %g times faster than real time: it says %s, %s (--time-scale 1 keeps the two together)\n",
		c.name, s.TimeScale, brokerNow.UTC().Format("15:04:05Z"), againstWatch(brokerNow.Sub(wall), wall))
}

// againstWatch says how far the broker's clock is from the wall clock.
func againstWatch(d time.Duration, wall time.Time) string {
	w := wall.UTC().Format("15:04:05Z")
	switch d = d.Round(time.Second); {
	case d > 0:
		return fmt.Sprintf("%s ahead of your watch (%s)", wording.Duration(d), w)
	case d < 0:
		return fmt.Sprintf("%s behind your watch (%s)", wording.Duration(-d), w)
	}
	return fmt.Sprintf("as your watch does (%s)", w)
}
