package dlops

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
)

// An edit reads each value as the type of the property it replaces (text
// for a new one), removes only what the message carries, never touches
// what the replay sets itself, and says what it changed.
func TestEdit(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	base := func() broker.Message {
		return broker.Message{Subject: "S", Body: []byte("b"), ApplicationProperties: map[string]any{
			"n": int64(1), "f": 1.5, "b": false, "t": at, "s": "x", "gone": "y"}}
	}
	ed := &Edit{Set: map[string]string{"n": " 7", "f": "2.5", "b": "true", "t": "2026-12-02T10:00:00+01:00", "s": "z", "new": "42"},
		Remove: []string{"gone"}, Subject: "T", Body: []byte("{}")}
	msg := base()
	if err := ed.apply(&msg); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": int64(7), "f": 2.5, "b": true, "t": at.Add(24 * time.Hour), "s": "z", "new": "42"}
	for k, v := range want {
		if got := msg.ApplicationProperties[k]; got != v {
			t.Errorf("property %s = %#v, want %#v", k, got, v)
		}
	}
	if _, ok := msg.ApplicationProperties["gone"]; ok || msg.Subject != "T" || string(msg.Body) != "{}" || len(msg.ApplicationProperties) != len(want) {
		t.Errorf("edited message %+v", msg)
	}
	if d := ed.describe(); d != `set b="true"; set f="2.5"; set n=" 7"; set new="42"; set s="z"; set t="2026-12-02T10:00:00+01:00"; removed gone; subject "T"; body replaced (2 bytes)` {
		t.Errorf("describe = %s", d)
	}
	if orig := base(); orig.ApplicationProperties["n"] != int64(1) {
		t.Error("apply changed the properties it was given")
	}

	for _, tc := range []struct {
		ed    Edit
		field string
	}{
		{Edit{Set: map[string]string{"n": "seven"}}, FieldSet},
		{Edit{Set: map[string]string{"b": "maybe"}}, FieldSet},
		{Edit{Set: map[string]string{"t": "tomorrow"}}, FieldSet},
		{Edit{Set: map[string]string{deadletter.PropReplayCount: "1"}}, FieldSet},
		{Edit{Set: map[string]string{" ": "1"}}, FieldSet},
		{Edit{Remove: []string{deadletter.PropReplayedFrom}}, FieldRemove},
		{Edit{Remove: []string{"absent"}}, FieldRemove},
		{Edit{Set: map[string]string{"s": "1"}, Remove: []string{"s"}}, FieldRemove},
		{Edit{Set: map[string]string{"big": strings.Repeat("x", 70<<10)}}, FieldSet},
		{Edit{Body: make([]byte, 300<<10)}, FieldBody},
	} {
		msg := base()
		var ee *EditError
		if err := tc.ed.apply(&msg); !errors.As(err, &ee) || ee.Field != tc.field {
			t.Errorf("%+v: %v, want an EditError of %s", tc.ed.Set, err, tc.field)
		}
		if msg.ApplicationProperties["n"] != int64(1) || len(msg.ApplicationProperties) != 6 {
			t.Errorf("a refused edit changed the message: %v", msg.ApplicationProperties)
		}
	}
	if !(*Edit)(nil).IsZero() || !(&Edit{}).IsZero() || (&Edit{Body: []byte{}}).IsZero() {
		t.Error("IsZero: nil and Edit{} change nothing; an empty body does")
	}
}
