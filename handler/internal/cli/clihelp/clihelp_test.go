package clihelp

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("order", "", "order `id` (the session)")
	fs.Duration("after", 30*time.Minute, "when, from now (a Go `duration`)")
	fs.Bool("json", false, "JSON Lines, one message per line")
	fs.Int("max", 50, "list at most `N` messages, a description long enough to be wrapped over more than one line of help")
	var b strings.Builder
	Flags(&b, fs)
	want := `  --after DURATION
        when, from now (a Go duration) (default 30m0s)
  --json
        JSON Lines, one message per line
  --max N
        list at most N messages, a description long enough to be wrapped over
        more than one line of help (default 50)
  --order ID
        order id (the session)
`
	if b.String() != want {
		t.Errorf("Flags:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWrap(t *testing.T) {
	got := Wrap("a bb ccc "+strings.Repeat("x", 12)+" d", 6)
	want := []string{"a bb", "ccc", strings.Repeat("x", 12), "d"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Wrap = %q, want %q", got, want)
	}
}
