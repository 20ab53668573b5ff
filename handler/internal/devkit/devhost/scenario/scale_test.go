package scenario

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseScaleLines(t *testing.T) {
	tests := []struct {
		in   string
		want Line
	}{
		{`{"scale":"add","sendAfter":"30s"}`, Line{Scale: ScaleAdd, SendAfter: 30 * time.Second}},
		{`{"Scale":"remove","instance":"OrderStatus-2"}`, Line{Scale: ScaleRemove, Instance: "OrderStatus-2"}},
		{`{"scale":"add","group":"DeadLetterSweeper"}`, Line{Scale: ScaleAdd, Instance: "DeadLetterSweeper"}},
		{`{"scale":"kill","Group":"http","sendAfter":"1m"}`, Line{Scale: ScaleKill, Instance: "http", SendAfter: time.Minute}},
		{`{"scale":"kill","instance":1,"sendAfter":"2m"}`, Line{Scale: ScaleKill, Instance: "1", SendAfter: 2 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			lines, err := Parse(strings.NewReader(tt.in+"\n"), "w.jsonl", nil)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Pos = "w.jsonl:1"
			if len(lines) != 1 || lines[0].Scale != tt.want.Scale || lines[0].Instance != tt.want.Instance ||
				lines[0].SendAfter != tt.want.SendAfter || lines[0].Pos != tt.want.Pos || lines[0].SessionID != "" {
				t.Errorf("got %+v, want %+v", lines, tt.want)
			}
		})
	}
}

func TestParseScaleLineErrors(t *testing.T) {
	for _, in := range []string{
		`{"scale":"grow"}`,
		`{"scale":3}`,
		`{"scale":"add","instance":"OrderStatus-1"}`,
		`{"scale":"kill","instance":"OrderStatus-1","group":"OrderStatus"}`,
		`{"scale":"add","group":""}`,
		`{"scale":"add","group":2}`,
		`{"scale":"kill","instance":0}`,
		`{"scale":"kill","sendAfter":"soon"}`,
		`{"scale":"kill","sessionId":"o-1"}`,
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
