package api

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestRouteTable holds the table to its own rules: each route once, a
// layer of the contract's and a known permission; the token bypassed only
// where the contract says (health and the open snapshots); every source
// route of the contract in it.
func TestRouteTable(t *testing.T) {
	s := &Server{}
	routes := s.routes()
	seen := map[string]bool{}
	var public []string
	for _, r := range routes {
		key := routeKey(r.Method, r.Path)
		if seen[key] {
			t.Errorf("%s is in the table twice", key)
		}
		seen[key] = true
		if !slices.Contains([]string{api.LayerSource, api.LayerLocalUI, api.LayerLocalDiagnostic, api.LayerInternal}, r.Layer) {
			t.Errorf("%s: layer %q", key, r.Layer)
		}
		if !slices.Contains([]Permission{Public, Submit, OpsRead, Operator, Mock}, r.Permission) {
			t.Errorf("%s: permission %q", key, r.Permission)
		}
		if r.Permission == Public {
			public = append(public, r.Path)
		}
		if r.Method != http.MethodGet && (r.Permission == Public || r.Permission == OpsRead) {
			t.Errorf("%s changes state and needs only %s", key, r.Permission)
		}
	}
	slices.Sort(public)
	want := []string{"/health", "/health/cluster", "/health/deep", "/health/local",
		"/v1/ops/snapshots/health", "/v1/ops/snapshots/runtime", "/v1/ops/snapshots/storage"}
	if !slices.Equal(public, want) {
		t.Errorf("public routes %v, want %v", public, want)
	}
	for _, src := range contractSourceRoutes {
		if !slices.ContainsFunc(routes, func(r Route) bool {
			return r.Method == http.MethodGet && r.Layer == api.LayerSource && samePattern(template(r.Path), src)
		}) {
			t.Errorf("the contract's source route %s is not in the table as a source route", src)
		}
	}
}

// TestTokenFollowsTable: with a token set, every route served that is not
// Public answers 401 without it and 403 with another, before its handler
// runs; a request no route matches needs the token too.
func TestTokenFollowsTable(t *testing.T) {
	s := &Server{}
	e := New(Config{AuthToken: "s3cret"}, Deps{}, zap.NewNop())
	for _, r := range s.routes() {
		if r.Permission == Public || r.handler == nil {
			continue // public, or not served without its dependency
		}
		path := strings.NewReplacer(":id", "1", ":wallet", "0x0", ":name", "x", ":cid", "x", ":txHash", "0x0").Replace(r.Path)
		for token, code := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusForbidden} {
			req := httptest.NewRequest(r.Method, path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != code {
				t.Errorf("%s %s with token %q: %d, want %d", r.Method, path, token, rec.Code, code)
			}
		}
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/no/such/route", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("an unknown route without a token: %d, want 401", rec.Code)
	}
}
