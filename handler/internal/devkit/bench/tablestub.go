package bench

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/azurite"
)

// tableStub is a minimal Table service for the memory run: it accepts every
// table creation and insert and finds no row, keeping nothing, so the run
// measures the handler's memory, not Azurite.
type tableStub struct {
	srv     *http.Server
	addr    string
	inserts atomic.Int64
}

func startTableStub() (*tableStub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &tableStub{addr: ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *tableStub) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/"+azurite.AccountName)
	w.Header().Set("x-ms-version", "2019-02-02")
	switch {
	case r.Method == http.MethodPost && path == "/Tables":
		w.Header().Set("Content-Type", "application/json;odata=nometadata")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"TableName":"stub"}`))
	case r.Method == http.MethodPost:
		n := s.inserts.Add(1)
		w.Header().Set("ETag", fmt.Sprintf(`W/"datetime'2026-12-01T00%%3A00%%3A00.%07dZ'"`, n%10000000))
		w.Header().Set("Preference-Applied", "return-no-content")
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json;odata=minimalmetadata")
		w.Header().Set("x-ms-error-code", "ResourceNotFound")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"odata.error":{"code":"ResourceNotFound","message":{"lang":"en-US","value":"The specified resource does not exist."}}}`))
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

// connectionString is an Azurite-style connection string to the stub.
func (s *tableStub) connectionString() string { return azurite.ConnectionString(s.addr) }

func (s *tableStub) close() { _ = s.srv.Close() }
