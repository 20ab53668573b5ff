package msgutil_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/internal/msgutil"
)

func TestValue(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))
	tests := []struct {
		in, want any
	}{
		{"s", "s"}, {true, true}, {int64(-1), int64(-1)}, {2.5, 2.5},
		{7, int64(7)}, {int32(-7), int64(-7)}, {uint16(7), int64(7)}, {uint8(7), int64(7)},
		{float32(0.25), 0.25}, {[]byte("b"), "b"},
		{at, time.Date(2026, 1, 2, 2, 4, 5, 123000000, time.UTC)},
		{time.Second, "1s"}, {uint64(1) << 63, "9223372036854775808"}, {nil, "<nil>"},
	}
	for _, tc := range tests {
		if got := msgutil.Value(tc.in); got != tc.want {
			t.Errorf("Value(%#v) = %#v (%T), want %#v (%T)", tc.in, got, got, tc.want, tc.want)
		}
	}
}

func TestMessageDeepCopy(t *testing.T) {
	in := broker.Message{Body: []byte("b"), ApplicationProperties: map[string]any{"k": "v"}}
	out := msgutil.Message(in)
	out.Body[0] = 'X'
	out.ApplicationProperties["k"] = "changed"
	if string(in.Body) != "b" || in.ApplicationProperties["k"] != "v" {
		t.Error("Message shares the body or the properties")
	}
	if got := msgutil.Message(broker.Message{ApplicationProperties: map[string]any{}}); got.ApplicationProperties != nil {
		t.Errorf("empty properties = %#v, want nil", got.ApplicationProperties)
	}
}

func TestNewID(t *testing.T) {
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := msgutil.NewID(), msgutil.NewID()
	if !uuid4.MatchString(a) || a == b {
		t.Errorf("NewID = %q, %q; want two different version 4 UUIDs", a, b)
	}
}
