package devhost

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/orderstatus/orderstatus/handler/internal/api"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/funcapp"
)

func TestRouteMatch(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
		{"GET", "/api/orders/%2F", http.StatusTeapot, "GET /api/orders/%2F"}, // the handler names the /
		{"GET", "/api/orders/a%2Fb", http.StatusTeapot, "GET /api/orders/a%2Fb"},
		{"POST", "/api/orders/o-1", http.StatusMethodNotAllowed, ""},
		{"GET", "/api/orders/a/b", http.StatusNotFound, ""},
		{"GET", "/api/unknown", http.StatusNotFound, ""},
		{"GET", "/OrderStatus", http.StatusNotFound, ""},
	}
	wantError := map[string]string{ // what the front's own answers say
		"POST /api/orders/o-1": "method POST not allowed: GetOrder takes GET",
		"GET /api/orders/a/b":  "not found: no function route matches: GetOrder is /api/orders/{orderId} (a parameter is one path segment",
		"GET /api/unknown":     "not found: no function route matches",
		"GET /OrderStatus":     "not found: no function route matches",
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
			if tt.wantSeen == "" {
				var e api.ErrorBody
				dec := json.NewDecoder(strings.NewReader(string(body)))
				dec.DisallowUnknownFields()
				err := dec.Decode(&e)
				want := wantError[tt.method+" "+tt.path]
				if err != nil || !strings.HasPrefix(e.Error, want) || e.Path != tt.path || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
					t.Errorf("front's answer %s %q (%v): want the handler's error shape, path %s, error starting %q", resp.Header.Get("Content-Type"), body, err, tt.path, want)
				}
				if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET" {
					t.Errorf("Allow %q, want GET", resp.Header.Get("Allow"))
				}
			}
		})
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list struct {
		Functions []struct{ Name, Route string } `json:"functions"`
	}
	if err := json.Unmarshal(body, &list); resp.StatusCode != http.StatusOK || err != nil || !slices.ContainsFunc(list.Functions, func(f struct{ Name, Route string }) bool {
		return f.Name == "GetOrder" && f.Route == "/api/orders/{orderId}"
	}) {
		t.Errorf("GET /: got %d %q, want 200 and JSON listing GetOrder's route", resp.StatusCode, body)
	}
}
