package faultproxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestModes(t *testing.T) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "upstream")
	}))
	defer up.Close()
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	tests := []struct {
		name       string
		rule       Rule
		method     string
		wantStatus int // 0: a transport error
		wantHits   int64
	}{
		{"pass", nil, "GET", 200, 1},
		{"server busy", always(ServerBusy), "GET", 503, 0},
		{"drop", always(Drop), "GET", 0, 0},
		{"refuse", always(Refuse), "PUT", 0, 0},
		{"lose answer still reaches upstream", always(LoseAnswer), "PUT", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.SetRule(tt.rule)
			before := hits.Load()
			req, _ := http.NewRequest(tt.method, p.URL()+"/x", nil)
			resp, err := client.Do(req)
			status := 0
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			if status != tt.wantStatus {
				t.Errorf("status = %d (err %v), want %d", status, err, tt.wantStatus)
			}
			if got := hits.Load() - before; got != tt.wantHits {
				t.Errorf("upstream hits = %d, want %d", got, tt.wantHits)
			}
		})
	}
}

// TestRefuseResets: a refused request is a reset connection, the error
// storage clients classify as a connection failure (ECONNRESET), and it
// is counted.
func TestRefuseResets(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("a refused request reached upstream") }))
	defer up.Close()
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetRule(always(Refuse))
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(p.URL()+"/t", "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("status %d, want a connection error", resp.StatusCode)
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("error %v, want ECONNRESET", err)
	}
	if n := p.Count(Refuse); n != 1 {
		t.Errorf("Count(Refuse) = %d, want 1", n)
	}
}

func TestOnAnswerSeesUpstreamStatus(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer up.Close()
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := make(chan int, 1)
	p.OnAnswer(func(r *http.Request, status int) { got <- status })
	resp, err := http.Post(p.URL()+"/t", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := <-got; s != 204 {
		t.Errorf("hook saw %d, want 204", s)
	}
}

func TestRejectsNonLoopbackUpstream(t *testing.T) {
	if _, err := Start("http://192.0.2.1:80"); err == nil {
		t.Error("Start accepted a non-loopback upstream")
	}
}

func TestOnAnswerSeesRequestBodyAndAnswerHeader(t *testing.T) {
	var upstreamBody atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		upstreamBody.Store(string(b))
		w.Header().Set("ETag", `W/"e-`+r.Method+`"`)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer up.Close()
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	type seen struct {
		body string
		etag string
	}
	got := make(chan seen, 1)
	p.OnAnswer(func(r *http.Request, status int) {
		got <- seen{body: string(RequestBody(r)), etag: AnswerHeader(r).Get("ETag")}
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	tests := []struct {
		name     string
		rule     Rule
		method   string
		body     string
		wantBody string // what the hook sees
	}{
		{"write", nil, http.MethodPut, `{"PartitionKey":"o-1"}`, `{"PartitionKey":"o-1"}`},
		{"write whose answer is lost", always(LoseAnswer), http.MethodPost, `{"a":1}`, `{"a":1}`},
		{"read", nil, http.MethodGet, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.SetRule(tt.rule)
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, _ := http.NewRequest(tt.method, p.URL()+"/t", body)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
			s := <-got
			if s.body != tt.wantBody {
				t.Errorf("hook saw body %q, want %q", s.body, tt.wantBody)
			}
			if want := `W/"e-` + tt.method + `"`; s.etag != want {
				t.Errorf("hook saw ETag %q, want %q", s.etag, want)
			}
			if b, _ := upstreamBody.Load().(string); b != tt.body {
				t.Errorf("upstream got body %q, want %q", b, tt.body)
			}
		})
	}
}

func TestLargeBodyIsForwardedNotCaptured(t *testing.T) {
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		n.Store(int64(len(b)))
	}))
	defer up.Close()
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	captured := make(chan int, 1)
	p.OnAnswer(func(r *http.Request, status int) { captured <- len(RequestBody(r)) })
	big := strings.Repeat("x", MaxCapturedBody+10)
	resp, err := http.Post(p.URL()+"/t", "text/plain", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-captured; got != 0 {
		t.Errorf("hook saw %d body bytes, want none (over MaxCapturedBody)", got)
	}
	if got := n.Load(); got != int64(len(big)) {
		t.Errorf("upstream got %d bytes, want %d", got, len(big))
	}
}

func TestAccessorsOutsideAHook(t *testing.T) {
	r := httptest.NewRequest(http.MethodPut, "/t", strings.NewReader("x"))
	if b := RequestBody(r); b != nil {
		t.Errorf("RequestBody = %q, want nil for a request that did not pass the proxy", b)
	}
	if h := AnswerHeader(r); h != nil {
		t.Errorf("AnswerHeader = %v, want nil", h)
	}
}

func TestForwardedRequestCompletesWhenTheClientLeaves(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	defer up.Close()
	defer close(release)
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	answered := make(chan int, 1)
	p.OnAnswer(func(r *http.Request, status int) { answered <- status })

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, p.URL()+"/t", strings.NewReader("x"))
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	cancel() // the client goes away while the write is upstream
	if err := <-done; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	release <- struct{}{}
	select {
	case s := <-answered:
		if s != http.StatusNoContent {
			t.Errorf("hook saw %d, want 204", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hook never saw the upstream answer of a request whose client left")
	}
}

// TestFollowClient: by default a forwarded request runs to completion
// upstream after its client gave up; with FollowClient it ends with the
// client, as on a direct connection.
func TestFollowClient(t *testing.T) {
	for _, follow := range []bool{false, true} {
		arrived := make(chan struct{})
		ended := make(chan bool, 1) // true: the upstream request was cancelled
		release := make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			select {
			case <-r.Context().Done():
				ended <- true
			case <-release:
				ended <- false
			}
		}))
		p, err := StartWith(up.URL, &Options{FollowClient: follow})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/slow", nil)
		go func() {
			<-arrived
			cancel() // the client gives up while the request is upstream
		}()
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("follow %t: the cancelled request got %d", follow, resp.StatusCode)
		}
		if !follow {
			close(release) // only this ends a request that outlives its client
		}
		select {
		case got := <-ended:
			if got != follow {
				t.Errorf("follow %t: upstream request cancelled = %t, want %t", follow, got, follow)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("follow %t: the upstream request never ended", follow)
		}
		if follow {
			close(release)
		}
		p.Close()
		up.Close()
	}
}

// always is the rule that gives every request mode m.
func always(m Mode) Rule { return func(*http.Request) Mode { return m } }
