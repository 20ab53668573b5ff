package hostenc

import (
	"errors"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

type timerData struct {
	Schedule       timerSchedule   `json:"Schedule"`
	ScheduleStatus *scheduleStatus `json:"ScheduleStatus"`
	IsPastDue      bool            `json:"IsPastDue"`
}

type timerSchedule struct {
	AdjustForDST bool `json:"AdjustForDST"`
}

type scheduleStatus struct {
	Last        string `json:"Last"`
	Next        string `json:"Next"`
	LastUpdated string `json:"LastUpdated"`
}

// EncodeTimer encodes t as the host invokes functionName at time now for a
// timer binding named binding, as hostproto.DecodeTimer reads it back:
// Data.<binding> is the TimerInfo (ScheduleStatus null when all its times
// are zero), Metadata only sys; times as Json.NET writes a local DateTime on
// a UTC machine (100 ns precision, "+00:00"). It fails on an empty binding
// or functionName, or a time outside the years 1 to 9999.
func EncodeTimer(t hostproto.TimerInfo, binding, functionName string, now time.Time) ([]byte, error) {
	if binding == "" {
		return nil, errors.New("hostenc: binding name is empty")
	}
	d := timerData{Schedule: timerSchedule{AdjustForDST: t.AdjustForDST}, IsPastDue: t.IsPastDue}
	if !t.Last.IsZero() || !t.Next.IsZero() || !t.LastUpdated.IsZero() {
		d.ScheduleStatus = &scheduleStatus{}
		for _, f := range []struct {
			dst  *string
			name string
			t    time.Time
		}{{&d.ScheduleStatus.Last, "Last", t.Last}, {&d.ScheduleStatus.Next, "Next", t.Next}, {&d.ScheduleStatus.LastUpdated, "LastUpdated", t.LastUpdated}} {
			var err error
			if *f.dst, err = formatTime("ScheduleStatus."+f.name, f.t, formatNetOffset); err != nil {
				return nil, err
			}
		}
	}
	sys, err := newSys(functionName, now)
	if err != nil {
		return nil, err
	}
	return marshal(struct {
		Data     map[string]timerData `json:"Data"`
		Metadata map[string]sysData   `json:"Metadata"`
	}{
		Data:     map[string]timerData{binding: d},
		Metadata: map[string]sysData{"sys": sys},
	})
}
