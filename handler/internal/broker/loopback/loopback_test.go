package loopback_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/broker/brokertest"
	"github.com/orderstatus/orderstatus/handler/internal/broker/loopback"
	"github.com/orderstatus/orderstatus/handler/internal/broker/membroker"
	"github.com/orderstatus/orderstatus/handler/internal/clock"
)

const (
	orders = "order-status"
	poison = "order-status-poison"
)

// serve starts a loopback server over a fresh membroker on clk and returns
// a client of it.
func serve(t *testing.T, clk clock.Clock, o membroker.QueueOptions) (*loopback.Client, *membroker.Broker) {
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
	c, err := loopback.NewClient(srv.URL, nil)
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
		New: func(t *testing.T) broker.Broker {
			c, _ := serve(t, clk, o)
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
	c, err := loopback.NewClient(url, &loopback.Options{Timeout: 5 * time.Second})
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
	endpoints := []string{"send", "schedule", "cancel", "receive", "peek", "complete", "abandon"}
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

// The client reads the server's broker clock, so a process with the real
// clock measures ages on the development host's scaled one.
func TestNowIsTheBrokerClock(t *testing.T) {
	clk := clock.Scaled(1)
	clk.Advance(3 * time.Hour)
	mb := membroker.New(&membroker.Options{Clock: clk})
	srv := httptest.NewServer(loopback.NewServer(mb, &loopback.ServerOptions{Clock: clk}))
	t.Cleanup(srv.Close)
	c, err := loopback.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Sub(time.Now()); d < 3*time.Hour-time.Minute || d > 3*time.Hour+time.Minute {
		t.Errorf("Now = %v, %v ahead of the wall clock; want the broker clock's 3h ahead", got, d)
	}
	// Without a clock the server answers the wall clock.
	plain := httptest.NewServer(loopback.NewServer(mb))
	t.Cleanup(plain.Close)
	pc, _ := loopback.NewClient(plain.URL, nil)
	if got, err := pc.Now(context.Background()); err != nil || time.Since(got).Abs() > time.Minute {
		t.Errorf("Now without a clock = %v, %v; want about the wall clock", got, err)
	}
}
