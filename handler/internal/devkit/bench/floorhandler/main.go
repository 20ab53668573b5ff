// Command floorhandler is the bench's limit through the host: a custom
// handler that, as the only writer, makes one conditional write per message
// that changes an order and none for a duplicate or stale replay, with no
// cache policy, retries, parking or logging. Test code: nothing ships it.
//
// It reads FUNCTIONS_CUSTOMHANDLER_PORT, OrderStore__connectionString,
// OrderStore__tableName and ORDERSTATUS_CPU_PROFILE, and serves
// POST /OrderStatus, GET /api/orders/<id> (404 once the table exists) and
// GET /api/metrics (orderstatus_messages_total by subject and result).
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/cpuprofile"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
	"github.com/orderstatus/orderstatus/handler/internal/order"
	"github.com/orderstatus/orderstatus/handler/internal/store"
	"github.com/orderstatus/orderstatus/handler/internal/store/tablestore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floorhandler:", err)
		os.Exit(1)
	}
}

// known is what the only writer knows of an order's row.
type known struct {
	etag store.ETag
	last int64
}

type floor struct {
	s     *tablestore.Store
	mu    sync.Mutex
	rows  map[string]known
	count [3]atomic.Int64 // Applied, Duplicate, Stale
}

var results = [3]order.Result{order.Applied, order.Duplicate, order.Stale}

func run() error {
	port := os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT")
	if port == "" {
		return fmt.Errorf("FUNCTIONS_CUSTOMHANDLER_PORT not set")
	}
	stopProfile, err := cpuprofile.Start(os.Getenv(cpuprofile.Env))
	if err != nil {
		return err
	}
	defer stopProfile()
	s, err := tablestore.NewFromConnectionString(os.Getenv("OrderStore__connectionString"), os.Getenv("OrderStore__tableName"), nil)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.EnsureTable(ctx); err != nil {
		return err
	}
	f := &floor{s: s, rows: map[string]known{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /OrderStatus", f.orderStatus)
	mux.HandleFunc("GET /api/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	mux.HandleFunc("GET /api/metrics", f.metrics)
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func (f *floor) orderStatus(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var (
		msg hostproto.ServiceBusMessage
		u   order.Update
	)
	if err == nil {
		msg, err = hostproto.DecodeServiceBus(body, "message")
	}
	if err == nil {
		u, err = order.ParseUpdate(msg.Body, msg.SessionID)
	}
	if err != nil {
		hostproto.WriteResponse(w, http.StatusInternalServerError, hostproto.Response{Logs: []string{err.Error()}})
		return
	}
	// Sessions serialise an order's messages: the row cannot change meanwhile.
	f.mu.Lock()
	k, ok := f.rows[u.OrderID]
	f.mu.Unlock()
	i := 0
	switch {
	case ok && u.Sequence == k.last:
		i = 1
	case ok && u.Sequence < k.last:
		i = 2
	default:
		now := time.Now()
		st := order.State{Status: u.Status, LastSequence: u.Sequence, OccurredAt: u.OccurredAt, UpdatedAt: now}
		if !ok {
			k.etag, err = f.s.Insert(r.Context(), u.OrderID, st)
		} else {
			k.etag, err = f.s.Replace(r.Context(), u.OrderID, st, k.etag)
		}
		if err != nil {
			hostproto.WriteResponse(w, http.StatusServiceUnavailable, hostproto.Response{Logs: []string{err.Error()}})
			return
		}
		k.last = u.Sequence
		f.mu.Lock()
		f.rows[u.OrderID] = k
		f.mu.Unlock()
	}
	f.count[i].Add(1)
	hostproto.WriteResponse(w, http.StatusOK, hostproto.Response{ReturnValue: map[string]string{"result": string(results[i])}})
}

func (f *floor) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# TYPE orderstatus_messages_total counter")
	for i, res := range results {
		fmt.Fprintf(w, "orderstatus_messages_total{result=%q,subject=%q} %d\n", string(res), order.SubjectStatusChanged, f.count[i].Load())
	}
}
