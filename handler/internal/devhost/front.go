package devhost

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devhost/funcapp"
)

// route is one HTTP function's route template under the route prefix:
// literal segments, {name} (one segment; a :constraint is ignored),
// {name?} (an optional last segment) and {*name} (the rest).
type route struct {
	fn      string
	methods map[string]bool // upper case; empty: any method
	segs    []string
}

func newRoute(prefix, fn string, b funcapp.Binding) (route, error) {
	tmpl := b.Route
	if tmpl == "" {
		tmpl = fn // the host's default route is the function name
	}
	r := route{fn: fn, methods: map[string]bool{}}
	for _, m := range b.Methods {
		r.methods[strings.ToUpper(m)] = true
	}
	full := strings.Trim(prefix+"/"+strings.Trim(tmpl, "/"), "/")
	for i, s := range strings.Split(full, "/") {
		if s == "" {
			return route{}, fmt.Errorf("route %q: empty segment", tmpl)
		}
		if strings.HasPrefix(s, "{") != strings.HasSuffix(s, "}") {
			return route{}, fmt.Errorf("route %q: unbalanced braces in %q", tmpl, s)
		}
		if strings.HasPrefix(s, "{*") && i != len(strings.Split(full, "/"))-1 {
			return route{}, fmt.Errorf("route %q: a catch-all parameter must be last", tmpl)
		}
		r.segs = append(r.segs, s)
	}
	return r, nil
}

func isParam(s string) bool { return strings.HasPrefix(s, "{") }

// literals counts literal segments, for ordering.
func (r route) literals() int {
	n := 0
	for _, s := range r.segs {
		if !isParam(s) {
			n++
		}
	}
	return n
}

// less orders routes by specificity: more literal segments first, then
// more segments.
func (r route) less(o route) bool {
	if a, b := r.literals(), o.literals(); a != b {
		return a > b
	}
	return len(r.segs) > len(o.segs)
}

// expand returns the escaped path of the route with its one parameter
// set to value; false if the route has no parameter or more than one.
func (r route) expand(value string) (string, bool) {
	out := make([]string, len(r.segs))
	params := 0
	for i, s := range r.segs {
		if !isParam(s) {
			out[i] = url.PathEscape(s)
			continue
		}
		params++
		out[i] = url.PathEscape(value)
	}
	if params != 1 {
		return "", false
	}
	return "/" + strings.Join(out, "/"), true
}

// match reports whether the escaped path matches. Literals compare
// without regard to case, as in the host.
func (r route) match(escapedPath string) bool {
	parts := strings.Split(strings.Trim(escapedPath, "/"), "/")
	for i, s := range r.segs {
		switch {
		case strings.HasPrefix(s, "{*"):
			return true
		case i >= len(parts):
			return strings.HasSuffix(s, "?}") && i == len(r.segs)-1
		case isParam(s):
			if parts[i] == "" {
				return false
			}
		default:
			p, err := url.PathUnescape(parts[i])
			if err != nil || !strings.EqualFold(p, s) {
				return false
			}
		}
	}
	return len(parts) == len(r.segs)
}

// front forwards requests for HTTP functions to the handler of one
// instance after another (round robin), as the Functions front end spreads
// requests over a scaled-out app, and as the host does with
// enableForwardingHttpRequest: same method, path, query, headers
// and body; the handler's answer is passed back unchanged. Function keys
// are not checked.
type front struct {
	routes []route
	proc   readier // the instances, taken in turn
	log    *slog.Logger
	proxy  *httputil.ReverseProxy
}

type targetKey struct{}

func newFront(routes []route, proc readier, log *slog.Logger) http.Handler {
	f := &front{routes: routes, proc: proc, log: log}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(targetKey{}).(*url.URL))
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("forwarding to the handler failed", slog.String("path", r.URL.Path), slog.Any("error", err))
			http.Error(w, "the handler did not answer: "+err.Error(), http.StatusBadGateway)
		},
	}
	return f
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "orderstatus development host: the Functions app is running.")
		for _, rt := range f.routes {
			fmt.Fprintf(w, "  %s: /%s\n", rt.fn, strings.Join(rt.segs, "/"))
		}
		return
	}
	var found *route
	for i := range f.routes {
		if f.routes[i].match(r.URL.EscapedPath()) {
			found = &f.routes[i]
			break
		}
	}
	if found == nil || (len(found.methods) > 0 && !found.methods[r.Method]) {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	base, err := f.proc.Ready(ctx)
	cancel()
	if err != nil {
		http.Error(w, "the handler is not running: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	target, err := url.Parse(base)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, target)))
}
