// Package api routes the handler's HTTP surface: GET / (readiness), GET /api/orders/{orderId},
// GET /api/metrics and POST /<FunctionName> (hostproto). Errors are an ErrorBody: 400 bad
// input, 404 no route or order, 405 wrong method (Allow set), 503 store unavailable.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
)

// OrderReader reads one order's row (orderstate.Service.Get).
type OrderReader interface {
	Get(ctx context.Context, orderID string) (store.Row, error)
}

// Options wire the routes.
type Options struct {
	Orders   OrderReader
	Gatherer prometheus.Gatherer
	// Functions maps a non-HTTP function name to its handler, served at POST /<name>.
	Functions map[string]http.Handler
	Logger    *slog.Logger
	// ReadTimeout bounds GetOrder's storage read (default 10 s).
	ReadTimeout time.Duration
}

// New returns the handler's router.
func New(o Options) http.Handler {
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("/{$}", only(http.MethodGet, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})))
	orders := getOrder{orders: o.Orders, log: o.Logger, timeout: o.ReadTimeout}
	// GetOrder reads the id from the escaped path, so %2F is named, not cleaned away.
	mux.Handle("/api/orders/", only(http.MethodGet, orders))
	mux.Handle("/api/orders", notFound{})
	mux.Handle("/api/metrics", only(http.MethodGet, promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)})))
	for name, h := range o.Functions {
		mux.Handle("/"+name, only(http.MethodPost, h))
	}
	mux.Handle("/", notFound{})
	return mux
}

// ErrorBody is every error answer of the HTTP surface and of the dev host's front.
type ErrorBody struct {
	// Error says what is wrong, in a sentence.
	Error string `json:"error"`
	// Path is the request's path, as sent (escaped).
	Path string `json:"path"`
	// OrderID is the order concerned, when there is one.
	OrderID string `json:"orderId,omitempty"`
}

// WriteError answers status with an ErrorBody.
func WriteError(w http.ResponseWriter, r *http.Request, status int, msg, orderID string) {
	writeJSON(w, status, ErrorBody{Error: msg, Path: r.URL.EscapedPath(), OrderID: orderID})
}

// only serves h for method (GET includes HEAD), else answers 405 with Allow.
func only(method string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Allow", method)
		WriteError(w, r, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed here; use "+method, "")
	})
}

// notFound answers 404: an ErrorBody, or in the host protocol to a POST outside /api/.
type notFound struct{}

func (notFound) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && !strings.HasPrefix(r.URL.Path, "/api/") {
		hostproto.WriteResponse(w, http.StatusNotFound, hostproto.Response{Logs: []string{"no function at " + r.URL.EscapedPath()}})
		return
	}
	WriteError(w, r, http.StatusNotFound, "not found: no route here (GET /api/orders/{orderId}, GET /api/metrics)", "")
}

// OrderView is the GetOrder answer.
type OrderView struct {
	OrderID      string    `json:"orderId"`
	Status       string    `json:"status"`
	LastSequence int64     `json:"lastSequence"`
	OccurredAt   time.Time `json:"occurredAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

type getOrder struct {
	orders  OrderReader
	log     *slog.Logger
	timeout time.Duration
}

func (g getOrder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/api/orders/")
	if strings.Contains(rest, "/") {
		WriteError(w, r, http.StatusNotFound, "not found: GetOrder is /api/orders/{orderId}, one path segment (an order id never contains /)", "")
		return
	}
	id, err := url.PathUnescape(rest)
	if err != nil {
		WriteError(w, r, http.StatusBadRequest, "illegal order id: bad escape in "+strconv.Quote(rest), "")
		return
	}
	if err := order.ValidateID(id); err != nil {
		var pe *order.PoisonError
		msg := err.Error()
		if errors.As(err, &pe) {
			msg = pe.Description
		}
		WriteError(w, r, http.StatusBadRequest, "illegal order id: "+msg, "")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
	defer cancel()
	row, err := g.orders.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		WriteError(w, r, http.StatusNotFound, "order not found", id)
	case err != nil:
		g.log.Error("get order failed", "order_id", id, "error", err.Error())
		status := http.StatusInternalServerError
		if errors.Is(err, store.ErrTransient) || errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusServiceUnavailable
		}
		WriteError(w, r, status, "store unavailable", id)
	default:
		writeJSON(w, http.StatusOK, OrderView{
			OrderID: row.OrderID, Status: string(row.State.Status), LastSequence: row.State.LastSequence,
			OccurredAt: row.State.OccurredAt.UTC(), UpdatedAt: row.State.UpdatedAt.UTC(),
		})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
