// Package tableerr classifies Table Storage failures for every table adapter
// (order store, dead-letter store, producers' outbox): Classify sorts an SDK error
// into a Kind, and no description carries the SAS token a request URL may hold.
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
// timeouts, DNS, a connection closed mid-answer; callers retry them.
func IsConnection(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Redact describes err on one line without the request URL's query string,
// fragment or user info: a *url.Error becomes "Op scheme://host/path: cause".
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
