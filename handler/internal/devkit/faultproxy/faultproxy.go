// Package faultproxy is a loopback HTTP proxy that stands in front of a
// service (Azurite) and injects the failures real networks and storage
// produce: 503 ServerBusy, dropped connections, latency, and requests that
// take effect upstream while their answer is lost. It is test equipment.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the proxy does to a request.
type Mode int

// Modes.
const (
	// Pass forwards the request and its answer.
	Pass Mode = iota
	// ServerBusy answers 503 with a Table Storage error body, without forwarding.
	ServerBusy
	// Drop closes the client connection without forwarding.
	Drop
	// LoseAnswer forwards the request, then closes the client connection.
	LoseAnswer
	// Refuse resets the client connection (TCP RST) without forwarding.
	Refuse
)

// modes is the number of modes, for the counters.
const modes = int(Refuse) + 1

// Rule decides the mode of one request; nil means Pass.
type Rule func(r *http.Request) Mode

// Proxy is a running fault proxy on 127.0.0.1.
type Proxy struct {
	// Addr is host:port of the proxy.
	Addr string

	srv     *http.Server
	rule    atomic.Pointer[Rule]
	delay   atomic.Int64
	mu      sync.Mutex
	after   func(r *http.Request, status int)
	counts  [modes]atomic.Int64
	stopped chan struct{}
}

// Options tune StartWith. The zero value (or nil) is Start's proxy.
type Options struct {
	// FollowClient ends a forwarded request when its client goes away.
	FollowClient bool
}

// Start runs a proxy to upstream (an http://127.0.0.1:port URL).
func Start(upstream string) (*Proxy, error) { return StartWith(upstream, nil) }

// StartWith runs a proxy to upstream with opts (nil: Start's).
func StartWith(upstream string, opts *Options) (*Proxy, error) {
	if opts == nil {
		opts = &Options{}
	}
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" {
		return nil, errors.New("faultproxy: upstream must be on loopback")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), stopped: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, ResponseHeaderTimeout: 30 * time.Second}
	// An upstream failure is a 502 to the client; its log line would be noise.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		after := p.after
		p.mu.Unlock()
		if after != nil {
			if x, ok := resp.Request.Context().Value(exchangeKey{}).(*exchange); ok {
				x.answerHeader = resp.Header
			}
			after(resp.Request, resp.StatusCode)
		}
		return nil
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := time.Duration(p.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		mode := Pass
		if rule := p.rule.Load(); rule != nil && *rule != nil {
			mode = (*rule)(r)
		}
		p.counts[mode].Add(1)
		if (mode == Pass || mode == LoseAnswer) && !opts.FollowClient {
			// Run to completion upstream, so that OnAnswer sees every answer.
			ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
			defer cancel()
			r = capture(r.WithContext(ctx))
		}
		switch mode {
		case ServerBusy:
			w.Header().Set("Content-Type", "application/json;odata=minimalmetadata")
			w.Header().Set("x-ms-error-code", "ServerBusy")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"odata.error":{"code":"ServerBusy","message":{"lang":"en-US","value":"The server is busy (injected)."}}}`))
		case Drop, Refuse:
			hijackClose(w, mode == Refuse)
		case LoseAnswer:
			rec := &discard{header: http.Header{}}
			rp.ServeHTTP(rec, r)
			hijackClose(w, false)
		default:
			rp.ServeHTTP(w, r)
		}
	})}
	go func() {
		_ = p.srv.Serve(ln)
		close(p.stopped)
	}()
	return p, nil
}

// URL returns http://Addr.
func (p *Proxy) URL() string { return "http://" + p.Addr }

// SetRule replaces the rule (nil: pass everything).
func (p *Proxy) SetRule(r Rule) { p.rule.Store(&r) }

// SetDelay adds d of latency to every request (0: none).
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// OnAnswer sets a hook called with each upstream answer before it is passed
// on, or withheld; it may run concurrently. nil removes it.
func (p *Proxy) OnAnswer(f func(r *http.Request, status int)) {
	p.mu.Lock()
	p.after = f
	p.mu.Unlock()
}

// Count returns how many requests got mode m.
func (p *Proxy) Count(m Mode) int64 { return p.counts[m].Load() }

// Close stops the proxy.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if err != nil {
		err = p.srv.Close()
	}
	<-p.stopped
	return err
}

// MaxCapturedBody is the largest request body RequestBody returns.
const MaxCapturedBody = 1 << 20

// exchange is what the proxy keeps of one forwarded request for OnAnswer.
type exchange struct {
	body         []byte
	answerHeader http.Header
}

type exchangeKey struct{}

// capture returns r carrying an exchange with a write's body.
func capture(r *http.Request) *http.Request {
	x := &exchange{}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, MaxCapturedBody+1))
		switch {
		case err != nil:
			// Forward what was read; upstream sees the client's failure.
			r.Body = io.NopCloser(bytes.NewReader(b))
		case len(b) > MaxCapturedBody:
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		default:
			x.body = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
	}
	return r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x))
}

// RequestBody returns, inside an OnAnswer hook, the body of a write of at
// most MaxCapturedBody bytes, else nil; do not modify it.
func RequestBody(r *http.Request) []byte {
	if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
		return x.body
	}
	return nil
}

// AnswerHeader returns, inside an OnAnswer hook, the upstream answer's
// header, else nil; do not modify it.
func AnswerHeader(r *http.Request) http.Header {
	if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
		return x.answerHeader
	}
	return nil
}

// hijackClose closes the client connection, with a TCP RST (SO_LINGER 0) if reset.
func hijackClose(w http.ResponseWriter, reset bool) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			if tc, ok := c.(*net.TCPConn); ok && reset {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
