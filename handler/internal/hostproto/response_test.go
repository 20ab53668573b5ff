package hostproto

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestWriteResponse(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		r          Response
		wantStatus int
		wantBody   string
	}{
		{"zero response", 200, Response{}, 200, `{"Outputs":{},"Logs":[],"ReturnValue":null}`},
		{"logs and return value", 200, Response{Logs: []string{"applied o-1 seq 2"}, ReturnValue: "Applied"}, 200,
			`{"Outputs":{},"Logs":["applied o-1 seq 2"],"ReturnValue":"Applied"}`},
		{"outputs", 200, Response{Outputs: map[string]any{"res": map[string]any{"statusCode": 200}}}, 200,
			`{"Outputs":{"res":{"statusCode":200}},"Logs":[],"ReturnValue":null}`},
		{"failure keeps its status", 503, Response{Logs: []string{"store: transient failure"}}, 503,
			`{"Outputs":{},"Logs":["store: transient failure"],"ReturnValue":null}`},
		{"unencodable return value", 200, Response{ReturnValue: make(chan int)}, 500, ""},
		{"unencodable output", 200, Response{Outputs: map[string]any{"x": func() {}}}, 500, ""},
		{"status zero", 0, Response{}, 500, ""},
		{"informational status", 102, Response{}, 500, ""},
		{"status beyond 599", 1000, Response{}, 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteResponse(rec, tt.status, tt.r)
			res := rec.Result()
			if res.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", res.StatusCode, tt.wantStatus)
			}
			if got := res.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			body := rec.Body.String()
			if got := res.Header.Get("Content-Length"); got != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length = %q, want %d", got, len(body))
			}
			var decoded Response
			if err := json.Unmarshal([]byte(body), &decoded); err != nil {
				t.Fatalf("body %q is not a JSON response: %v", body, err)
			}
			if decoded.Outputs == nil || decoded.Logs == nil {
				t.Errorf("body %s: Outputs and Logs must be present, never null", body)
			}
			if tt.wantBody != "" && body != tt.wantBody {
				t.Errorf("body = %s, want %s", body, tt.wantBody)
			}
			if tt.wantStatus == http.StatusInternalServerError && tt.status != 500 && len(decoded.Logs) != 1 {
				t.Errorf("fallback body %s, want one log line with the reason", body)
			}
		})
	}
}
