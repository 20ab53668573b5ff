package wording

import (
	"testing"
	"time"
)

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "order", "0 orders"},
		{1, "order", "1 order"},
		{2, "order", "2 orders"},
		{1, "replay", "1 replay"},
		{3, "replay", "3 replays"},
		{-1, "message", "-1 messages"},
	} {
		if got := Count(tt.n, tt.noun); got != tt.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
}

func TestCountAs(t *testing.T) {
	for _, tt := range []struct {
		n         int
		one, many string
		want      string
	}{
		{0, "entry", "entries", "0 entries"},
		{1, "entry", "entries", "1 entry"},
		{2, "entry", "entries", "2 entries"},
		{1, "message or entry", "messages or entries", "1 message or entry"},
		{5, "message or entry", "messages or entries", "5 messages or entries"},
	} {
		if got := CountAs(tt.n, tt.one, tt.many); got != tt.want {
			t.Errorf("CountAs(%d, %q, %q) = %q, want %q", tt.n, tt.one, tt.many, got, tt.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{30 * time.Minute, "30m"}, {time.Hour, "1h"}, {90 * time.Minute, "1h30m"}, {45 * time.Second, "45s"},
		{29*time.Minute + 59*time.Second + 600*time.Millisecond, "30m"}, {11*time.Minute + 5*time.Second, "11m5s"},
	} {
		if got := Duration(tt.d); got != tt.want {
			t.Errorf("Duration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
