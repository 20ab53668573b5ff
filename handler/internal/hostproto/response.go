package hostproto

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Response is a custom handler's answer to a non-HTTP invocation. Logs
// reach Application Insights as traces of the invocation, but only when it
// succeeds.
type Response struct {
	Outputs     map[string]any `json:"Outputs"`
	Logs        []string       `json:"Logs"`
	ReturnValue any            `json:"ReturnValue"`
}

// WriteResponse writes r with status and Content-Type application/json,
// which the host requires (text/plain or a body that is not JSON fails the
// invocation, and an empty body hangs it until functionTimeout). Any 2xx
// status completes a Service Bus message; any other abandons it.
//
// A nil Outputs is written as {} and a nil Logs as []. The body is never
// empty: if r does not encode as JSON, or status is not between 200 and
// 599, it writes status 500 with the reason in Logs instead, so the
// invocation fails (and a message is redelivered) rather than hangs.
// Errors writing to w are ignored: the connection is gone.
func WriteResponse(w http.ResponseWriter, status int, r Response) {
	if r.Outputs == nil {
		r.Outputs = map[string]any{}
	}
	if r.Logs == nil {
		r.Logs = []string{}
	}
	body, err := json.Marshal(r)
	switch {
	case err != nil:
		body = fallbackBody("hostproto: encoding the response: " + err.Error())
		status = http.StatusInternalServerError
	case status < 200 || status > 599:
		body = fallbackBody("hostproto: invalid response status " + strconv.Itoa(status))
		status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// fallbackBody is a response holding one log line; it always encodes.
func fallbackBody(line string) []byte {
	b, _ := json.Marshal(Response{Outputs: map[string]any{}, Logs: []string{line}})
	return b
}
