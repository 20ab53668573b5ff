package hostproto

// For the round-trip tests of package hostproto_test, which encode with
// the development host's package hostenc (this package's own tests cannot
// import it: it imports this package).
var (
	AddGoldenSeeds   = addGoldenSeeds
	AssertMessage    = assertMessage
	CanonicalMessage = canonicalMessage
)

const (
	ServiceBusBind = serviceBusBind
	TimerBind      = timerBind
)
