package deadletters

import (
	"strings"
	"testing"
	"time"
)

// A --since or --until duration that does not fit in a time.Duration is a
// usage error, whatever its unit; the largest that fits is taken.
func TestWhenDurationsThatDoNotFitAreRefused(t *testing.T) {
	for _, v := range []string{"106752d", "213504d", "213503d", "9223372036854775807d", "999999999999999999999d", "2562048h", "-1d"} {
		for _, flagName := range []string{"--since", "--until"} {
			t.Run(flagName+"="+v, func(t *testing.T) {
				f := newFixture(t)
				r := f.run("list", flagName, v)
				if r.code != exitUsage {
					t.Errorf("exit %d, want %d (stderr %q)", r.code, exitUsage, r.stderr)
				}
				oneLineErr(t, r.stderr)
				if !strings.Contains(r.stderr, flagName) {
					t.Errorf("stderr %q does not name %s", r.stderr, flagName)
				}
				if f.connects != 0 {
					t.Errorf("connected %d times before refusing", f.connects)
				}
			})
		}
	}
	for v, want := range map[string]time.Duration{"106751d": 106751 * 24 * time.Hour, "7d": 7 * 24 * time.Hour, "0d": 0, "2h": 2 * time.Hour} {
		w, err := parseWhen("--since", v)
		if err != nil || !w.set || w.ago != want {
			t.Errorf("parseWhen(%q) = %+v, %v; want %v ago", v, w, err, want)
		}
	}
}
