package hostenc

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

func TestEncodeTimerRoundTrip(t *testing.T) {
	for name, ti := range map[string]hostproto.TimerInfo{
		"canonical":          canonicalTimer(),
		"first run":          {AdjustForDST: true},
		"past due":           {IsPastDue: true, Last: time.Date(2026, 1, 1, 0, 0, 0, 100, time.UTC), Next: time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)},
		"only LastUpdated":   {LastUpdated: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		"zero everything":    {},
		"extremes of .NET's": {Last: time.Date(1, 1, 1, 0, 0, 0, 100, time.UTC), Next: time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := EncodeTimer(ti, timerBind, "DeadLetterSweeper", canonicalTimerNow)
			if err != nil {
				t.Fatal(err)
			}
			got, err := hostproto.DecodeTimer(b, timerBind)
			if err != nil {
				t.Fatalf("hostproto.DecodeTimer(%s): %v", b, err)
			}
			if got != ti {
				t.Errorf("round trip of %+v gives %+v (encoded %s)", ti, got, b)
			}
		})
	}
}

func TestEncodeTimerNullStatusAndTicks(t *testing.T) {
	b, err := EncodeTimer(hostproto.TimerInfo{AdjustForDST: true}, timerBind, "DeadLetterSweeper", canonicalTimerNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"ScheduleStatus":null`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("encoding %s lacks %s", b, want)
	}
	ti := hostproto.TimerInfo{Last: time.Date(2026, 11, 29, 10, 15, 0, 123456789, time.FixedZone("UTC+1", 3600))}
	b, err = EncodeTimer(ti, timerBind, "DeadLetterSweeper", canonicalTimerNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"Last":"2026-11-29T09:15:00.1234567+00:00"`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("encoding %s lacks %s (UTC, cut to 100 ns)", b, want)
	}
}

func TestEncodeTimerErrors(t *testing.T) {
	late := hostproto.TimerInfo{Next: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, tt := range []struct {
		name, binding, fn string
		ti                hostproto.TimerInfo
	}{
		{"empty binding", "", "DeadLetterSweeper", hostproto.TimerInfo{}},
		{"empty function", timerBind, "", hostproto.TimerInfo{}},
		{"Next after 9999", timerBind, "DeadLetterSweeper", late},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := EncodeTimer(tt.ti, tt.binding, tt.fn, canonicalTimerNow); err == nil {
				t.Errorf("EncodeTimer = %s, want an error", b)
			} else if !strings.HasPrefix(err.Error(), "hostenc: ") {
				t.Errorf("error %q does not start with hostenc:", err)
			}
		})
	}
}
