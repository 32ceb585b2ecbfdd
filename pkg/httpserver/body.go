package httpserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/contentledger/contentledger/pkg/apierror"
)

// LimitBody bounds r's body to limit bytes: a declared Content-Length over
// it is refused at once (413 content_too_large), and a body that runs past
// it fails its next read with *http.MaxBytesError (TooLarge), which also
// closes the connection after the answer. Nothing is allocated from the
// declared length.
func LimitBody(w http.ResponseWriter, r *http.Request, limit int64) *apierror.Error {
	if r.ContentLength > limit {
		return TooLarge(limit)
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	return nil
}

// TooLarge is the error of a body over limit bytes.
func TooLarge(limit int64) *apierror.Error {
	return apierror.New(apierror.ContentTooLarge, "request body exceeds %d bytes", limit).WithDetail("limit", limit)
}

// IsTooLarge reports whether err is a read past a LimitBody limit.
func IsTooLarge(err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig)
}

// LimitBodies bounds the body of every request h serves to limit bytes
// (LimitBody), answering a declared length over it with the error body of
// ADR 0006: for servers without routes of their own sizes.
func LimitBodies(h http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := LimitBody(w, r, limit); e != nil {
			WriteError(w, e)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// WriteError answers e as the error body of ADR 0006.
func WriteError(w http.ResponseWriter, e *apierror.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status())
	_ = json.NewEncoder(w).Encode(apierror.Body{Error: e})
}

// LiftDeadlines removes the server's read and write deadlines from a
// long-lived answer (an event stream), which then keeps its own: its write
// deadline per flush, and the request context for the client leaving. The
// read deadline must go too: net/http's background read of the idle
// connection would otherwise time out at ReadTimeout and cancel the
// request's context. Writers without deadlines (test recorders) are left
// as they are.
func LiftDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}
