package devhost

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Flex Consumption scales per function: HTTP triggers together as one group,
// every other function on independent instances
// (articles/azure-functions/event-driven-scaling.md, per-function scaling;
// the Flex Consumption plan page names the groups http and function:<NAME>).

// HTTPGroup is the key of the group that runs every HTTP function.
const HTTPGroup = "http"

// ErrUnknownGroup: an instance count or scale event names no group of the app.
var ErrUnknownGroup = errors.New("devhost: no such instance group")

// group is the instances Flex Consumption scales together, and what they run.
type group struct {
	// key is what --instances and --scale name; instance ids are key-<n>.
	key string
	// name is Flex's: "http" or "function:<NAME>".
	name     string
	sessions []*sessionDispatcher
	timers   []*timerDispatcher
	routes   []route
	started  int // instances started or starting, for their ids (pool.mu)
}

// instanceID is the id of the group's n-th instance.
func (g *group) instanceID(n int) string { return g.key + "-" + strconv.Itoa(n) }

// groupOf returns the group with key, creating it.
func (h *Host) groupOf(key string) *group {
	if i := slices.IndexFunc(h.groups, func(g *group) bool { return g.key == key }); i >= 0 {
		return h.groups[i]
	}
	g := &group{key: key, name: "function:" + key}
	if key == HTTPGroup {
		g.name = HTTPGroup
	}
	h.groups = append(h.groups, g)
	return g
}

// group returns the group named key, in any case ("" for the default); nil if none.
func (h *Host) group(key string) *group {
	if key == "" {
		return h.defaultGroup()
	}
	for _, g := range h.groups {
		if strings.EqualFold(g.key, key) || strings.EqualFold(g.name, key) {
			return g
		}
	}
	return nil
}

// defaultGroup is the group a plain --instances N means: the function on the
// workload queue, else the first non-HTTP group, else the HTTP group.
func (h *Host) defaultGroup() *group {
	for _, g := range h.groups {
		for _, d := range g.sessions {
			if d.queue == h.queue {
				return g
			}
		}
	}
	for _, g := range h.groups {
		if g.key != HTTPGroup {
			return g
		}
	}
	if len(h.groups) > 0 {
		return h.groups[0]
	}
	return nil
}

// readGroup is the group the front and the summary read through (HTTP, else the default).
func (h *Host) readGroup() *group {
	if g := h.group(HTTPGroup); g != nil {
		return g
	}
	return h.defaultGroup()
}

// Groups returns the keys of the app's instance groups, the default group first.
func (h *Host) Groups() []string {
	var out []string
	if d := h.defaultGroup(); d != nil {
		out = append(out, d.key)
	}
	for _, g := range h.groups {
		if !slices.Contains(out, g.key) {
			out = append(out, g.key)
		}
	}
	return out
}

// groupKeys lists the group keys for an error message.
func (h *Host) groupKeys() string { return strings.Join(h.Groups(), ", ") }

// startCounts returns how many instances each group starts with; a key the
// app does not have fails with ErrUnknownGroup.
func (h *Host) startCounts() (map[*group]int, error) {
	counts := map[*group]int{}
	for _, g := range h.groups {
		counts[g] = 1
	}
	if d := h.defaultGroup(); d != nil {
		counts[d] = h.opts.Instances
	}
	for _, k := range slices.Sorted(maps.Keys(h.opts.GroupInstances)) {
		g := h.group(k)
		if g == nil || k == "" {
			return nil, fmt.Errorf("%w: %q (the app's groups: %s)", ErrUnknownGroup, k, h.groupKeys())
		}
		n := h.opts.GroupInstances[k]
		if n < 1 || n > MaxInstances {
			return nil, fmt.Errorf("devhost: %s=%d instances: want 1 to %d", k, n, MaxInstances)
		}
		counts[g] = n
	}
	return counts, nil
}

// InstanceCounts is the value of --instances: N, or KEY=N pairs (KEY a group key).
type InstanceCounts struct {
	Default int            // 0: one
	ByGroup map[string]int // by group key
}

// ParseInstances reads --instances: "3" (the default group), or "OrderStatus=3,http=2".
func ParseInstances(s string) (InstanceCounts, error) {
	var c InstanceCounts
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > MaxInstances {
			return c, fmt.Errorf("%d: want 1 to %d", n, MaxInstances)
		}
		c.Default = n
		return c, nil
	}
	c.ByGroup = map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		key, v, ok := strings.Cut(part, "=")
		key = strings.TrimSpace(key)
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case !ok || key == "" || err != nil:
			return c, fmt.Errorf("%q: want a number, or GROUP=N pairs such as OrderStatus=3,http=2", part)
		case n < 1 || n > MaxInstances:
			return c, fmt.Errorf("%s: want 1 to %d", part, MaxInstances)
		}
		if _, dup := c.ByGroup[key]; dup {
			return c, fmt.Errorf("%s named twice", key)
		}
		c.ByGroup[key] = n
	}
	return c, nil
}

// slots returns the session slots on queue q over the running instances that take its sessions.
func (h *Host) slots(q string) int {
	n := 0
	for _, d := range h.sessions {
		if d.queue == q {
			n += max(1, d.workers) * len(h.pool.runningIn(d.g))
		}
	}
	return n
}
