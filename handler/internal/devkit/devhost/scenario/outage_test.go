package scenario

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseOutageLines(t *testing.T) {
	tests := []struct {
		in   string
		want Line
	}{
		{`{"outage":"table","sendAfter":"2m","duration":"30m"}`, Line{Outage: OutageTable, SendAfter: 2 * time.Minute, Duration: 30 * time.Minute}},
		{`{"Outage":"servicebus","Duration":"90s"}`, Line{Outage: OutageServiceBus, Duration: 90 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			lines, err := Parse(strings.NewReader(tt.in+"\n"), "w.jsonl", nil)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Pos = "w.jsonl:1"
			if len(lines) != 1 || lines[0].Outage != tt.want.Outage || lines[0].Duration != tt.want.Duration ||
				lines[0].SendAfter != tt.want.SendAfter || lines[0].Pos != tt.want.Pos || lines[0].IsMessage() {
				t.Errorf("got %+v, want %+v", lines, tt.want)
			}
		})
	}
}

func TestParseOutageLineErrors(t *testing.T) {
	for _, in := range []string{
		`{"outage":"blob","duration":"1m"}`,
		`{"outage":1,"duration":"1m"}`,
		`{"outage":"table"}`,
		`{"outage":"table","duration":"0s"}`,
		`{"outage":"table","duration":30}`,
		`{"outage":"table","duration":"-1m"}`,
		`{"outage":"table","duration":"1m","sendAfter":"soon"}`,
		`{"outage":"table","duration":"1m","sessionId":"o-1"}`,
		`{"outage":"table","duration":"1m","scale":"add"}`,
	} {
		t.Run(in, func(t *testing.T) {
			_, err := Parse(strings.NewReader(in+"\n"), "w.jsonl", nil)
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, ErrSyntax) || le.Pos != "w.jsonl:1" {
				t.Errorf("Parse(%s) = %v, want a LineError at w.jsonl:1", in, err)
			}
		})
	}
}

func TestParseOutages(t *testing.T) {
	got, err := ParseOutages("table@2m+30m, servicebus@0s+5m")
	if err != nil {
		t.Fatal(err)
	}
	want := []Line{
		{Outage: OutageTable, SendAfter: 2 * time.Minute, Duration: 30 * time.Minute, Pos: "--outage table@2m+30m"},
		{Outage: OutageServiceBus, Duration: 5 * time.Minute, Pos: "--outage servicebus@0s+5m"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Outage != want[i].Outage || got[i].SendAfter != want[i].SendAfter || got[i].Duration != want[i].Duration || got[i].Pos != want[i].Pos {
			t.Errorf("outage %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"", "table", "table@2m", "blob@2m+1m", "table@soon+1m", "table@-1m+1m", "table@2m+0s", "table@2m+x", "table@2m+30m,"} {
		if _, err := ParseOutages(bad); err == nil {
			t.Errorf("ParseOutages(%q): no error", bad)
		}
	}
}
