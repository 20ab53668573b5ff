package loopback_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokertest"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
)

const (
	orders = "order-status"
	poison = "order-status-poison"
)

// serve starts a loopback server over a fresh membroker on clk and returns
// a client of it.
func serve(t *testing.T, clk clock.Clock, o membroker.QueueOptions) (*loopback.Client, *membroker.Broker) {
	t.Helper()
	return serveWith(t, clk, o, nil)
}

// serveWith is serve with the client's options.
func serveWith(t *testing.T, clk clock.Clock, o membroker.QueueOptions, co *loopback.Options) (*loopback.Client, *membroker.Broker) {
	t.Helper()
	mb := membroker.New(&membroker.Options{Clock: clk})
	so := o
	so.RequiresSession = true
	if err := mb.CreateQueue(orders, so); err != nil {
		t.Fatal(err)
	}
	if err := mb.CreateQueue(poison, o); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(loopback.NewServer(mb))
	t.Cleanup(srv.Close)
	c, err := loopback.NewClient(srv.URL, co)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", srv.URL, err)
	}
	return c, mb
}

func TestConformance(t *testing.T) {
	clk := clock.Scaled(1000)
	o := membroker.DefaultQueueOptions()
	o.LockDuration = 10 * time.Minute
	brokertest.Run(t, brokertest.Harness{
		// The suite drives the broker's clock (1000 times real time) and
		// reads the broker's times.
		New: func(t *testing.T) broker.Broker {
			c, _ := serveWith(t, clk, o, &loopback.Options{BrokerTime: true})
			return c
		},
		Queue:            poison,
		SessionQueue:     orders,
		FreshQueues:      true,
		FastClock:        true,
		Clock:            clk,
		LockDuration:     o.LockDuration,
		MaxDeliveryCount: int(o.MaxDeliveryCount),
		Wait:             time.Minute,
		ShortWait:        10 * time.Second,
		ScheduleDelay:    5 * time.Minute,
		// A dropped duplicate's number names nothing stored.
		DuplicateCancelNotFound: true,
	})
}

func TestNewClientOnlyLoopback(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:7071", true},
		{"http://127.0.0.1:7071/", true},
		{"http://127.0.0.1:7071/dev", true},
		{"http://localhost:7071", false},
		{"http://10.0.0.1:7071", false},
		{"http://[::1]:7071", false},
		{"https://127.0.0.1:7071", false},
		{"http://user:pw@127.0.0.1:7071", false},
		{"http://127.0.0.1.example.com:7071", false},
		{"127.0.0.1:7071", false},
		{"", false},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			_, err := loopback.NewClient(tc.url, nil)
			if (err == nil) != tc.ok {
				t.Errorf("NewClient(%q) error = %v, want ok = %v", tc.url, err, tc.ok)
			}
		})
	}
}

func TestServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := loopback.NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(context.Background(), poison, broker.Message{}); !errors.Is(err, broker.ErrTransient) {
		t.Errorf("Send to a stopped server = %v, want ErrTransient", err)
	}
}

func TestClientCancel(t *testing.T) {
	c, _ := serve(t, clock.Real(), membroker.DefaultQueueOptions())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Receive(ctx, broker.Source{Queue: poison}, 1, time.Minute)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, broker.ErrTransient) {
		t.Errorf("Receive with a cancelled ctx = %v, want context.Canceled and not ErrTransient", err)
	}
}

// TestClientsLiveInRealTime: a broker whose clock runs 2 hours ahead
// (idle time skipped) is invisible to its clients. A message the client
// schedules 30 minutes from its now is due 30 minutes from the broker's
// and reads as due 30 minutes from the client's; the EnqueuedTime the
// broker stamps reads as the client's now.
func TestClientsLiveInRealTime(t *testing.T) {
	clk := clock.Scaled(1)
	clk.Advance(2 * time.Hour)
	c, mb := serve(t, clk, membroker.DefaultQueueOptions())
	ctx := context.Background()
	if _, err := c.Schedule(ctx, poison, broker.Message{MessageID: "later"}, time.Now().Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, poison, broker.Message{MessageID: "now"}); err != nil {
		t.Fatal(err)
	}
	near := func(got, want time.Time) bool { d := got.Sub(want); return d > -2*time.Second && d < 2*time.Second }
	onBroker, err := broker.PeekAll(ctx, mb, broker.Source{Queue: poison})
	if err != nil || len(onBroker) != 2 {
		t.Fatalf("broker holds %d messages, %v; want 2", len(onBroker), err)
	}
	if due := onBroker[0].EnqueuedTime; !onBroker[0].Scheduled || !near(due, clk.Now().Add(30*time.Minute)) {
		t.Errorf("the scheduled message is due at %v on the broker, want 30m after its now %v", due, clk.Now())
	}
	seen, err := broker.PeekAll(ctx, c, broker.Source{Queue: poison})
	if err != nil || len(seen) != 2 {
		t.Fatalf("the client sees %d messages, %v; want 2", len(seen), err)
	}
	if got := seen[0].EnqueuedTime; !near(got, time.Now().Add(30*time.Minute)) {
		t.Errorf("the client sees the scheduled message due at %v, want 30m after its own now", got)
	}
	if got := seen[1].EnqueuedTime; !near(got, time.Now()) {
		t.Errorf("the client sees EnqueuedTime %v, want about its own now %v (the broker's is %v)", got, time.Now(), onBroker[1].EnqueuedTime)
	}
}

func TestServerRejectsBadRequests(t *testing.T) {
	mb := membroker.New(nil)
	if err := mb.CreateQueue(poison, membroker.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	h := loopback.NewServer(mb)
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"not JSON", "POST", "/broker/send", "{", http.StatusBadRequest},
		{"unknown field", "POST", "/broker/send", `{"queue":"q","bogus":1}`, http.StatusBadRequest},
		{"bad property type", "POST", "/broker/send",
			`{"queue":"` + poison + `","message":{"applicationProperties":{"k":{"type":"int64","value":"x"}}}}`, http.StatusBadRequest},
		{"bad wait", "POST", "/broker/receive", `{"source":{"queue":"` + poison + `"},"max":1,"wait":"soon"}`, http.StatusBadRequest},
		{"unknown queue", "POST", "/broker/send", `{"queue":"nope","message":{}}`, http.StatusNotFound},
		{"GET", "GET", "/broker/send", "", http.StatusMethodNotAllowed},
		{"no endpoint", "POST", "/broker/purge", "{}", http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.want {
				t.Errorf("%s %s %s: status %d, want %d (body %s)", tc.method, tc.path, tc.body, rec.Code, tc.want, rec.Body)
			}
		})
	}
}

// FuzzServer feeds arbitrary bodies to every endpoint: the server answers
// 2xx or 4xx (or 503 when a receive is cut short), never panics and never
// answers 500.
func FuzzServer(f *testing.F) {
	endpoints := []string{"send", "schedule", "cancel", "receive", "peek", "complete", "abandon", "now"}
	f.Add(uint8(0), `{"queue":"order-status-poison","message":{"messageId":"m","body":"aGk=","applicationProperties":{"t":{"type":"time","value":"2026-01-01T00:00:00Z"}}}}`)
	f.Add(uint8(1), `{"queue":"order-status-poison","message":{},"at":"2026-01-01T00:00:00Z"}`)
	f.Add(uint8(2), `{"queue":"order-status-poison","sequenceNumber":-1}`)
	f.Add(uint8(3), `{"source":{"queue":"order-status-poison","deadLetter":true},"max":5,"wait":"0s"}`)
	f.Add(uint8(4), `{"source":{"queue":"order-status-poison"},"max":5,"from":0}`)
	f.Add(uint8(5), `{"source":{"queue":"order-status-poison"},"lockToken":"x","sequenceNumber":1}`)
	mb := membroker.New(nil)
	if err := mb.CreateQueue(poison, membroker.DefaultQueueOptions()); err != nil {
		f.Fatal(err)
	}
	h := loopback.NewServer(mb)
	f.Fuzz(func(t *testing.T, i uint8, body string) {
		endpoint := endpoints[int(i)%len(endpoints)]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond) // bounds a receive's wait
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", "/broker/"+endpoint, strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Errorf("POST /broker/%s %q: status %d: %s", endpoint, body, rec.Code, rec.Body)
		}
	})
}

// TestClientReusesConnections: a burst of concurrent calls opens a
// connection per call at most once; the next bursts reuse them (Go's
// default of 2 idle connections per host made every burst open and close
// most of its connections again).
func TestClientReusesConnections(t *testing.T) {
	mb := membroker.New(&membroker.Options{Clock: clock.Scaled(1)})
	if err := mb.CreateQueue(poison, membroker.DefaultQueueOptions()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(loopback.NewServer(mb))
	var opened atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := loopback.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	const burst = 32
	for round := range 5 {
		var wg sync.WaitGroup
		for range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Peek(t.Context(), broker.Source{Queue: poison}, 1, 0); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		// A connection goes back to the idle pool just after its answer is
		// read, so a burst may open a few more than the last one left; a
		// client without reuse opens about burst a round (160 in all).
		if n := opened.Load(); n > 2*burst {
			t.Fatalf("after %d bursts of %d concurrent calls the client opened %d connections, want at most %d", round+1, burst, n, 2*burst)
		}
	}
}
