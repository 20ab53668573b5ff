// Package api routes the handler's HTTP surface: the readiness probe the
// Functions host polls (GET /), forwarded HTTP functions (GET
// /api/orders/{orderId}, GET /api/metrics) and invocations of non-HTTP
// functions (POST /<FunctionName>). Every answer is JSON except the
// Prometheus text of /api/metrics.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
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
	// Functions maps a non-HTTP function name (the folder of its
	// function.json) to its handler, served at POST /<name>.
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
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	orders := getOrder{orders: o.Orders, log: o.Logger, timeout: o.ReadTimeout}
	mux.Handle("GET /api/orders/{orderId}", orders)
	mux.Handle("GET /api/orders/{$}", orders) // empty id: 400
	mux.Handle("GET /api/metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)}))
	for name, h := range o.Functions {
		mux.Handle("POST /"+name, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Unknown function or route: JSON, never an empty body.
		if r.Method == http.MethodPost {
			hostproto.WriteResponse(w, http.StatusNotFound, hostproto.Response{Logs: []string{"no function at " + r.URL.Path}})
			return
		}
		writeJSON(w, http.StatusNotFound, errorBody{Error: "not found", Path: r.URL.Path})
	})
	return mux
}

type errorBody struct {
	Error   string `json:"error"`
	OrderID string `json:"orderId,omitempty"`
	Path    string `json:"path,omitempty"`
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
	id := r.PathValue("orderId")
	if err := order.ValidateID(id); err != nil {
		var pe *order.PoisonError
		msg := err.Error()
		if errors.As(err, &pe) {
			msg = pe.Description
		}
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "illegal order id: " + msg})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
	defer cancel()
	row, err := g.orders.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeJSON(w, http.StatusNotFound, errorBody{Error: "order not found", OrderID: id})
	case err != nil:
		g.log.Error("get order failed", "order_id", id, "error", err.Error())
		status := http.StatusInternalServerError
		if errors.Is(err, store.ErrTransient) || errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, errorBody{Error: "store unavailable", OrderID: id})
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
