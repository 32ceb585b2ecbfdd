// Package auth enforces the edge's bearer-token lanes: OPS_API_AUTH_TOKEN
// for /ops/v1/* and the stricter OPS_RUNTIME_AUTH_TOKEN for
// /ops/v1/runtime/*, where the general token is not enough.
package auth

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// RuntimePrefix is the lane that takes the runtime token.
const RuntimePrefix = "/ops/v1/runtime/"

// Lanes holds the configured tokens; an empty token disables its lane.
type Lanes struct {
	APIToken     string
	RuntimeToken string
}

// Decision is the outcome of a check: 0 to pass, or 401 or 403.
type Decision int

// Check decides a request to path with the given Authorization header.
func (l Lanes) Check(path, authorization string) Decision {
	want := l.APIToken
	if strings.HasPrefix(path, RuntimePrefix) && l.RuntimeToken != "" {
		want = l.RuntimeToken
	}
	if want == "" {
		return 0
	}
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || token == "" {
		return http.StatusUnauthorized
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		return http.StatusForbidden
	}
	return 0
}
