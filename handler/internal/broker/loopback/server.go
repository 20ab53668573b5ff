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
	mux.HandleFunc("POST /broker/send", s.send)
	mux.HandleFunc("POST /broker/schedule", s.schedule)
	mux.HandleFunc("POST /broker/cancel", s.cancel)
	mux.HandleFunc("POST /broker/receive", s.receive)
	mux.HandleFunc("POST /broker/peek", s.peek)
	mux.HandleFunc("POST /broker/complete", s.complete)
	mux.HandleFunc("POST /broker/abandon", s.abandon)
	mux.HandleFunc("POST /broker/now", s.now)
	return mux
}

// clocked is a broker with a clock of its own.
type clocked interface{ Clock() clock.Clock }

type server struct {
	b     broker.Broker
	clock clock.Clock
}

func (s *server) now(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if !decode(w, r, &req) {
		return
	}
	writeJSON(w, http.StatusOK, nowResponse{Now: s.clock.Now()})
}

// decode reads the JSON request into v, answering 400 itself on failure.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, fmt.Errorf("loopback: %s: decode request: %v: %w", r.URL.Path, err, broker.ErrInvalid))
		return false
	}
	return true
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
	case errors.Is(err, broker.ErrTransient), errors.Is(err, context.DeadlineExceeded):
		return codeTransient, http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled):
		return codeTransient, http.StatusServiceUnavailable // the client went away
	default:
		return codeInternal, http.StatusInternalServerError
	}
}

func writeError(w http.ResponseWriter, err error) {
	code, status := errorCode(err)
	writeJSON(w, status, errorResponse{Error: wireError{Code: code, Message: err.Error()}})
}

func invalid(w http.ResponseWriter, format string, args ...any) {
	writeError(w, fmt.Errorf("loopback: "+format+": %w", append(args, broker.ErrInvalid)...))
}

func (s *server) send(w http.ResponseWriter, r *http.Request) {
	var req sendRequest
	if !decode(w, r, &req) {
		return
	}
	m, err := decodeMessage(req.Message)
	if err != nil {
		invalid(w, "send %s: %v", req.Queue, err)
		return
	}
	if err := s.b.Send(r.Context(), req.Queue, m); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *server) schedule(w http.ResponseWriter, r *http.Request) {
	var req scheduleRequest
	if !decode(w, r, &req) {
		return
	}
	m, err := decodeMessage(req.Message)
	if err != nil {
		invalid(w, "schedule %s: %v", req.Queue, err)
		return
	}
	seq, err := s.b.Schedule(r.Context(), req.Queue, m, s.view(r).ToClock(req.At))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, scheduleResponse{SequenceNumber: seq})
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	var req cancelRequest
	if !decode(w, r, &req) {
		return
	}
	if err := s.b.CancelScheduled(r.Context(), req.Queue, req.SequenceNumber); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *server) receive(w http.ResponseWriter, r *http.Request) {
	var req receiveRequest
	if !decode(w, r, &req) {
		return
	}
	wait, err := time.ParseDuration(req.Wait)
	if err != nil || wait < 0 {
		invalid(w, "receive %s: wait %q is not a duration of at least 0", req.Source.Queue, req.Wait)
		return
	}
	got, err := s.b.Receive(r.Context(), req.Source.source(), req.Max, wait)
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeMessages(w, r, got)
}

func (s *server) peek(w http.ResponseWriter, r *http.Request) {
	var req peekRequest
	if !decode(w, r, &req) {
		return
	}
	got, err := s.b.Peek(r.Context(), req.Source.source(), req.Max, req.From)
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeMessages(w, r, got)
}

// view maps the broker's clock to r's client's (HeaderClientTime).
func (s *server) view(r *http.Request) clock.View {
	t, err := time.Parse(time.RFC3339Nano, r.Header.Get(HeaderClientTime))
	if err != nil {
		return clock.Identity()
	}
	return clock.OffsetOf(s.clock, t)
}

// writeMessages answers got, its times on the client's clock.
func (s *server) writeMessages(w http.ResponseWriter, r *http.Request, got []broker.Received) {
	v := s.view(r)
	resp := messagesResponse{Messages: make([]wireReceived, len(got))}
	for i, m := range got {
		m.EnqueuedTime, m.ExpiresAt = v.ToReal(m.EnqueuedTime), v.ToReal(m.ExpiresAt)
		resp.Messages[i] = encodeReceived(m)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *server) complete(w http.ResponseWriter, r *http.Request) {
	s.settle(w, r, s.b.Complete)
}

func (s *server) abandon(w http.ResponseWriter, r *http.Request) {
	s.settle(w, r, s.b.Abandon)
}

func (s *server) settle(w http.ResponseWriter, r *http.Request, op func(context.Context, broker.Source, broker.Received) error) {
	var req settleRequest
	if !decode(w, r, &req) {
		return
	}
	m := broker.Received{SequenceNumber: req.SequenceNumber, LockToken: req.LockToken}
	if err := op(r.Context(), req.Source.source(), m); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
