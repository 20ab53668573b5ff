package deadletters

import (
	"fmt"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// The clocks a time printed is on (find's CLOCK column, its "clock" key).
const (
	// clockBroker is the development host's broker clock: it stamps the
	// dead-letter store there, and `make run` runs it faster than real
	// time (and skips idle time with --exit-when-idle).
	clockBroker = "broker"
	// clockWall is real time: the clock of the machine that wrote it (the
	// handler that wrote an order row, in Azure also the sweeper or the
	// CLI that stored or acted).
	clockWall = "wall"
)

// storeClock is the clock of the dead-letter store's times (stored_at,
// the audit entries') on s.
func (s *session) storeClock() string {
	if s.onBrokerClock() {
		return clockBroker
	}
	return clockWall
}

// clockNote tells the reader which clock the times and ages a reading
// command prints are on, when that is not real time: against a
// development host whose broker clock runs faster (its --time-scale above
// 1, which `make run` sets to 120), it writes one line to stderr with the
// scale and the broker's now against the wall clock. Against Service Bus
// in Azure, or a host at real time, it writes nothing. When the broker's
// clock could not be read, the line says that instead. It never writes to
// stdout, so --json output stays JSON only.
func (c *cli) clockNote(s *session, brokerNow time.Time) {
	c.clockNoteOn(s, brokerNow, "times and ages are", "")
}

// clockNoteOn is clockNote for a command whose subject (what is on the
// broker's clock) and rest (what is not) are its own: find's order row is
// on the wall clock.
func (c *cli) clockNoteOn(s *session, brokerNow time.Time, subject, rest string) {
	if s.clockErr != nil {
		fmt.Fprintf(c.stderr, "%s: could not read %s\n", c.name, oneLine(clockPart(s.clockErr)))
		return
	}
	if !(s.TimeScale > 1) {
		return
	}
	wall := time.Now()
	if c.env.Wall != nil {
		wall = c.env.Wall()
	}
	fmt.Fprintf(c.stderr, "%s: %s on the development host's broker clock, which runs %g times faster than real time: it says %s, %s (--time-scale 1 keeps the two together)%s\n",
		c.name, subject, s.TimeScale, brokerNow.UTC().Format("15:04:05Z"), againstWatch(brokerNow.Sub(wall), wall), rest)
}

// clockPart names the broker's clock as a part that could not be read
// (err), and what the ages are against instead.
func clockPart(err error) string {
	return fmt.Sprintf("the development host's broker clock (%v; ages are against this machine's clock)", err)
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
