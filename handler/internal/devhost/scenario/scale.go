package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Scale actions: a scale line adds an instance of the app (a cold cache),
// removes one gracefully (SIGTERM: its running calls finish and its
// sessions are released), or kills one (SIGKILL: its session locks run
// out before another instance takes its sessions).
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
)

// scaleLine reads a line with a "scale" field:
//
//	{"scale":"add","sendAfter":"30s"}
//	{"scale":"remove","instance":"instance-2","sendAfter":"1m"}
//	{"scale":"kill","instance":1}
//
// instance (an id, or its number) names the instance to remove or kill
// (default: the newest running one); sendAfter holds it as it holds a
// message. Any other field is an error: a message field on a scale line is
// a mistake worth stopping for.
func (p *parser) scaleLine(obj map[string]json.RawMessage) (Line, error) {
	var l Line
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
		case fieldSendAfter:
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return Line{}, fmt.Errorf("%s: want a string, got %s", k, snippet(raw))
			}
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return Line{}, fmt.Errorf("%s %q: want a Go duration such as 30s, at least 0", k, s)
			}
			l.SendAfter = d
		default:
			return Line{}, fmt.Errorf("field %q on a scale line (it takes scale, instance and sendAfter only)", k)
		}
	}
	if l.Scale == ScaleAdd && l.Instance != "" {
		return Line{}, errors.New("instance on an add line (a new instance gets the next id)")
	}
	return l, nil
}
