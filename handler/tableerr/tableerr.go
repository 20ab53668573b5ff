// Package tableerr holds the failure descriptions every Table Storage
// adapter in this module shares: which errors are the connection's rather
// than the service's, and how to describe an error without leaking the SAS
// token a request URL may carry.
//
// It is public because the producers' outbox (package outbox) shares it;
// the adapters (the order store, the dead-letter store, the producers'
// outbox) each map service answers to their own port's sentinels; only
// these two questions are the same for all of them.
package tableerr

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// IsConnection reports failures below HTTP: refused or reset connections,
// timeouts, DNS, a connection closed mid-answer. Such a failure says
// nothing about the request, so callers treat it as retryable.
func IsConnection(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Redact describes err on one line without the request URL's query string,
// fragment or user info, where a SAS token or credentials would be: a
// *url.Error becomes "Op scheme://host/path: cause".
func Redact(err error) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return strings.ReplaceAll(err.Error(), "\n", " ")
	}
	where := ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil {
		u.RawQuery, u.Fragment, u.User = "", "", nil
		where = u.String()
	} else if i := strings.IndexByte(where, '?'); i >= 0 {
		where = where[:i]
	}
	return strings.ReplaceAll(ue.Op+" "+where+": "+ue.Err.Error(), "\n", " ")
}
