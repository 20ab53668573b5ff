package bench

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"
)

func TestFloorExperiment(t *testing.T) {
	opts := Defaults()
	opts.Root = "../../.."
	opts.Orders = 1000
	opts.Sessions, opts.Instances, opts.SlotIdle, opts.SlotSessions = nil, 0, nil, nil
	opts.ColdStarts, opts.RSSOrders, opts.Repeats = 1, 10, 3
	opts.Latency = time.Millisecond
	opts.ProfileDir = os.Getenv("PROFDIR")
	r, err := Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for k := range r.Values {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Println(k, r.Values[k])
	}
}
