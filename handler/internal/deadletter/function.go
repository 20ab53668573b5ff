package deadletter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
	"github.com/orderstatus/orderstatus/handler/internal/hostproto"
)

// FunctionName is the timer function (functions/DeadLetterSweeper), TimerBinding its trigger.
const (
	FunctionName = "DeadLetterSweeper"
	TimerBinding = "timer"
)

// Summary is the timer function's ReturnValue.
type Summary struct {
	RunID   string                 `json:"runId"`
	Counts  map[Action]int         `json:"counts"`
	Depth   map[dlstore.Source]int `json:"depth"`
	Stopped string                 `json:"stopped,omitempty"`
	Error   string                 `json:"error,omitempty"`
}

// Function returns the handler of POST /DeadLetterSweeper, one sweep per timer call: 200 with
// a Summary and the stats lines as Logs, else StatusFor's, 500 for a nil s, 400 on a bad payload.
func Function(s *Sweeper, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			log.Error("dead-letter sweep skipped: no Service Bus configured")
			hostproto.WriteResponse(w, http.StatusInternalServerError, hostproto.Response{Logs: []string{"dead-letter sweep skipped: no Service Bus configured"}})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err == nil {
			var info hostproto.TimerInfo
			info, err = hostproto.DecodeTimer(body, TimerBinding)
			if err == nil && info.IsPastDue {
				log.Info("dead-letter sweep is past due", "function", FunctionName)
			}
		}
		if err != nil {
			log.Error("dead-letter sweep: bad timer invocation", "error", err.Error())
			hostproto.WriteResponse(w, http.StatusBadRequest, hostproto.Response{Logs: []string{"bad timer invocation: " + err.Error()}})
			return
		}
		rep, err := s.Run(r.Context(), RunOptions{Actor: ActorSweeper})
		sum := Summary{RunID: rep.RunID, Counts: rep.Counts, Depth: map[dlstore.Source]int{}, Stopped: rep.Stopped}
		for _, st := range rep.Stats {
			sum.Depth[st.Source] += st.Depth
		}
		logs := append([]string(nil), rep.StatsLines...)
		status := http.StatusOK
		if err != nil {
			status = StatusFor(err)
			sum.Error = err.Error()
			logs = append(logs, "dead-letter sweep failed: "+err.Error())
			log.Error("dead-letter sweep failed", "run_id", rep.RunID, "error", err.Error(), "status", status)
		} else {
			logs = append(logs, fmt.Sprintf("dead-letter sweep %s: %v", rep.RunID, rep.Counts))
		}
		hostproto.WriteResponse(w, status, hostproto.Response{Logs: logs, ReturnValue: sum})
	})
}

// StatusFor maps a run's error to 503 when a service could not be reached, else 500.
func StatusFor(err error) int {
	switch {
	case errors.Is(err, dlstore.ErrUnavailable), errors.Is(err, broker.ErrTransient),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
