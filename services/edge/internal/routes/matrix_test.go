package routes

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/contentledger/contentledger/services/edge/internal/auth"
)

// TestAuthMatrix asks every /ops/v1 route under every token setting with
// every kind of token, and expects what the lanes of internal/auth
// decide: without tokens everything passes; with an API token every route
// takes it; with a runtime token too, /ops/v1/runtime/* takes only that
// one. A request that passes gets the route's answer from healthy
// validators: 200, every route being served.
func TestAuthMatrix(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	passing := map[string]int{} // the route's answer with auth out of the way
	for _, r := range table(t) {
		if strings.HasPrefix(r.path, opsPrefix) {
			var body map[string]any
			passing[r.path], body = get(t, srv.URL+example(r.path), "")
			assertEnvelope(t, passing[r.path], body)
		}
	}

	settings := []struct {
		name  string
		lanes auth.Lanes
	}{
		{"no tokens", auth.Lanes{}},
		{"API token only", auth.Lanes{APIToken: "general"}},
		{"runtime token only", auth.Lanes{RuntimeToken: "runtime"}},
		{"both tokens", auth.Lanes{APIToken: "general", RuntimeToken: "runtime"}},
	}
	tokens := []string{"", "wrong", "general", "runtime"}
	// want is the lane's decision, written out rather than derived from
	// auth.Lanes, so that a change of the lanes shows here.
	want := func(lanes auth.Lanes, runtime bool, token string) int {
		required := lanes.APIToken
		if runtime && lanes.RuntimeToken != "" {
			required = lanes.RuntimeToken
		}
		switch {
		case required == "":
			return 0
		case token == "":
			return http.StatusUnauthorized
		case token != required:
			return http.StatusForbidden
		}
		return 0
	}
	for _, set := range settings {
		srv := edge(t, set.lanes, fc.urls()...)
		for path, pass := range passing {
			runtime := strings.HasPrefix(path, auth.RuntimePrefix)
			for _, token := range tokens {
				name := fmt.Sprintf("%s, %s, token %q", set.name, path, token)
				status, header, body := do(t, http.MethodGet, srv.URL+example(path), token)
				switch w := want(set.lanes, runtime, token); w {
				case 0:
					if status != pass {
						t.Errorf("%s: %d, want %d: %v", name, status, pass, body)
					}
				case http.StatusUnauthorized:
					assertError(t, status, w, body, CodeUnauthorized, false)
					if header.Get("WWW-Authenticate") == "" {
						t.Errorf("%s: 401 without WWW-Authenticate", name)
					}
				default:
					assertError(t, status, w, body, CodeForbidden, false)
				}
			}
		}
	}
	// Spot checks of the table above, in plain words.
	both := edge(t, auth.Lanes{APIToken: "general", RuntimeToken: "runtime"}, fc.urls()...)
	if status, _ := get(t, both.URL+"/ops/v1/runtime/msgbus", "general"); status != http.StatusForbidden {
		t.Errorf("the API token opened the runtime lane: %d", status)
	}
	if status, _ := get(t, both.URL+"/ops/v1/runtime/msgbus", "runtime"); status != http.StatusOK {
		t.Errorf("the runtime token did not open the runtime lane: %d", status)
	}
	if status, _ := get(t, both.URL+"/ops/v1/cluster", "runtime"); status != http.StatusForbidden {
		t.Errorf("the runtime token opened the API lane: %d", status)
	}
}

// TestMethodsAndUnknownRoutes: every route answers GET only, any other
// method 405 with Allow: GET (HEAD and OPTIONS included); unknown paths
// 404 route_not_found. Tokens come first: without one, a locked edge
// answers 401 whatever the route or method.
func TestMethodsAndUnknownRoutes(t *testing.T) {
	fc := newCluster(t, 1)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	for _, r := range table(t) {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
			http.MethodOptions, http.MethodHead, http.MethodTrace, "PROPFIND", "BREW"} {
			status, header, body := do(t, method, srv.URL+example(r.path), "")
			if status != http.StatusMethodNotAllowed || header.Get("Allow") != http.MethodGet {
				t.Errorf("%s %s: %d, Allow %q", method, r.path, status, header.Get("Allow"))
				continue
			}
			if method != http.MethodHead {
				assertError(t, status, http.StatusMethodNotAllowed, body, CodeMethodNotAllowed, false)
			}
		}
	}
	if fc.hits() != 0 {
		t.Errorf("a refused method reached the validators %d times", fc.hits())
	}
	for _, path := range []string{"/ops/v1/no-such-route", "/ops/v1/runtime/nothing", "/ops/v1/explorer/proposal", "/ops/v2/health",
		"/ops/v1/cluster/", "/ops/v1/explorer/proposal/", "/nothing"} {
		status, body := get(t, srv.URL+path, "")
		assertError(t, status, http.StatusNotFound, body, CodeRouteNotFound, false)
	}

	locked := edge(t, auth.Lanes{APIToken: "general"}, fc.urls()...)
	status, body := get(t, locked.URL+"/ops/v1/no-such-route", "")
	assertError(t, status, http.StatusUnauthorized, body, CodeUnauthorized, false)
	status, _, body = do(t, http.MethodPost, locked.URL+"/ops/v1/cluster", "")
	assertError(t, status, http.StatusUnauthorized, body, CodeUnauthorized, false)
	for _, path := range []string{"/health", "/openapi.yaml", "/openapi-validator-source.yaml"} {
		if status, _, _ := fetch(t, http.MethodGet, locked.URL+path, ""); status != http.StatusOK {
			t.Errorf("%s needs a token: %d", path, status)
		}
	}
}
