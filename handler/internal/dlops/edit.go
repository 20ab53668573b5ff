package dlops

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// Edit is what an operator changes in one replayed message; the zero Edit
// changes nothing. Each edit is checked against the message contract
// (deadletter.Validate) before anything is sent.
type Edit struct {
	// Set sets application properties; a value is read as the type of the
	// property it replaces (text for a new one).
	Set map[string]string
	// Remove removes application properties the message carries.
	Remove []string
	// Subject, when not "", replaces the subject.
	Subject string
	// Body, when not nil, replaces the body.
	Body []byte
}

// The fields of an EditError.
const (
	FieldSet     = "set"
	FieldRemove  = "remove"
	FieldSubject = "subject"
	FieldBody    = "body"
)

// EditError is an edit that cannot be made: Field (FieldSet, ...) and the
// property's Key say which.
type EditError struct {
	Field, Key, Why string
}

func (e *EditError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("property %q: %s", e.Key, e.Why)
	}
	return e.Why
}

// IsZero reports whether ed changes nothing.
func (ed *Edit) IsZero() bool {
	return ed == nil || len(ed.Set) == 0 && len(ed.Remove) == 0 && ed.Subject == "" && ed.Body == nil
}

// Check checks ed's form, before any message is read: keys, and what a
// replay sets itself (deadletter.PropReplayedFrom, PropReplayCount).
func (ed *Edit) Check() error {
	if ed.IsZero() {
		return nil
	}
	check := func(field, k string) error {
		switch {
		case strings.TrimSpace(k) == "":
			return &EditError{Field: field, Why: "a property needs a name"}
		case k == deadletter.PropReplayedFrom || k == deadletter.PropReplayCount:
			return &EditError{Field: field, Key: k, Why: "the replay sets it itself"}
		}
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(ed.Set)) {
		if err := check(FieldSet, k); err != nil {
			return err
		}
	}
	for _, k := range ed.Remove {
		if err := check(FieldRemove, k); err != nil {
			return err
		}
		if _, ok := ed.Set[k]; ok {
			return &EditError{Field: FieldRemove, Key: k, Why: "both set and removed"}
		}
	}
	if len(ed.Body) > dlstore.MaxBody {
		return &EditError{Field: FieldBody, Why: fmt.Sprintf("%d bytes, over Service Bus Standard's %d", len(ed.Body), dlstore.MaxBody)}
	}
	return nil
}

// apply makes ed on msg.
func (ed *Edit) apply(msg *broker.Message) error {
	if err := ed.Check(); err != nil {
		return err
	}
	props := maps.Clone(msg.ApplicationProperties)
	if props == nil {
		props = map[string]any{}
	}
	for _, k := range ed.Remove {
		if _, ok := props[k]; !ok {
			return &EditError{Field: FieldRemove, Key: k, Why: "the message has no such property"}
		}
		delete(props, k)
	}
	for _, k := range slices.Sorted(maps.Keys(ed.Set)) {
		v, err := typed(props[k], ed.Set[k])
		if err != nil {
			return &EditError{Field: FieldSet, Key: k, Why: err.Error()}
		}
		props[k] = v
	}
	if n := dlstore.PropertiesSize(props); n > dlstore.MaxProperties {
		return &EditError{Field: FieldSet, Why: fmt.Sprintf("the properties would be %d bytes, over Service Bus Standard's %d", n, dlstore.MaxProperties)}
	}
	msg.ApplicationProperties = props
	if ed.Subject != "" {
		msg.Subject = ed.Subject
	}
	if ed.Body != nil {
		msg.Body = append([]byte(nil), ed.Body...)
	}
	return nil
}

// typed reads s as the type of old, the value it replaces (nil: text).
func typed(old any, s string) (any, error) {
	v := strings.TrimSpace(s)
	want := func(x any, err error, what string) (any, error) {
		if err != nil {
			return nil, fmt.Errorf("%q: the message carries %s here; give one", s, what)
		}
		return x, nil
	}
	switch old.(type) {
	case int64:
		n, err := strconv.ParseInt(v, 10, 64)
		return want(n, err, "a whole number")
	case float64:
		f, err := strconv.ParseFloat(v, 64)
		return want(f, err, "a number")
	case bool:
		b, err := strconv.ParseBool(v)
		return want(b, err, "true or false")
	case time.Time:
		t, err := time.Parse(time.RFC3339Nano, v)
		return want(t.UTC(), err, "a time (RFC 3339)")
	}
	return s, nil
}

// describe says what ed changes, for the audit entry's detail.
func (ed *Edit) describe() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ed.Set)) {
		v := ed.Set[k]
		if utf8.RuneCountInString(v) > 60 {
			v = string([]rune(v)[:57]) + "..."
		}
		parts = append(parts, fmt.Sprintf("set %s=%q", k, v))
	}
	for _, k := range ed.Remove {
		parts = append(parts, "removed "+k)
	}
	if ed.Subject != "" {
		parts = append(parts, fmt.Sprintf("subject %q", ed.Subject))
	}
	if ed.Body != nil {
		parts = append(parts, fmt.Sprintf("body replaced (%d bytes)", len(ed.Body)))
	}
	return strings.Join(parts, "; ")
}

// hook is ed as deadletter's edit of a replay (nil: none).
func (ed *Edit) hook() deadletter.Edit {
	if ed.IsZero() {
		return nil
	}
	return ed.apply
}

// Preview returns the entry with id or MessageId id and the message a replay
// of it with ed would send now, checked as the replay checks it: an
// *EditError, or deadletter.ErrInvalidBody when the contract refuses it.
func (s Ops) Preview(ctx context.Context, id string, ed *Edit) (dlstore.Entry, broker.Message, error) {
	e, err := s.Find(ctx, id)
	if err != nil {
		return e, broker.Message{}, err
	}
	if err := deadletter.Allowed(e, deadletter.ActionReplay); err != nil {
		return e, broker.Message{}, err
	}
	msg := deadletter.ReplayMessage(e, nil)
	if ed.IsZero() {
		return e, msg, nil
	}
	if err := ed.apply(&msg); err != nil {
		return e, msg, err
	}
	if err := deadletter.Validate(msg); err != nil {
		return e, msg, fmt.Errorf("%w: %w", deadletter.ErrInvalidBody, err)
	}
	return e, msg, nil
}
