package devhost

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Flex Consumption scales per function: "except for HTTP triggers, Blob
// (Event Grid) triggers, and Durable Functions, all other function trigger
// types in your app scale on independent instances. HTTP triggers in your
// app all scale together as a group on the same instances"
// (articles/azure-functions/event-driven-scaling.md, per-function scaling;
// the Flex Consumption plan page names the groups http and
// function:<NAME>). The development host runs the app the same way: one
// group of instances for all HTTP functions and one per other function,
// each instance with its own handler process, cache and metrics, so that
// GET /api/metrics answers from an HTTP instance, which never runs a
// message or a timer, as it does in Azure.

// HTTPGroup is the key of the group that runs every HTTP function.
const HTTPGroup = "http"

// ErrUnknownGroup: an instance count or a scale event names a group the
// app does not have.
var ErrUnknownGroup = errors.New("devhost: no such instance group")

// group is the instances Flex Consumption scales together, and what runs
// on each of them.
type group struct {
	// key is what --instances and --scale name: HTTPGroup, or the
	// function's name; instance ids are key-<n>.
	key string
	// name is Flex's: "http" or "function:<NAME>".
	name     string
	sessions []*sessionDispatcher
	plain    []*queueDispatcher
	timers   []*timerDispatcher
	routes   []route
	started  int // instances started or starting, for their ids (pool.mu)
}

func newGroup(key string) *group {
	name := HTTPGroup
	if key != HTTPGroup {
		name = "function:" + key
	}
	return &group{key: key, name: name}
}

// instanceID is the id of the group's n-th instance.
func (g *group) instanceID(n int) string { return g.key + "-" + strconv.Itoa(n) }

// groupOf returns the group with key, creating it.
func (h *Host) groupOf(key string) *group {
	for _, g := range h.groups {
		if g.key == key {
			return g
		}
	}
	g := newGroup(key)
	h.groups = append(h.groups, g)
	return g
}

// group returns the group named key ("" for the default group), nil if
// the app has none of that name. Keys are matched without regard to case,
// as the host matches function names.
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

// defaultGroup is the group a plain --instances N and an unnamed scale
// event mean: the function on the workload queue, the one a user scales
// out; else the first group without HTTP, else the HTTP group.
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

// readGroup is the group whose handlers the front and the summary's reads
// use: the HTTP group; an app without HTTP functions (a test app) reads
// through its default group.
func (h *Host) readGroup() *group {
	if g := h.group(HTTPGroup); g != nil {
		return g
	}
	return h.defaultGroup()
}

// Groups returns the keys of the app's instance groups, the default group
// first.
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

// startCounts returns how many instances each group starts with:
// Options.Instances for the default group, Options.GroupInstances by key,
// one for any other. It fails with ErrUnknownGroup for a key the app does
// not have.
func (h *Host) startCounts() (map[*group]int, error) {
	counts := map[*group]int{}
	for _, g := range h.groups {
		counts[g] = 1
	}
	if d := h.defaultGroup(); d != nil {
		counts[d] = h.opts.Instances
	}
	keys := make([]string, 0, len(h.opts.GroupInstances))
	for k := range h.opts.GroupInstances {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
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

// InstanceCounts is the value of --instances: N (the default group's
// instances at the start) or KEY=N pairs, comma-separated, where KEY is
// http or a function's name.
type InstanceCounts struct {
	Default int            // 0: one
	ByGroup map[string]int // by group key
}

// ParseInstances reads --instances: "3", or "OrderStatus=3,http=2". A
// plain number is the default group's (the function on the workload
// queue); a group not named starts with one instance.
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
		if c.ByGroup == nil {
			c.ByGroup = map[string]int{}
		}
		if _, dup := c.ByGroup[key]; dup {
			return c, fmt.Errorf("%s named twice", key)
		}
		c.ByGroup[key] = n
	}
	return c, nil
}

// slots returns the session slots on queue q over the running instances
// of the groups whose functions take its sessions, and whether q has
// sessions at all.
func (h *Host) slots(q string) (int, bool) {
	n, any := 0, false
	for _, d := range h.sessions {
		if d.queue == q {
			any = true
			n += max(1, d.workers) * len(h.pool.runningIn(d.g))
		}
	}
	return n, any
}
