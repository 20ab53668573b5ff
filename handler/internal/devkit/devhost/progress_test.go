package devhost

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
)

// progressQueue reads the queue's equation off a progress line: what came
// in, and each term it is said to be made of.
var (
	progressIn   = regexp.MustCompile(`queue: (\d+) in = (.*?) \|`)
	progressTerm = regexp.MustCompile(`^(\d+) ([a-z ]+?)(?: \(.*\))?$`)
)

func progressTerms(t *testing.T, line string) (in int, terms map[string]int) {
	t.Helper()
	m := progressIn.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("progress line without the queue's equation: %s", line)
	}
	in, _ = strconv.Atoi(m[1])
	terms = map[string]int{}
	for _, part := range strings.Split(m[2], " + ") {
		tm := progressTerm.FindStringSubmatch(part)
		if tm == nil {
			t.Fatalf("term %q of %s", part, line)
		}
		n, _ := strconv.Atoi(tm[1])
		terms[tm[2]] = n
	}
	return in, terms
}

// TestProgressAccountsForEveryMessage: a progress line says where every
// message sent to the queue is, in terms that add up to what was sent,
// while messages are still waiting, and names the poison queue's copies
// the sweeper took.
func TestProgressAccountsForEveryMessage(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(4), nil)
	up.set(func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, "Applied") })
	ctx := testCtx(t)
	scheduled := statusLine("o-3", "o-3:1", "Created", 1)
	scheduled.ScheduleAfter = 10 * time.Hour
	lines := []ScenarioLine{
		statusLine("o-1", "o-1:1", "Created", 1),
		statusLine("o-1", "o-1:1", "Created", 1), // dropped by duplicate detection
		statusLine("o-2", "o-2:1", "Created", 1),
		scheduled,
	}
	if err := h.Play(ctx, lines); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the two messages completed", func() bool {
		qt, qs := h.Broker().Snapshot(h.Queue())
		return qt.Completed == 2 && qs.Active+qs.Locked == 0
	})
	r := h.progress(3*time.Second, len(lines))
	in, terms := progressTerms(t, r.body)
	sum := 0
	for _, n := range terms {
		sum += n
	}
	want := map[string]int{"completed": 2, "dropped as a duplicate": 1, "waiting": 1}
	if in != 4 || sum != in || len(terms) != len(want) {
		t.Errorf("progress %q: %d in, terms %v adding up to %d; want 4 in = %v", r.body, in, terms, sum, want)
	}
	for k, n := range want {
		if terms[k] != n {
			t.Errorf("progress %q: %s %d, want %d", r.body, k, terms[k], n)
		}
	}
	for _, part := range []string{"workload 4/4 sent", "(1 scheduled)", "calls: Applied 2", "DLQ 0", "poison 0"} {
		if !strings.Contains(r.body, part) {
			t.Errorf("progress %q lacks %q", r.body, part)
		}
	}
	if !strings.Contains(r.idle, "waiting for 1 scheduled message, the next due in") {
		t.Errorf("idle %q: want what it waits for", r.idle)
	}

	// A parked copy taken by the sweeper stays in the line.
	if err := h.Broker().Send(ctx, h.PoisonQueue(), statusLine("o-9", "o-9:1:parked", "Created", 1).Message()); err != nil {
		t.Fatal(err)
	}
	src := broker.Source{Queue: h.PoisonQueue()}
	got, err := h.Broker().Receive(ctx, src, 1, time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive the parked copy: %v, %d", err, len(got))
	}
	if err := h.Broker().Complete(ctx, src, got[0]); err != nil {
		t.Fatal(err)
	}
	if r := h.progress(4*time.Second, len(lines)); !strings.Contains(r.body, "poison 0 (1 parked, 1 taken by the sweeper)") {
		t.Errorf("progress %q: want the parked copy the sweeper took", r.body)
	}
}

// TestProgressPrinterSkipsUnchangedLines: a line that says what the last
// one said is not printed; the first such says once why nothing changes.
func TestProgressPrinterSkipsUnchangedLines(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	p := &progressPrinter{w: &b}
	for i, body := range []string{"a", "a", "a", "b", "b", "a"} {
		p.print(progressReport{elapsed: time.Duration(i+1) * time.Second, body: body, idle: "waiting for 1 scheduled message"})
	}
	want := "[  1.0s] a\n" +
		"[  2.0s] no change; waiting for 1 scheduled message (not repeated until something changes)\n" +
		"[  4.0s] b\n" +
		"[  5.0s] no change; waiting for 1 scheduled message (not repeated until something changes)\n" +
		"[  6.0s] a\n"
	if b.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", b.String(), want)
	}
}
