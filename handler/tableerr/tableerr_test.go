package tableerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"syscall"
	"testing"
)

func TestIsConnection(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"closed mid-answer", fmt.Errorf("body: %w", io.ErrUnexpectedEOF), true},
		{"eof", &url.Error{Op: "Get", URL: "http://127.0.0.1/t", Err: io.EOF}, true},
		{"timeout", &url.Error{Op: "Get", URL: "http://127.0.0.1/t", Err: context.DeadlineExceeded}, true},
		{"service answer", errors.New("409 EntityAlreadyExists"), false},
		{"canceled alone", context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsConnection(tt.err); got != tt.want {
				t.Errorf("IsConnection(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name, want string
		err        error
	}{
		{
			name: "sas token dropped",
			err:  &url.Error{Op: "Post", URL: "https://acct.table.core.windows.net/orders?sv=2024&sig=SECRET", Err: io.EOF},
			want: "Post https://acct.table.core.windows.net/orders: EOF",
		},
		{
			name: "user info and fragment dropped",
			err:  &url.Error{Op: "Get", URL: "http://user:pw@127.0.0.1:10002/t#frag", Err: syscall.ECONNREFUSED},
			want: "Get http://127.0.0.1:10002/t: connection refused",
		},
		{
			name: "unparsable url still loses its query",
			err:  &url.Error{Op: "Get", URL: "http://[::1/t?sig=SECRET", Err: io.EOF},
			want: "Get http://[::1/t: EOF",
		},
		{
			name: "wrapped url error found",
			err:  fmt.Errorf("upsert: %w", &url.Error{Op: "Put", URL: "http://h/t?sig=SECRET", Err: io.EOF}),
			want: "Put http://h/t: EOF",
		},
		{
			name: "other errors on one line",
			err:  errors.New("first\nsecond"),
			want: "first second",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.err)
			if got != tt.want {
				t.Errorf("Redact = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "SECRET") || strings.Contains(got, "pw@") {
				t.Errorf("Redact leaked a credential: %q", got)
			}
		})
	}
}
