package routes

import (
	"fmt"
	"net/http"
)

// Error codes of the edge, in error.code. x-error-codes of /openapi.yaml
// lists them with their status and retryable value; a test keeps the two
// in step.
const (
	CodeInvalidParameter  = "invalid_parameter"
	CodeUnauthorized      = "unauthorized"
	CodeForbidden         = "forbidden"
	CodeRouteNotFound     = "route_not_found"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeInternal          = "internal"
	CodeSourceUnavailable = "source_unavailable"
	CodeSourceInvalid     = "source_contract_invalid"
)

// codeStatus is the one place that gives a code its status and whether a
// retry of the same request can succeed: only when the cause can go away
// by itself (a validator down or electing, a fault of the edge). A wrong
// token, a malformed parameter or a validator of another contract version
// stay as they are until someone acts.
func codeStatus(code string) (status int, retryable bool) {
	switch code {
	case CodeInvalidParameter:
		return http.StatusBadRequest, false
	case CodeUnauthorized:
		return http.StatusUnauthorized, false
	case CodeForbidden:
		return http.StatusForbidden, false
	case CodeRouteNotFound, CodeNotFound:
		return http.StatusNotFound, false
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed, false
	case CodeSourceUnavailable:
		return http.StatusBadGateway, true
	case CodeSourceInvalid:
		return http.StatusBadGateway, false
	}
	return http.StatusInternalServerError, true
}

// opsError is an error answered as the ops error envelope. details become
// further members of the error object (pkg/ops flattens them).
type opsError struct {
	code    string
	message string
	details map[string]any
}

func newError(code, format string, args ...any) *opsError {
	return &opsError{code: code, message: fmt.Sprintf(format, args...)}
}

func (e *opsError) Error() string { return e.code + ": " + e.message }

// with adds a detail member.
func (e *opsError) with(key string, value any) *opsError {
	if e.details == nil {
		e.details = map[string]any{}
	}
	e.details[key] = value
	return e
}
