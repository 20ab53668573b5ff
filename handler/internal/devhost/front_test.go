package devhost

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/devhost/funcapp"
)

func TestRouteMatch(t *testing.T) {
	tests := []struct {
		route string
		path  string
		want  bool
	}{
		{"orders/{orderId}", "/api/orders/o-1", true},
		{"orders/{orderId}", "/api/Orders/o-1", true},
		{"orders/{orderId}", "/api/orders/o%2F1", true},
		{"orders/{orderId}", "/api/orders/", false},
		{"orders/{orderId}", "/api/orders", false},
		{"orders/{orderId}", "/api/orders/o-1/x", false},
		{"orders/{orderId}", "/orders/o-1", false},
		{"orders/{id:int}", "/api/orders/5", true},
		{"metrics", "/api/metrics", true},
		{"metrics", "/api/metricsx", false},
		{"items/{id?}", "/api/items", true},
		{"items/{id?}", "/api/items/3", true},
		{"files/{*rest}", "/api/files/a/b/c", true},
		{"", "/api/Fn", true}, // the default route is the function name
	}
	for _, tt := range tests {
		t.Run(tt.route+" "+tt.path, func(t *testing.T) {
			r, err := newRoute("api", "Fn", funcapp.Binding{Route: tt.route})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.match(tt.path); got != tt.want {
				t.Errorf("match(%q) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
	for _, bad := range []string{"a//b", "{x", "{*rest}/x"} {
		if _, err := newRoute("api", "Fn", funcapp.Binding{Route: bad}); err == nil {
			t.Errorf("newRoute(%q): got nil error", bad)
		}
	}
}

func TestFrontForwards(t *testing.T) {
	h, up := testHost(t, appFiles(1), nil)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Seen", r.Method+" "+r.URL.RequestURI())
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, `{"from":"handler"}`)
	})
	base := "http://" + h.Addr()
	tests := []struct {
		method, path string
		wantStatus   int
		wantSeen     string
	}{
		{"GET", "/api/orders/o-1?x=1", http.StatusTeapot, "GET /api/orders/o-1?x=1"},
		{"GET", "/api/metrics", http.StatusTeapot, "GET /api/metrics"},
		{"POST", "/api/orders/o-1", http.StatusNotFound, ""},
		{"GET", "/api/unknown", http.StatusNotFound, ""},
		{"GET", "/OrderStatus", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || resp.Header.Get("X-Seen") != tt.wantSeen {
				t.Errorf("got %d %q (seen %q), want %d seen %q", resp.StatusCode, body, resp.Header.Get("X-Seen"), tt.wantStatus, tt.wantSeen)
			}
			if tt.wantSeen != "" && string(body) != `{"from":"handler"}` {
				t.Errorf("body: got %q, want the handler's", body)
			}
		})
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "/api/orders/{orderId}") {
		t.Errorf("GET /: got %d %q, want 200 listing the routes", resp.StatusCode, body)
	}
}
