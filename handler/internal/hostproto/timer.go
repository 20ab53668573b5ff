package hostproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// TimerInfo is a timer trigger's TimerInfo. Times are in UTC.
type TimerInfo struct {
	// IsPastDue reports that the invocation runs later than scheduled.
	IsPastDue bool
	// AdjustForDST is the schedule's daylight-saving adjustment flag.
	AdjustForDST bool
	// Last, Next and LastUpdated come from the schedule monitor; all are
	// zero when ScheduleStatus is null (first run, or useMonitor false).
	Last, Next, LastUpdated time.Time
}

// DecodeTimer decodes an invocation of a timer trigger whose binding is
// named binding. Data.<binding> must be the TimerInfo object
// {"Schedule":{"AdjustForDST":..},"ScheduleStatus":{..} or null,
// "IsPastDue":..}, leniently also a JSON string holding it. Missing and
// null members give zero values; the times take any form parseTime accepts
// (the host's zone suffix there is not confirmed). Metadata is not read.
// Errors are *DecodeError naming the key.
func DecodeTimer(body []byte, binding string) (TimerInfo, error) {
	inv, err := DecodeInvocation(body)
	if err != nil {
		return TimerInfo{}, err
	}
	key := "Data." + binding
	raw, ok := inv.Data[binding]
	if !ok || isNull(raw) {
		return TimerInfo{}, decodeErr(key, "missing (is the trigger's binding named %q?)", binding)
	}
	if s, ok := jsonString(raw); ok {
		raw = json.RawMessage(s)
	}
	var v struct {
		Schedule       *struct{ AdjustForDST json.RawMessage }
		ScheduleStatus *struct{ Last, Next, LastUpdated json.RawMessage }
		IsPastDue      json.RawMessage
	}
	if err := decodeJSONObject(raw, &v); err != nil {
		return TimerInfo{}, &DecodeError{Key: key, Err: err}
	}
	var t TimerInfo
	if t.IsPastDue, err = rawBool(v.IsPastDue, key+".IsPastDue"); err != nil {
		return TimerInfo{}, err
	}
	if v.Schedule != nil {
		if t.AdjustForDST, err = rawBool(v.Schedule.AdjustForDST, key+".Schedule.AdjustForDST"); err != nil {
			return TimerInfo{}, err
		}
	}
	if st := v.ScheduleStatus; st != nil {
		for _, f := range []struct {
			dst  *time.Time
			name string
			raw  json.RawMessage
		}{{&t.Last, "Last", st.Last}, {&t.Next, "Next", st.Next}, {&t.LastUpdated, "LastUpdated", st.LastUpdated}} {
			if *f.dst, err = rawTime(f.raw, key+".ScheduleStatus."+f.name); err != nil {
				return TimerInfo{}, err
			}
		}
	}
	return t, nil
}

// decodeJSONObject decodes raw, which must be a JSON object, into v.
func decodeJSONObject(raw json.RawMessage, v any) error {
	if t := bytes.TrimLeft(raw, jsonSpace); len(t) == 0 || t[0] != '{' {
		return errors.New("want a JSON object, got " + snippetJSON(raw))
	}
	return json.Unmarshal(raw, v)
}

// rawBool decodes a JSON boolean; absent and null give false.
func rawBool(raw json.RawMessage, key string) (bool, error) {
	if isNull(raw) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, decodeErr(key, "want true or false, got %s", snippetJSON(raw))
	}
	return b, nil
}
