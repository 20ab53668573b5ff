package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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
		{"server busy", Always(ServerBusy), "GET", 503, 0},
		{"drop", Always(Drop), "GET", 0, 0},
		{"lose answer still reaches upstream", Always(LoseAnswer), "PUT", 0, 1},
		{"writes only: read passes", Writes(ServerBusy), "GET", 200, 1},
		{"writes only: write fails", Writes(ServerBusy), "PUT", 503, 0},
		{"until in the past passes", Until(time.Now().Add(-time.Second), Always(Drop)), "GET", 200, 1},
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
