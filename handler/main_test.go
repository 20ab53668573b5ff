package main

// End-to-end tests of the built binary, the way the Functions host runs it:
// environment settings, FUNCTIONS_CUSTOMHANDLER_PORT, host-shaped
// invocations over loopback HTTP, a real Azurite, and SIGTERM.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/faultproxy"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/freeport"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/testenv"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// binary is the deployed handler built from this package; devBinary the
// dev kit's (cmd/orderstatus-dev), whose serve also reaches the
// development host's broker; toolsBinary the operators' (cmd/orderstatus).
var binary, devBinary, toolsBinary string

// linkerRevision is the revision the test binary is built with.
const linkerRevision = "e2e0000000000000000000000000000000000001"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "handler-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "handler")
	// As `make build` builds it: the revision through the linker, here
	// with VCS stamping off, so only the linker can supply it.
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.revision="+linkerRevision, "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build handler: %v\n%s", err, out)
		os.Exit(1)
	}
	devBinary, toolsBinary = filepath.Join(dir, "orderstatus-dev"), filepath.Join(dir, "orderstatus")
	for bin, pkg := range map[string]string{devBinary: "./cmd/orderstatus-dev", toolsBinary: "./cmd/orderstatus"} {
		build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := testenv.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for a process writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type proc struct {
	cmd            *exec.Cmd
	base           string
	stdout, stderr *syncBuffer
	done           chan error
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// start runs the handler with env (plus a free port) and waits until GET /
// answers, as the host does.
func start(t *testing.T, env ...string) *proc { t.Helper(); return startBinary(t, binary, env...) }

// startBinary is start of the binary bin.
func startBinary(t *testing.T, bin string, env ...string) *proc {
	t.Helper()
	port := freePort(t)
	p := &proc{base: fmt.Sprintf("http://127.0.0.1:%d", port), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("FUNCTIONS_CUSTOMHANDLER_PORT=%d", port)}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("handler stdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.base + "/")
		if err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("handler exited before it was ready: %v\nstderr: %s", err, p.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("handler not ready within 30 s")
		}
	}
}

type answer struct {
	Outputs     map[string]any
	Logs        []string
	ReturnValue map[string]any
}

func (p *proc) invoke(t *testing.T, m hostproto.ServiceBusMessage) (int, answer) {
	t.Helper()
	body, err := hostenc.EncodeServiceBus(m, "message", "OrderStatus", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p.post(t, "/OrderStatus", body)
}

func (p *proc) post(t *testing.T, path string, body []byte) (int, answer) {
	t.Helper()
	resp, err := http.Post(p.base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer is not JSON: %q", raw)
	}
	return resp.StatusCode, a
}

func statusMsg(orderID, status string, seq, delivery int) hostproto.ServiceBusMessage {
	return hostproto.ServiceBusMessage{
		Body:      []byte(fmt.Sprintf(`{"orderId":%q,"status":%q,"sequence":%d,"occurredAt":"2026-11-29T10:0%d:00Z"}`, orderID, status, seq, seq)),
		MessageID: fmt.Sprintf("%s:%d", orderID, seq), SessionID: orderID, Subject: "OrderStatusChanged",
		ContentType: "application/json", DeliveryCount: int32(delivery), SequenceNumber: int64(100 + seq),
		EnqueuedTime: time.Now().UTC().Truncate(time.Second), LockToken: "lock",
	}
}

func TestSettlesAgainstAzurite(t *testing.T) {
	cs := testenv.Azurite(t)
	table := "e2esettle"
	p := start(t, "OrderStore__connectionString="+cs, "OrderStore__tableName="+table)

	steps := []struct {
		name       string
		msg        hostproto.ServiceBusMessage
		wantStatus int
		wantResult string
	}{
		{"created", statusMsg("o-1", "Created", 1, 1), 200, "Applied"},
		{"paid", statusMsg("o-1", "Paid", 2, 1), 200, "Applied"},
		{"paid redelivered", statusMsg("o-1", "Paid", 2, 2), 200, "Duplicate"},
		{"created replayed late", statusMsg("o-1", "Created", 1, 1), 200, "Stale"},
		{"gap", statusMsg("o-1", "Delivered", 4, 1), 200, "Applied"},
		{"other order", statusMsg("o-2", "Created", 1, 1), 200, "Applied"},
		// No Service Bus configured: poison cannot be parked, so it is failed
		// (abandoned), never completed, and nothing is written.
		{"poison without service bus", hostproto.ServiceBusMessage{Body: []byte(`{"orderId":"o-3"`), MessageID: "o-3:1",
			SessionID: "o-3", Subject: "OrderStatusChanged", DeliveryCount: 1}, 500, "Failed"},
	}
	for _, s := range steps {
		status, a := p.invoke(t, s.msg)
		if status != s.wantStatus || a.ReturnValue["result"] != s.wantResult {
			t.Errorf("%s: got %d %v, want %d %s (logs %v)", s.name, status, a.ReturnValue["result"], s.wantStatus, s.wantResult, a.Logs)
		}
	}

	// Read the table directly, not through our store.
	client, err := aztables.NewServiceClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := client.NewClient(table)
	got, err := tc.GetEntity(context.Background(), "o-1", "status", nil)
	if err != nil {
		t.Fatalf("read o-1: %v", err)
	}
	var row map[string]any
	if err := json.Unmarshal(got.Value, &row); err != nil {
		t.Fatal(err)
	}
	if row["Status"] != "Delivered" || fmt.Sprint(row["LastSequence"]) != "4" || row["OccurredAt"] == nil || row["UpdatedAt"] == nil {
		t.Errorf("row o-1 = %v, want Status Delivered, LastSequence 4, OccurredAt and UpdatedAt", row)
	}
	if _, err := tc.GetEntity(context.Background(), "o-3", "status", nil); err == nil {
		t.Error("poison message o-3 wrote a row")
	}

	resp, err := http.Get(p.base + "/api/orders/o-1")
	if err != nil {
		t.Fatal(err)
	}
	var view map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&view)
	resp.Body.Close()
	if resp.StatusCode != 200 || view["status"] != "Delivered" || view["lastSequence"] != 4.0 {
		t.Errorf("GetOrder o-1: %d %v", resp.StatusCode, view)
	}
	for path, want := range map[string]int{"/api/orders/nope": 404, "/api/orders/a%3Fb": 400} {
		resp, err := http.Get(p.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	resp, err = http.Get(p.base + "/api/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`orderstatus_messages_total{result="Applied",subject="OrderStatusChanged"} 4`,
		`orderstatus_messages_total{result="Duplicate",subject="OrderStatusChanged"} 1`,
		`orderstatus_sequence_gaps_total 1`,
		`orderstatus_store_round_trips_total{operation="replace",outcome="ok"}`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !strings.Contains(p.stderr.String(), "no Service Bus configured") {
		t.Errorf("stderr lacks the clear line about the unparkable poison message:\n%s", p.stderr)
	}
}

func TestParksThroughTheDevBroker(t *testing.T) {
	cs := testenv.Azurite(t)
	mb := membroker.New(nil)
	poison := membroker.DefaultQueueOptions()
	if err := mb.CreateQueue("order-status-poison", poison); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(loopback.NewServer(mb))
	defer srv.Close()
	p := startBinary(t, devBinary, "OrderStore__connectionString="+cs, "OrderStore__tableName=e2epark", "ORDERSTATUS_DEV_BROKER_URL="+srv.URL)

	bad := hostproto.ServiceBusMessage{Body: []byte(`{"orderId":"o-9","status":"Paid","sequence":1}`), MessageID: "o-9:1",
		SessionID: "o-8", Subject: "OrderStatusChanged", DeliveryCount: 1, SequenceNumber: 5}
	unknown := hostproto.ServiceBusMessage{Body: []byte(`{}`), MessageID: "o-8:x", SessionID: "o-8", Subject: "Refund", DeliveryCount: 1}
	for i, m := range []hostproto.ServiceBusMessage{bad, unknown, bad} { // the third is a redelivery
		status, a := p.invoke(t, m)
		if status != 200 || a.ReturnValue["result"] != "Parked" {
			t.Fatalf("invocation %d: %d %v, want 200 Parked", i, status, a.ReturnValue)
		}
	}
	got, err := mb.Peek(context.Background(), broker.Source{Queue: "order-status-poison"}, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("poison queue holds %d messages, want 2 (the re-park is deduplicated)", len(got))
	}
	reasons := map[string]string{}
	for _, m := range got {
		reasons[m.MessageID] = fmt.Sprint(m.ApplicationProperties["DeadLetterReason"])
		if m.ApplicationProperties["OriginalMessageId"] == nil || m.ApplicationProperties["DeadLetterErrorDescription"] == nil {
			t.Errorf("%s lacks original ids or description: %v", m.MessageID, m.ApplicationProperties)
		}
	}
	if reasons["o-9:1:parked"] != "InvalidPayload" || reasons["o-8:x:parked"] != "UnknownSubject" {
		t.Errorf("parked reasons = %v", reasons)
	}
}

func TestSIGTERMExitsZero(t *testing.T) {
	p := start(t, "OrderStore__connectionString="+testenv.Azurite(t), "OrderStore__tableName=e2esigterm")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30 s of SIGTERM")
	}
}

// TestSIGTERMFinishesInFlightCalls: a call whose storage write is under
// way when SIGTERM arrives is finished and answered (its effect durable),
// then the process exits 0; new connections are refused meanwhile.
func TestSIGTERMFinishesInFlightCalls(t *testing.T) {
	az := testenv.StartAzurite(t)
	proxy, err := faultproxy.Start("http://" + az.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	host := strings.TrimPrefix(proxy.URL(), "http://")
	p := start(t, "OrderStore__connectionString="+azurite.ConnectionString(host), "OrderStore__tableName=e2einflight")
	proxy.SetDelay(1500 * time.Millisecond) // every storage call now takes 1.5 s

	type result struct {
		status int
		a      answer
		err    error
	}
	body, err := hostenc.EncodeServiceBus(statusMsg("o-1", "Created", 1, 1), "message", "OrderStatus", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() {
		var r result
		resp, err := http.Post(p.base+"/OrderStatus", "application/json", bytes.NewReader(body))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		r.status = resp.StatusCode
		r.err = json.NewDecoder(resp.Body).Decode(&r.a)
		done <- r
	}()
	time.Sleep(500 * time.Millisecond) // the call is waiting on storage
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("in-flight call got no answer: %v", r.err)
	}
	if r.status != 200 || r.a.ReturnValue["result"] != "Applied" {
		t.Errorf("in-flight call: %d %v, want 200 Applied", r.status, r.a.ReturnValue)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30 s of SIGTERM")
	}
	proxy.SetDelay(0)
	client, _ := aztables.NewServiceClientFromConnectionString(az.ConnectionString(), nil)
	if _, err := client.NewClient("e2einflight").GetEntity(context.Background(), "o-1", "status", nil); err != nil {
		t.Errorf("the answered write is not in the table: %v", err)
	}
}

func TestStartupErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      []string
		wantCode int
		wantLine string
	}{
		{"no port", nil, []string{"OrderStore__connectionString=AccountName=x"}, 1, "FUNCTIONS_CUSTOMHANDLER_PORT"},
		{"no store", nil, []string{"FUNCTIONS_CUSTOMHANDLER_PORT=1234"}, 1, "OrderStore__serviceUri"},
		{"bad budget", nil, []string{"FUNCTIONS_CUSTOMHANDLER_PORT=1234", "OrderStore__connectionString=AccountName=x", "ORDER_STATUS_RETRY_BUDGET=2m"}, 1, "ORDER_STATUS_RETRY_BUDGET"},
		{"unknown command", []string{"bogus"}, nil, 2, "unknown command"},
		{"serve with an argument", []string{"serve", "x"}, nil, 2, "takes no arguments"},
		{"the dev host's broker", nil, []string{"FUNCTIONS_CUSTOMHANDLER_PORT=1234", "OrderStore__connectionString=" + azurite.ConnectionString("127.0.0.1:1"), "ORDERSTATUS_DEV_BROKER_URL=http://127.0.0.1:1"}, 1, "ORDERSTATUS_DEV_BROKER_URL is set: this binary talks only to Service Bus"},
		{"a dev kit command", []string{"dev"}, nil, 2, "unknown command \"dev\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary, tt.args...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.wantLine) {
				t.Errorf("stderr = %q, want one line naming %s", stderr.String(), tt.wantLine)
			}
		})
	}
}

// TestBuildInfoCarriesTheLinkerRevision: a binary built without VCS
// stamping (as in a tarball or a CI checkout with -buildvcs=false) still
// reports the revision the Makefile passes to the linker, in `handler
// version` and in orderstatus_build_info.
func TestBuildInfoCarriesTheLinkerRevision(t *testing.T) {
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		t.Fatalf("handler version: %v", err)
	}
	if !strings.Contains(string(out), linkerRevision) {
		t.Errorf("handler version = %q, want the revision %s", out, linkerRevision)
	}

	cs := testenv.Azurite(t)
	p := start(t, "OrderStore__connectionString="+cs, "OrderStore__tableName=e2ebuildinfo")
	resp, err := http.Get(p.base + "/api/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var line string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "orderstatus_build_info{") {
			line = l
		}
	}
	if want := `revision="` + linkerRevision + `"`; !strings.Contains(line, want) {
		t.Errorf("build_info = %q, want it to carry %s", line, want)
	}
}
