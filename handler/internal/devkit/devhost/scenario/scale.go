package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Scale actions: add an instance to a group (a cold cache), remove one
// gracefully (SIGTERM) or kill one (SIGKILL: its session locks run out).
const (
	ScaleAdd    = "add"
	ScaleRemove = "remove"
	ScaleKill   = "kill"
)

// IsScaleAction reports whether a is one of the scale actions.
func IsScaleAction(a string) bool { return a == ScaleAdd || a == ScaleRemove || a == ScaleKill }

// Fields of a scale line, by their lower-case name.
const (
	fieldScale    = "scale"
	fieldInstance = "instance"
	fieldGroup    = "group"
)

// scaleLine reads a line with a "scale" field, such as
//
//	{"scale":"remove","instance":"OrderStatus-2","sendAfter":"1m"}
//	{"scale":"kill","group":"http"}
//
// group (default: the function on the workload queue) or instance (an id, or a
// number of the default group's) names the target. Any other field is an error.
func (p *parser) scaleLine(obj map[string]json.RawMessage) (Line, error) {
	var l Line
	var group string
	for k, raw := range obj {
		switch strings.ToLower(k) {
		case fieldScale:
			if err := json.Unmarshal(raw, &l.Scale); err != nil || !IsScaleAction(l.Scale) {
				return Line{}, fmt.Errorf("%s: want \"add\", \"remove\" or \"kill\", got %s", k, snippet(raw))
			}
		case fieldInstance:
			var n int
			switch {
			case json.Unmarshal(raw, &l.Instance) == nil:
			case json.Unmarshal(raw, &n) == nil && n > 0:
				l.Instance = strconv.Itoa(n)
			default:
				return Line{}, fmt.Errorf("%s: want an instance id or number, got %s", k, snippet(raw))
			}
		case fieldGroup:
			if err := json.Unmarshal(raw, &group); err != nil || group == "" {
				return Line{}, fmt.Errorf("%s: want a group name such as \"OrderStatus\" or \"http\", got %s", k, snippet(raw))
			}
		case fieldSendAfter:
			var err error
			if l.SendAfter, err = parseDuration(k, raw); err != nil {
				return Line{}, err
			}
		default:
			return Line{}, fmt.Errorf("field %q on a scale line (it takes scale, instance, group and sendAfter only)", k)
		}
	}
	switch {
	case l.Scale == ScaleAdd && l.Instance != "":
		return Line{}, errors.New("instance on an add line (a new instance gets the next id; name its group with \"group\")")
	case group != "" && l.Instance != "":
		return Line{}, errors.New("both instance and group on a scale line: name one")
	case group != "":
		l.Instance = group
	}
	return l, nil
}
