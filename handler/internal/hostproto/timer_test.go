package hostproto

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEncodeTimerRoundTrip(t *testing.T) {
	for name, ti := range map[string]TimerInfo{
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
			got, err := DecodeTimer(b, timerBind)
			if err != nil {
				t.Fatalf("DecodeTimer(%s): %v", b, err)
			}
			if got != ti {
				t.Errorf("round trip of %+v gives %+v (encoded %s)", ti, got, b)
			}
		})
	}
}

func TestEncodeTimerNullStatusAndTicks(t *testing.T) {
	b, err := EncodeTimer(TimerInfo{AdjustForDST: true}, timerBind, "DeadLetterSweeper", canonicalTimerNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"ScheduleStatus":null`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("encoding %s lacks %s", b, want)
	}
	ti := TimerInfo{Last: time.Date(2026, 11, 29, 10, 15, 0, 123456789, time.FixedZone("UTC+1", 3600))}
	b, err = EncodeTimer(ti, timerBind, "DeadLetterSweeper", canonicalTimerNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"Last":"2026-11-29T09:15:00.1234567+00:00"`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("encoding %s lacks %s (UTC, cut to 100 ns)", b, want)
	}
}

// TestDecodeTimerLenientInfoAsString: TimerInfo is a nested object; a JSON
// string holding it (the host's fallback when an object does not convert)
// is accepted too.
func TestDecodeTimerLenientInfoAsString(t *testing.T) {
	body := `{"Data":{"timer":"{\"Schedule\":{\"AdjustForDST\":true},\"ScheduleStatus\":{\"Last\":\"2026-11-29T10:15:00\",\"Next\":\"2026-11-29T10:25:00Z\",\"LastUpdated\":\"2026-11-29T11:15:00+01:00\"},\"IsPastDue\":true}"}}`
	got, err := DecodeTimer([]byte(body), timerBind)
	if err != nil {
		t.Fatal(err)
	}
	at := func(m int) time.Time { return time.Date(2026, 11, 29, 10, m, 0, 0, time.UTC) }
	if want := (TimerInfo{IsPastDue: true, AdjustForDST: true, Last: at(15), Next: at(25), LastUpdated: at(15)}); got != want {
		t.Errorf("DecodeTimer = %+v, want %+v", got, want)
	}
}

func TestDecodeTimerErrors(t *testing.T) {
	tests := []struct {
		name, body, wantKey string
	}{
		{"not an object", `[]`, "body"},
		{"missing", `{"Data":{}}`, "Data.timer"},
		{"null", `{"Data":{"timer":null}}`, "Data.timer"},
		{"a number", `{"Data":{"timer":5}}`, "Data.timer"},
		{"a string of garbage", `{"Data":{"timer":"x"}}`, "Data.timer"},
		{"Schedule a string", `{"Data":{"timer":{"Schedule":"0 */5 * * * *"}}}`, "Data.timer"},
		{"IsPastDue a string", `{"Data":{"timer":{"IsPastDue":"true"}}}`, "Data.timer.IsPastDue"},
		{"AdjustForDST a number", `{"Data":{"timer":{"Schedule":{"AdjustForDST":1}}}}`, "Data.timer.Schedule.AdjustForDST"},
		{"Next not a time", `{"Data":{"timer":{"ScheduleStatus":{"Next":"soon"}}}}`, "Data.timer.ScheduleStatus.Next"},
		{"Last a number", `{"Data":{"timer":{"ScheduleStatus":{"Last":0}}}}`, "Data.timer.ScheduleStatus.Last"},
		{"LastUpdated past 9999", `{"Data":{"timer":{"ScheduleStatus":{"LastUpdated":"9999-12-31T23:59:59-01:00"}}}}`, "Data.timer.ScheduleStatus.LastUpdated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeTimer([]byte(tt.body), timerBind)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeTimer = %+v, %v; want a *DecodeError for %s", got, err, tt.wantKey)
			}
			if de.Key != tt.wantKey {
				t.Errorf("error key = %q, want %q (error %v)", de.Key, tt.wantKey, err)
			}
			if got != (TimerInfo{}) {
				t.Errorf("DecodeTimer returned %+v with its error, want the zero value", got)
			}
		})
	}
}

func TestEncodeTimerErrors(t *testing.T) {
	late := TimerInfo{Next: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, tt := range []struct {
		name, binding, fn string
		ti                TimerInfo
	}{
		{"empty binding", "", "DeadLetterSweeper", TimerInfo{}},
		{"empty function", timerBind, "", TimerInfo{}},
		{"Next after 9999", timerBind, "DeadLetterSweeper", late},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := EncodeTimer(tt.ti, tt.binding, tt.fn, canonicalTimerNow); err == nil {
				t.Errorf("EncodeTimer = %s, want an error", b)
			} else if !strings.HasPrefix(err.Error(), "hostproto: ") {
				t.Errorf("error %q does not start with hostproto:", err)
			}
		})
	}
}
