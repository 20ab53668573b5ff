package devhost

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/scenario"
	"github.com/orderstatus/orderstatus/handler/internal/parking"
	"github.com/orderstatus/orderstatus/handler/internal/reschedule"
)

// post sends one empty JSON POST and returns its status, or the error.
func post(t *testing.T, u string) (int, error) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(u, "application/json", strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestOutageRefusesTheHandlersRequests: with both targets prepared, the
// handler process is pointed at fault proxies in front of the store and
// the loopback broker; they pass its requests until an outage starts,
// refuse them (a reset connection) while it lasts, and pass them again
// after it. The host's own way to the broker is never cut. WaitIdle waits
// for the outage's end, fast-forwarding to it, and the summary counts the
// refused requests.
func TestOutageRefusesTheHandlersRequests(t *testing.T) {
	t.Parallel()
	var storeHits atomic.Int64
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		storeHits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer store.Close()
	var j jumps
	h, _ := testHost(t, appFiles(1), func(o *Options) {
		// No AccountName: the summary does not read an archive table.
		o.Settings[SettingStoreConnection] = "TableEndpoint=" + store.URL + "/devstoreaccount1;"
		o.OutageTargets = []string{OutageServiceBus, OutageTable}
		o.FastForward = true
		o.OnFastForward = j.record
	})
	in := h.pool.first(nil)
	env := instanceEnv(t, h, in)
	brokerURL := env[SettingDevBrokerURL]
	tableURL, err := tableEndpoint(env[SettingStoreConnection])
	if err != nil {
		t.Fatalf("the handler's store setting %q: %v", env[SettingStoreConnection], err)
	}
	if brokerURL == h.BrokerURL() || tableURL.Host == strings.TrimPrefix(store.URL, "http://") {
		t.Fatalf("the handler reaches the broker at %s and the store at %s directly, want fault proxies", brokerURL, tableURL.Host)
	}
	storeURL := "http://" + tableURL.Host + "/devstoreaccount1/Tables"
	check := func(when string, wantRefused bool) {
		t.Helper()
		for _, u := range []string{brokerURL + "/broker/now", storeURL} {
			status, err := post(t, u)
			switch {
			case wantRefused && !errors.Is(err, syscall.ECONNRESET):
				t.Errorf("%s: POST %s = %d, %v; want a reset connection", when, u, status, err)
			case !wantRefused && (err != nil || status >= 300):
				t.Errorf("%s: POST %s = %d, %v; want it passed", when, u, status, err)
			}
		}
		if status, err := post(t, h.BrokerURL()+"/broker/now"); err != nil || status != http.StatusOK {
			t.Errorf("%s: the host's own broker URL answered %d, %v; want 200", when, status, err)
		}
	}
	check("before the outage", false)
	if storeHits.Load() != 1 {
		t.Errorf("store requests passed: %d, want 1", storeHits.Load())
	}
	for _, target := range []string{OutageTable, OutageServiceBus} {
		if err := h.StartOutage(target, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	check("during the outage", true)
	if line := h.progress(time.Second, 0).body; !strings.HasSuffix(line, " | unreachable: servicebus, table") {
		t.Errorf("progress line %q, want it to end with the targets down", line)
	}
	if storeHits.Load() != 1 {
		t.Errorf("a refused request reached the store: %d requests, want 1", storeHits.Load())
	}
	if err := h.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, all := j.total(); !slices.Contains(all, JumpOutageEnd) {
		t.Errorf("fast-forwards %q, want one %q", all, JumpOutageEnd)
	}
	check("after the outage", false)
	if line := h.progress(time.Second, 0).body; strings.Contains(line, "unreachable") {
		t.Errorf("progress line %q after the outage names a target down", line)
	}
	got := h.Outages()
	for i := range got {
		if got[i].End.Sub(got[i].Start) != 10*time.Minute {
			t.Errorf("outage %d from %s to %s, want 10m", i, got[i].Start, got[i].End)
		}
		got[i].Start, got[i].End = time.Time{}, time.Time{}
	}
	want := []OutageSummary{
		{Target: OutageTable, After: "0s", Duration: "10m", Ended: true, Refused: 1},
		{Target: OutageServiceBus, After: "0s", Duration: "10m", Ended: true, Refused: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("outages %+v, want %+v", got, want)
	}
}

// TestOutageCounts: what an outage cost is what happened between its
// start and its end: rescheduled copies (a RetryAttempt property),
// dead-lettered and parked messages.
func TestOutageCounts(t *testing.T) {
	t.Parallel()
	h, up := testHost(t, appFiles(1), func(o *Options) {
		o.OutageTargets = []string{OutageServiceBus}
		o.Queues.MaxDeliveryCount = 1
		o.FastForward = true
	})
	up.set(func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusInternalServerError, "") })
	ctx := testCtx(t)
	// Before the outage: one dead-lettered, one parked, one rescheduled;
	// none of them counts.
	// (Not WaitIdle during the outage: it would fast-forward to its end.)
	sendAndDeadLetter := func(id string) {
		t.Helper()
		before := h.broker.Totals(h.Queue()).DeadLettered
		if err := h.Send(ctx, statusLine("o-"+id, id, "Created", 1)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, id+" dead-lettered", func() bool { return h.broker.Totals(h.Queue()).DeadLettered == before+1 })
	}
	copyOf := func(id string) ScenarioLine {
		l := statusLine("o-c", id, "Created", 1)
		l.ApplicationProperties = map[string]any{reschedule.PropRetryAttempt: int64(1), parking.PropOriginalMessageID: "o-c:1"}
		return l
	}
	park := func(id string) {
		t.Helper()
		if err := h.rec.Send(ctx, h.PoisonQueue(), statusLine("o-p", id, "Created", 1).Message()); err != nil {
			t.Fatal(err)
		}
	}
	sendAndDeadLetter("before")
	park("p-before")
	if _, err := h.rec.Schedule(ctx, h.Queue(), copyOf("c-before").Message(), h.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := h.StartOutage(OutageServiceBus, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	// During it: two dead-lettered, one parked, one rescheduled, and a
	// scheduled message without RetryAttempt (not a retry).
	sendAndDeadLetter("during-1")
	sendAndDeadLetter("during-2")
	park("p-during")
	if _, err := h.rec.Schedule(ctx, h.Queue(), copyOf("c-during").Message(), h.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rec.Schedule(ctx, h.Queue(), statusLine("o-s", "s-1", "Created", 1).Message(), h.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := h.Outages(); len(got) != 1 || got[0].Ended || got[0].DeadLettered != 2 || got[0].Parked != 1 || got[0].Rescheduled != 1 {
		t.Errorf("during the outage: %+v, want it not over, 2 dead-lettered, 1 parked, 1 rescheduled", got)
	}
	// WaitIdle: the scheduled messages fall due (and are dead-lettered)
	// within the outage, the copy of the hour after it.
	if err := h.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	want := OutageSummary{Target: OutageServiceBus, After: "0s", Duration: "5m", Ended: true, DeadLettered: 4, Parked: 1, Rescheduled: 1}
	got := h.Outages()
	if len(got) == 1 {
		got[0].Start, got[0].End = time.Time{}, time.Time{}
	}
	if len(got) != 1 || got[0] != want {
		t.Errorf("after the outage: %+v, want %+v", got, want)
	}
}

// TestOutageNeedsItsTarget: an outage of a target the host was not
// prepared for fails, in StartOutage and in Play; a table outage needs a
// store on loopback HTTP.
func TestOutageNeedsItsTarget(t *testing.T) {
	t.Parallel()
	h, _ := testHost(t, appFiles(1), nil)
	if err := h.StartOutage(OutageTable, time.Minute); err == nil || !strings.Contains(err.Error(), "OutageTargets") {
		t.Errorf("StartOutage without the target: %v, want an error naming OutageTargets", err)
	}
	lines, err := scenario.ParseOutages("servicebus@0s+1m")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Play(testCtx(t), lines); err == nil || !strings.Contains(err.Error(), "--outage servicebus@0s+1m") {
		t.Errorf("Play of an unprepared outage: %v, want an error naming the line", err)
	}
	for _, conn := range []string{"UseDevelopmentStorage=true", "AccountName=a;TableEndpoint=https://a.table.core.windows.net/;"} {
		h, err := New(Options{AppRoot: writeApp(t, appFiles(1)), Settings: map[string]string{SettingStoreConnection: conn},
			OutageTargets: []string{OutageTable}, HTTPAddr: "off"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = h.Start(ctx)
		cancel()
		h.Close()
		if err == nil || !strings.Contains(err.Error(), "TableEndpoint") {
			t.Errorf("Start with a table outage and store %q: %v, want an error about its TableEndpoint", conn, err)
		}
	}
	if _, err := New(Options{AppRoot: writeApp(t, appFiles(1)), OutageTargets: []string{"blob"}}); err == nil {
		t.Error("New with outage target blob: no error")
	}
}

func TestReplaceTableEndpoint(t *testing.T) {
	t.Parallel()
	in := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=k==;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"
	want := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=k==;TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
	if got := replaceTableEndpoint(in, "127.0.0.1:9"); got != want {
		t.Errorf("replaceTableEndpoint = %q, want %q", got, want)
	}
}

func TestMainOutageFlag(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"table", "table@2m", "disk@1m+1m", "table@1m+0s", "table@x+1m"} {
		code, stdout, stderr := runMain(t, "--outage", bad)
		if code != ExitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--outage") || stdout != "" {
			t.Errorf("--outage %s: exit %d, stderr %q, stdout %q; want 2 and one line naming --outage", bad, code, stderr, stdout)
		}
	}
	c, code := parseFlags([]string{"--outage", "table@2m+30m,servicebus@1m+5m"}, &strings.Builder{}, &strings.Builder{}, DefaultHTTPAddr)
	if code != -1 || len(c.outages) != 2 || c.outages[0].Outage != OutageTable || c.outages[1].Duration != 5*time.Minute {
		t.Errorf("parseFlags: outages %+v (code %d), want table for 30m and servicebus for 5m", c.outages, code)
	}
	if got := OutageTargets(c.outages); !slices.Equal(got, []string{OutageServiceBus, OutageTable}) {
		t.Errorf("OutageTargets = %q", got)
	}
}
