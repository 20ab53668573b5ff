package devhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/child"
	"github.com/orderstatus/orderstatus/handler/internal/devkit/hostenc"
)

// readier gives the handler's base URL once it answers (child.Process).
type readier interface {
	Ready(ctx context.Context) (string, error)
}

var _ readier = (*child.Process)(nil)

// invoker POSTs non-HTTP invocations to the handler as the host does.
type invoker struct {
	proc    readier
	client  *http.Client
	timeout time.Duration // functionTimeout; 0: none
	log     *slog.Logger
	// notFound holds the functions the handler answered 404 for (logged once).
	notFound sync.Map
}

// newInvoker returns an invoker for proc's handler; like the host, it follows no redirect.
func newInvoker(proc readier, timeout time.Duration, log *slog.Logger) *invoker {
	return &invoker{proc: proc, client: newLoopbackClient(), timeout: timeout, log: log}
}

// close closes the idle connections to the handler.
func (iv *invoker) close() { iv.client.CloseIdleConnections() }

// answer is the handler's answer to one invocation.
type answer struct {
	Status int
	// Result is ReturnValue.result, "" when absent.
	Result string
	Logs   []string
}

// OK reports a 2xx status: the host counts the invocation as a success.
func (a answer) OK() bool { return a.Status >= 200 && a.Status < 300 }

// errNoAnswer wraps failures to get any HTTP answer.
var errNoAnswer = errors.New("no answer from the handler")

// invoke POSTs body to /<function> once the handler is ready; no answer is
// errNoAnswer, and a 2xx that is not JSON fails, as in the host.
func (iv *invoker) invoke(ctx context.Context, function string, body []byte) (answer, error) {
	if iv.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, iv.timeout)
		defer cancel()
	}
	id := hostenc.NewGUID()
	var resp *http.Response
	for {
		base, err := iv.proc.Ready(ctx)
		if err != nil {
			return answer{}, fmt.Errorf("%w: %v", errNoAnswer, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/"+function, bytes.NewReader(body))
		if err != nil {
			return answer{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Azure-Functions-InvocationId", id)
		resp, err = iv.client.Do(req)
		if err == nil {
			break
		}
		// Refused: the handler is being restarted; wait for it, as the host does.
		if errors.Is(err, syscall.ECONNREFUSED) && ctx.Err() == nil {
			pause(ctx, 20*time.Millisecond)
			continue
		}
		return answer{}, fmt.Errorf("%w: POST /%s: %v", errNoAnswer, function, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return answer{}, fmt.Errorf("%w: POST /%s: reading the answer: %v", errNoAnswer, function, err)
	}
	a := answer{Status: resp.StatusCode}
	if resp.StatusCode == http.StatusNotFound {
		if _, seen := iv.notFound.LoadOrStore(function, true); !seen {
			iv.log.Warn("the handler does not implement this function (404); its invocations fail", slog.String("function", function))
		}
	}
	var r struct {
		Logs        []string        `json:"Logs"`
		ReturnValue json.RawMessage `json:"ReturnValue"`
	}
	fail := func(why string) (answer, error) {
		iv.log.Warn("invocation failed: "+why, slog.String("function", function), slog.Int("status", resp.StatusCode))
		a.Status = http.StatusInternalServerError
		a.Logs = []string{"devhost: " + why}
		return a, nil
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch err := json.Unmarshal(data, &r); {
	case !a.OK():
		if err != nil {
			return a, nil
		}
	case len(bytes.TrimSpace(data)) == 0:
		return fail("the answer is empty; the host would wait for it until functionTimeout")
	case mediaType != "application/json":
		return fail(fmt.Sprintf("the answer's Content-Type is %q, the host fails an invocation without application/json", resp.Header.Get("Content-Type")))
	case err != nil:
		return fail("the answer is not JSON, the host fails such an invocation: " + err.Error())
	}
	a.Logs, a.Result = r.Logs, resultOf(r.ReturnValue)
	return a, nil
}

// awaitHealthy returns once the handler answers GET /, ctx ends or supervision
// gave up, so that a redelivery goes to a live handler.
func (iv *invoker) awaitHealthy(ctx context.Context) {
	for ctx.Err() == nil {
		base, err := iv.proc.Ready(ctx)
		if err != nil {
			return
		}
		probeCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, _ := http.NewRequestWithContext(probeCtx, http.MethodGet, base+"/", nil)
		resp, err := iv.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		}
		cancel()
		if err == nil {
			return
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// resultOf reads ReturnValue.result from an object, or a JSON string holding one.
func resultOf(rv json.RawMessage) string {
	var s string
	if t := bytes.TrimLeft(rv, " \t\r\n"); len(t) > 0 && t[0] == '"' && json.Unmarshal(rv, &s) == nil {
		rv = json.RawMessage(s)
	}
	var v struct {
		Result string `json:"result"`
	}
	if json.Unmarshal(rv, &v) == nil {
		return v.Result
	}
	return ""
}
