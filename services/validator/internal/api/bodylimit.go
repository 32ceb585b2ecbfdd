package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/proposal"
)

// limitBody bounds the body of every request to its route's limit
// (bodyLimit): a declared length over it answers 413 content_too_large at
// once, a body that runs past it fails its read (the handlers answer the
// same). Requests that match no route get the default.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if e := httpserver.LimitBody(c.Response(), c.Request(), s.bodyLimit(c.Request().Method, c.Path())); e != nil {
			return e
		}
		return next(c)
	}
}

// bodyLimit is the body limit of a route: the proposal forms carry a
// message (formLimit); every other route, at most a small JSON or form
// body (Config.MaxBodyBytes).
func (s *Server) bodyLimit(method, path string) int64 {
	if method == http.MethodPost && (path == "/v1/propose-write" || path == "/v1/propose-delete") {
		return s.formLimit()
	}
	if s.cfg.MaxBodyBytes > 0 {
		return s.cfg.MaxBodyBytes
	}
	return httpserver.DefaultMaxBodyBytes
}

// formLimit is the largest proposal form: url-encoding at most triples a
// message byte, and every other field is bounded and small.
func (s *Server) formLimit() int64 {
	return int64(s.cfg.Form.MaxMessageBytes)*3 + proposal.FormFieldsBytes
}
