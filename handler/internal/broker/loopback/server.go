package loopback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/clock"
)

// maxRequestBytes bounds a request body: many 256 KiB messages in base64.
const maxRequestBytes = 4 << 20

// HeaderClientTime carries the client's time of a request (RFC 3339): the
// server shifts times by its difference from a development broker's faster
// clock (clock.OffsetOf), so real-time clients cannot tell.
const HeaderClientTime = "X-Loopback-Client-Time"

// NewServer returns the handler of the /broker/ endpoints serving b, moving
// times between b's own clock and the client's (HeaderClientTime).
func NewServer(b broker.Broker) http.Handler {
	s := &server{b: b, clock: clock.Real()}
	if c, ok := b.(clocked); ok {
		s.clock = c.Clock()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /broker/send", endpoint(func(r *http.Request, req sendRequest) (any, error) {
		m, err := decodeMessage(req.Message)
		if err != nil {
			return nil, invalid("send %s: %v", req.Queue, err)
		}
		return struct{}{}, s.b.Send(r.Context(), req.Queue, m)
	}))
	mux.HandleFunc("POST /broker/schedule", endpoint(func(r *http.Request, req scheduleRequest) (any, error) {
		m, err := decodeMessage(req.Message)
		if err != nil {
			return nil, invalid("schedule %s: %v", req.Queue, err)
		}
		seq, err := s.b.Schedule(r.Context(), req.Queue, m, s.view(r).ToClock(req.At))
		return scheduleResponse{SequenceNumber: seq}, err
	}))
	mux.HandleFunc("POST /broker/cancel", endpoint(func(r *http.Request, req cancelRequest) (any, error) {
		return struct{}{}, s.b.CancelScheduled(r.Context(), req.Queue, req.SequenceNumber)
	}))
	mux.HandleFunc("POST /broker/receive", endpoint(func(r *http.Request, req receiveRequest) (any, error) {
		wait, err := time.ParseDuration(req.Wait)
		if err != nil || wait < 0 {
			return nil, invalid("receive %s: wait %q is not a duration of at least 0", req.Source.Queue, req.Wait)
		}
		got, err := s.b.Receive(r.Context(), broker.Source(req.Source), req.Max, wait)
		return s.messages(r, got), err
	}))
	mux.HandleFunc("POST /broker/peek", endpoint(func(r *http.Request, req peekRequest) (any, error) {
		got, err := s.b.Peek(r.Context(), broker.Source(req.Source), req.Max, req.From)
		return s.messages(r, got), err
	}))
	settle := func(op func(context.Context, broker.Source, broker.Received) error) http.HandlerFunc {
		return endpoint(func(r *http.Request, req settleRequest) (any, error) {
			m := broker.Received{SequenceNumber: req.SequenceNumber, LockToken: req.LockToken}
			return struct{}{}, op(r.Context(), broker.Source(req.Source), m)
		})
	}
	mux.HandleFunc("POST /broker/complete", settle(s.b.Complete))
	mux.HandleFunc("POST /broker/abandon", settle(s.b.Abandon))
	mux.HandleFunc("POST /broker/now", endpoint(func(*http.Request, struct{}) (any, error) {
		return nowResponse{Now: s.clock.Now()}, nil
	}))
	return mux
}

// endpoint serves one method: the JSON request decoded into Req (else 400),
// f's answer as JSON, or its error as the wire's error.
func endpoint[Req any](f func(r *http.Request, req Req) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, fmt.Errorf("loopback: %s: decode request: %v: %w", r.URL.Path, err, broker.ErrInvalid))
			return
		}
		resp, err := f(r, req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	}
}

// clocked is a broker with a clock of its own.
type clocked interface{ Clock() clock.Clock }

type server struct {
	b     broker.Broker
	clock clock.Clock
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client sees a broken body
}

// errorCode maps an error to its wire code and HTTP status.
func errorCode(err error) (string, int) {
	switch {
	case errors.Is(err, broker.ErrLockLost):
		return codeLockLost, http.StatusConflict
	case errors.Is(err, broker.ErrNotFound):
		return codeNotFound, http.StatusNotFound
	case errors.Is(err, broker.ErrInvalid):
		return codeInvalid, http.StatusBadRequest
	case errors.Is(err, broker.ErrTransient), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled): // Canceled: the client went away
		return codeTransient, http.StatusServiceUnavailable
	default:
		return codeInternal, http.StatusInternalServerError
	}
}

func writeError(w http.ResponseWriter, err error) {
	code, status := errorCode(err)
	writeJSON(w, status, errorResponse{Error: wireError{Code: code, Message: err.Error()}})
}

// invalid is an ErrInvalid with the message format and args make.
func invalid(format string, args ...any) error {
	return fmt.Errorf("loopback: "+format+": %w", append(args, broker.ErrInvalid)...)
}

// view maps the broker's clock to r's client's (HeaderClientTime).
func (s *server) view(r *http.Request) clock.View {
	t, err := time.Parse(time.RFC3339Nano, r.Header.Get(HeaderClientTime))
	if err != nil {
		return clock.Identity()
	}
	return clock.OffsetOf(s.clock, t)
}

// messages is got as the answer, its times on r's client's clock.
func (s *server) messages(r *http.Request, got []broker.Received) messagesResponse {
	v := s.view(r)
	resp := messagesResponse{Messages: make([]wireReceived, len(got))}
	for i, m := range got {
		m.EnqueuedTime, m.ExpiresAt = v.ToReal(m.EnqueuedTime), v.ToReal(m.ExpiresAt)
		resp.Messages[i] = encodeReceived(m)
	}
	return resp
}
