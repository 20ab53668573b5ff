package hostproto

import (
	"errors"
	"testing"
	"time"
)

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
