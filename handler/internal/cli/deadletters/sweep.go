package deadletters

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/wording"
)

// sweepSummary is the closing line of sweep --json, after the items.
type sweepSummary struct {
	RunID      string                    `json:"run_id"`
	DryRun     bool                      `json:"dry_run,omitempty"`
	Counts     map[deadletter.Action]int `json:"counts"`
	Stats      []deadletter.Stat         `json:"stats"`
	Stopped    string                    `json:"stopped,omitempty"`
	LockLost   int                       `json:"lock_lost,omitempty"`
	Failed     int                       `json:"failed,omitempty"`
	Purged     int                       `json:"purged,omitempty"`
	Unreadable []string                  `json:"unreadable,omitempty"`
}

func (c *cli) sweep(args []string) int {
	fs := c.flags()
	dry := fs.Bool("dry-run", false, "read only: say what the sweep would do to each message and entry, write nothing")
	asJSON := fs.Bool("json", false, "JSON Lines: one line per message or entry, then the run's summary")
	if code := c.parse(fs, args); code >= 0 {
		return code
	}
	u := sends
	if *dry {
		u = reads
	}
	s, err := c.open(u)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	start := time.Now()
	lastProgress := start
	acted := 0
	var rep deadletter.Report
	if *dry {
		rep, err = s.sw.DryRun(c.ctx)
	} else {
		rep, err = s.sw.Run(c.ctx, deadletter.RunOptions{Actor: c.actor(), Progress: func(deadletter.Item) {
			acted++
			if now := time.Now(); now.Sub(lastProgress) >= 2*time.Second {
				lastProgress = now
				fmt.Fprintln(c.stderr, sweepProgress(acted, now.Sub(start)))
			}
		}})
	}
	rep.Unreadable = s.serviceBusParts(rep.Unreadable)
	if *asJSON {
		jsonLines(c.stdout, rep.Items)
		_ = json.NewEncoder(c.stdout).Encode(sweepSummary{RunID: rep.RunID, DryRun: rep.DryRun, Counts: rep.Counts, Stats: rep.Stats,
			Stopped: rep.Stopped, LockLost: rep.LockLost, Failed: rep.Failed, Purged: rep.Purged, Unreadable: rep.Unreadable})
	} else {
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		if len(rep.Items) > 0 {
			fmt.Fprintln(tw, "ENTRY\tSOURCE\tSEQ\tMESSAGE ID\tREASON\tACTION\tWHY")
		}
		for _, it := range rep.Items {
			action := string(it.Action)
			if *dry {
				action = "would be " + action
			}
			if it.NewMessageID != "" {
				action += " as " + it.NewMessageID
			}
			why := it.Why
			if it.Error != "" {
				why += ": " + it.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", orDash(it.EntryID), it.Source, it.SequenceNumber, it.MessageID, orDash(it.Reason), action, oneLine(why))
		}
		_ = tw.Flush()
		verb := "swept"
		if *dry {
			verb = "dry run, nothing changed"
		}
		fmt.Fprintf(c.stdout, "%s: %s (run %s)\n", verb, counts(rep.Counts), rep.RunID)
		if rep.Purged > 0 {
			fmt.Fprintln(c.stdout, sweepPurged(rep.Purged))
		}
		if rep.Stopped != "" {
			fmt.Fprintf(c.stdout, "stopped early: %s; run it again for the rest\n", rep.Stopped)
		}
	}
	if err != nil {
		return c.fail(err)
	}
	if rep.Failed > 0 {
		fmt.Fprintln(c.stderr, sweepFailed(c.name, rep.Failed))
		return exitFailure
	}
	return c.unreadable(rep.Unreadable)
}

// sweepProgress is a sweep's stderr line every 2 s.
func sweepProgress(acted int, took time.Duration) string {
	return fmt.Sprintf("sweeping: %s acted on in %s", wording.CountAs(acted, "entry", "entries"), took.Round(time.Second))
}

// sweepPurged is a sweep's line when retention let n closed entries go.
func sweepPurged(n int) string {
	return "purged " + wording.CountAs(n, "closed entry", "closed entries") + " past the retention"
}

// sweepFailed is a sweep's stderr line when n messages or entries failed.
func sweepFailed(name string, n int) string {
	return fmt.Sprintf("%s: %s failed (see above); the others were handled", name, wording.CountAs(n, "message or entry", "messages or entries"))
}

func counts(m map[deadletter.Action]int) string {
	if len(m) == 0 {
		return "nothing to do"
	}
	var parts []string
	for _, a := range sortedActions(m) {
		parts = append(parts, fmt.Sprintf("%s %d", a, m[a]))
	}
	return joinComma(parts)
}
