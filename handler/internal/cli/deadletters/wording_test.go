package deadletters

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/order"
)

// Every count the commands print agrees with its number: "1 dead letter
// matches", "2 dead letters match", "would replay 1 dead letter", "1 of
// them is left alone", never "1 dead letters" (package wording words
// them). The lines of a bulk action's count, sample, question, refusals,
// dry run and closing count are run for 1 and for 2 of each.
func TestCountsAgreeWithTheirNumber(t *testing.T) {
	for _, tc := range []struct {
		n    int
		bad  *regexp.Regexp
		want []string
	}{
		{1, regexp.MustCompile(`(^|[^0-9.])1 (` + `(dead )?letters|entries|messages|replays|orders|groups` + `)\b|\b1 dead letter match\b|\b1 of them are\b|takes none of them`),
			[]string{"1 dead letter matches", "would archive 1 dead letter;", "would replay 1 dead letter;", "discard 1 dead letter? [y/N]",
				"1 of them is left alone", "does not take it in its state"}},
		{2, regexp.MustCompile(`(^|[^0-9.])2 (dead letter|letter|entry|message|replay|order|group)\b|\b2 dead letters matches\b|\b2 of them is\b`),
			[]string{"2 dead letters match", "would archive 2 dead letters;", "would replay 2 dead letters;", "discard 2 dead letters? [y/N]",
				"2 of them are left alone", "takes none of them in their state"}},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			f := newFixture(t)
			for i := range tc.n {
				f.put(dlstore.Poison, int64(i+1), fmt.Sprintf("o-%d:3:parked", i), fmt.Sprintf("o-%d", i), order.ReasonInvalidTransition, "x")
				gone := f.put(dlstore.Poison, int64(100+i), fmt.Sprintf("g-%d:3:parked", i), fmt.Sprintf("g-%d", i), order.ReasonInvalidTransition, "x")
				f.must("discard", "--id", gone.ID, "--yes")
			}
			var out strings.Builder
			for _, args := range [][]string{
				{"archive", "--state", "open", "--dry-run"},
				{"replay", "--state", "open", "--dry-run"},
				{"archive", "--state", "open,discarded", "--dry-run"},
				{"archive", "--state", "discarded", "--yes"},
				{"list", "--max", "1", "--state", "open,discarded"},
				{"find", "--order", "o-0"},
				{"groups", "--state", "open,discarded"},
				{"stats"},
				{"sweep", "--dry-run"},
			} {
				r := f.run(args...)
				fmt.Fprintf(&out, "%s%s", r.stdout, r.stderr)
			}
			f.terminal, f.stdin = true, strings.NewReader("n\n")
			r := f.run("discard", "--state", "open")
			fmt.Fprintf(&out, "%s%s", r.stdout, r.stderr)
			text := out.String()
			for _, line := range strings.Split(text, "\n") {
				if m := tc.bad.FindString(line); m != "" {
					t.Errorf("count %d: %q in %q", tc.n, m, line)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("count %d: no %q in:\n%s", tc.n, w, text)
				}
			}
		})
	}
}
