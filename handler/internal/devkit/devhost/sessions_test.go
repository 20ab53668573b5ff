package devhost

import (
	"testing"
	"time"
)

func TestSessionOverrides(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		over      SessionOverrides
		wantSlots int
		wantIdle  time.Duration
	}{
		{"host.json", SessionOverrides{}, 64, time.Second},
		{"both", SessionOverrides{MaxConcurrentSessions: 64, SessionIdleTimeout: 200 * time.Millisecond}, 64, 200 * time.Millisecond},
		{"slots only", SessionOverrides{MaxConcurrentSessions: 1}, 1, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := New(Options{AppRoot: repoRoot, Env: []string{}, HTTPAddr: "off", Sessions: tt.over})
			if err != nil {
				t.Fatal(err)
			}
			if len(h.sessions) != 1 {
				t.Fatalf("%d session dispatchers, want 1", len(h.sessions))
			}
			if d := h.sessions[0]; d.workers != tt.wantSlots || d.idle != tt.wantIdle {
				t.Errorf("dispatcher has %d slots, idle %v; want %d, %v", d.workers, d.idle, tt.wantSlots, tt.wantIdle)
			}
		})
	}
}
