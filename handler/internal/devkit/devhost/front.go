package devhost

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/api"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/funcapp"
)

// route is one HTTP function's route template under the route prefix:
// literals, {name} (:constraint ignored), {name?} (last) and {*name} (the rest).
type route struct {
	fn      string
	methods map[string]bool // upper case; empty: any method
	segs    []string
}

func newRoute(prefix, fn string, b funcapp.Binding) (route, error) {
	tmpl := cmp.Or(b.Route, fn) // the host's default route is the function name
	full := strings.Trim(prefix+"/"+strings.Trim(tmpl, "/"), "/")
	r := route{fn: fn, methods: map[string]bool{}, segs: strings.Split(full, "/")}
	for _, m := range b.Methods {
		r.methods[strings.ToUpper(m)] = true
	}
	for i, s := range r.segs {
		switch {
		case s == "":
			return route{}, fmt.Errorf("route %q: empty segment", tmpl)
		case strings.HasPrefix(s, "{") != strings.HasSuffix(s, "}"):
			return route{}, fmt.Errorf("route %q: unbalanced braces in %q", tmpl, s)
		case strings.HasPrefix(s, "{*") && i != len(r.segs)-1:
			return route{}, fmt.Errorf("route %q: a catch-all parameter must be last", tmpl)
		}
	}
	return r, nil
}

func isParam(s string) bool { return strings.HasPrefix(s, "{") }

// bySpecificity orders routes by specificity: more literals first, then more segments.
func bySpecificity(a, b route) int {
	literals := func(r route) int { return len(slices.DeleteFunc(slices.Clone(r.segs), isParam)) }
	return cmp.Or(cmp.Compare(literals(b), literals(a)), cmp.Compare(len(b.segs), len(a.segs)))
}

// expand returns the route's escaped path with its one parameter set to value.
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

// match reports whether the escaped path matches (literals in any case, as in the host).
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

// front forwards HTTP function requests unchanged to the instances' handlers
// in turn, as the host does with enableForwardingHttpRequest (function keys
// are not checked); its own answers are JSON, errors as api.ErrorBody.
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
			api.WriteError(w, r, http.StatusBadGateway, "the handler did not answer: "+err.Error(), "")
		},
	}
	return f
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		type fn struct {
			Name    string   `json:"name"`
			Route   string   `json:"route"`
			Methods []string `json:"methods,omitempty"`
		}
		list := struct {
			Status    string `json:"status"`
			Functions []fn   `json:"functions"`
		}{Status: "the orderstatus development host is running", Functions: []fn{}}
		for _, rt := range f.routes {
			list.Functions = append(list.Functions, fn{rt.fn, "/" + strings.Join(rt.segs, "/"), rt.allowed()})
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	i := slices.IndexFunc(f.routes, func(rt route) bool { return rt.match(r.URL.EscapedPath()) })
	if i < 0 {
		api.WriteError(w, r, http.StatusNotFound, "not found: no function route matches"+f.nearest(r.URL.EscapedPath()), "")
		return
	}
	found := f.routes[i]
	if len(found.methods) > 0 && !found.methods[r.Method] {
		allowed := found.allowed()
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		api.WriteError(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: %s takes %s", r.Method, found.fn, strings.Join(allowed, ", ")), "")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	base, err := f.proc.Ready(ctx)
	cancel()
	if err != nil {
		api.WriteError(w, r, http.StatusServiceUnavailable, "the handler is not running: "+err.Error(), "")
		return
	}
	target, err := url.Parse(base)
	if err != nil {
		api.WriteError(w, r, http.StatusInternalServerError, err.Error(), "")
		return
	}
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, target)))
}

// allowed lists the route's methods, sorted (none: any).
func (r route) allowed() []string { return slices.Sorted(maps.Keys(r.methods)) }

// nearest names the routes sharing the path's first literals, a near miss's hint.
func (f *front) nearest(escapedPath string) string {
	parts := strings.Split(strings.Trim(escapedPath, "/"), "/")
	var near []string
	for _, rt := range f.routes {
		lit := 0
		for lit < len(rt.segs) && !isParam(rt.segs[lit]) {
			lit++
		}
		if lit > 0 && lit <= len(parts) && slices.EqualFunc(parts[:lit], rt.segs[:lit], strings.EqualFold) {
			near = append(near, rt.fn+" is /"+strings.Join(rt.segs, "/"))
		}
	}
	if len(near) == 0 {
		return ""
	}
	return ": " + strings.Join(near, "; ") + " (a parameter is one path segment: an order id never contains /)"
}
