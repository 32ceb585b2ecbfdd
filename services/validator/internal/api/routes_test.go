package api

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/access"
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
}

// TestContractRoutes holds the route table to the contract's list of
// routes (contractRoutes, index.go): a route both name has the same layer
// in each; the table marks contract: true exactly the routes the contract
// lists; and the contract's routes the table does not have are exactly
// wantMissing. Whoever adds one of them to the table takes it out of
// wantMissing; when none is left the list is empty, as /v1/index's
// missingRoutes then is.
func TestContractRoutes(t *testing.T) {
	var wantMissing []string // every route of the contract is served

	contract := contractRoutes()
	paths := map[string]bool{}
	for _, c := range contract {
		if paths[c.path] {
			t.Errorf("the contract's list names %s twice", c.path)
		}
		paths[c.path] = true
		if !slices.Contains([]string{api.LayerSource, api.LayerLocalUI, api.LayerLocalDiagnostic, api.LayerInternal}, c.layer) {
			t.Errorf("the contract's %s: layer %q", c.path, c.layer)
		}
		if !slices.Contains([]string{"", http.MethodGet, http.MethodPost}, c.method) || (c.layer == api.LayerSource && c.method != http.MethodGet) {
			t.Errorf("the contract's %s: method %q", c.path, c.method)
		}
	}

	table := (&Server{}).routes()
	for _, r := range table {
		key := routeKey(r.Method, r.Path)
		var named []contractRoute
		for _, c := range contract {
			if c.matches(r) {
				named = append(named, c)
			}
		}
		switch {
		case len(named) > 1:
			t.Errorf("%s is more than one route of the contract: %v", key, named)
		case len(named) == 1 && named[0].layer != r.Layer:
			t.Errorf("%s is %s in the route table and %s in the contract (%s)", key, r.Layer, named[0].layer, named[0].path)
		case r.Contract && len(named) == 0:
			t.Errorf("%s is marked contract: true, and the contract does not list it", key)
		case !r.Contract && len(named) == 1:
			t.Errorf("%s is marked contract: false, and the contract lists it as %s", key, named[0].path)
		}
	}

	// Every route of the table served: the index shows every contract
	// route the table has as served, and every source route among them.
	ix := newContractIndex(table, table)
	if !slices.Equal(ix.missing, wantMissing) {
		t.Errorf("the contract's routes the route table does not have:\n%v\nwant\n%v", ix.missing, wantMissing)
	}
	if len(ix.missingSource) != 0 {
		t.Errorf("source routes of the contract not served: %v", ix.missingSource)
	}
	if len(ix.routes) != len(contract) {
		t.Fatalf("the index lists %d contract routes, the contract %d", len(ix.routes), len(contract))
	}
	for _, r := range ix.routes {
		if r.Served == slices.Contains(wantMissing, r.Path) {
			t.Errorf("%s: served %v", r.Path, r.Served)
		}
	}

	// A route of the table whose dependency is absent (the mock clock
	// outside MOCK mode) is not served, and not missing either.
	unmocked := slices.DeleteFunc(slices.Clone(table), func(r Route) bool { return strings.HasPrefix(r.Path, "/api/mock/") })
	ix = newContractIndex(table, unmocked)
	if !slices.Equal(ix.missing, wantMissing) {
		t.Errorf("outside MOCK mode the missing routes are %v", ix.missing)
	}
	for _, r := range ix.routes {
		if mock := strings.HasPrefix(r.Path, "/api/mock/"); mock && r.Served {
			t.Errorf("%s is served outside MOCK mode", r.Path)
		}
	}
}

// The lanes' tokens of the auth matrix, and one no lane knows.
const (
	submitToken   = "submit-token-0123456789"
	opsReadToken  = "ops-read-token-0123456789"
	operatorToken = "operator-token-0123456789"
	mockToken     = "mock-token-0123456789"
	wrongToken    = "wrong-token-0123456789"
)

// matrixServer serves every route of the table with a token per lane, and
// answers 299 for a request authentication let through, before any
// handler runs.
func matrixServer(t *testing.T) (*echo.Echo, []Route) {
	t.Helper()
	var tokens access.Tokens
	tokens.Add(access.Submit, submitToken)
	tokens.Add(access.OpsRead, opsReadToken)
	tokens.Add(access.Operator, operatorToken)
	tokens.Add(access.Mock, mockToken)
	deps := Deps{MockEpochs: stubClock{}, UI: stubUI{}, EventStreams: stubStreams{}, OpsEventStreams: stubStreams{}, Blobs: fakeBlobs{}, Binaries: &fakeBinaries{}}
	e := New(Config{Access: tokens}, deps, zap.NewNop())
	e.Use(func(echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return c.NoContent(299) }
	})
	s := &Server{deps: deps}
	return e, s.routes()
}

// TestAuthMatrix: every route of the table × {no token, each lane's token,
// a wrong token}. A public route lets everyone through; any other lets
// through its own lane's token only: 401 without a token, 403 with
// another lane's or a wrong one. Operator requests are JSON.
func TestAuthMatrix(t *testing.T) {
	e, routes := matrixServer(t)
	tokens := map[string]Permission{"": "", submitToken: Submit, opsReadToken: OpsRead, operatorToken: Operator, mockToken: Mock, wrongToken: ""}
	for _, r := range routes {
		if r.handler == nil {
			t.Fatalf("%s %s is not served in the matrix", r.Method, r.Path)
		}
		path := strings.NewReplacer(":id", "1", ":wallet", "0x0", ":name", "x", ":cid", "x", ":txHash", "0x0", ":blobId", "x", ":token", "x").Replace(r.Path)
		for token, lane := range tokens {
			req := httptest.NewRequest(r.Method, path, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			want := http.StatusForbidden
			switch {
			case r.Permission == Public, lane == r.Permission:
				want = 299
			case token == "":
				want = http.StatusUnauthorized
			}
			if rec.Code != want {
				t.Errorf("%s %s with the %q lane's token: %d, want %d", r.Method, path, lane, rec.Code, want)
			}
			if want == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without WWW-Authenticate", r.Method, path)
			}
		}
	}
	// A request no route matches needs what the ops-read lane needs (then
	// echo's 404 handler runs, here answering 299).
	for token, want := range map[string]int{"": http.StatusUnauthorized, submitToken: http.StatusForbidden, opsReadToken: 299} {
		req := httptest.NewRequest(http.MethodGet, "/no/such/route", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("an unknown route with %q: %d, want %d", token, rec.Code, want)
		}
	}
}

// TestOperatorRequests: with the operator's token, an operator route still
// refuses what a cross-site form could send (not JSON), arguments in the
// query, and a client past the operator rate.
func TestOperatorRequests(t *testing.T) {
	var tokens access.Tokens
	tokens.Add(access.Operator, operatorToken)
	limiter := &countingLimiter{allow: 7}
	e := New(Config{Access: tokens, OperatorLimiter: limiter}, Deps{}, zap.NewNop())
	e.Use(func(echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return c.NoContent(299) }
	})
	send := func(contentType, query string) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/gc/account/0x0/set-limit"+query, strings.NewReader(`{"limit":"1"}`))
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tc := range []struct {
		contentType, query string
		want               int
	}{
		{"application/x-www-form-urlencoded", "", http.StatusBadRequest},
		{"text/plain", "", http.StatusBadRequest},
		{"multipart/form-data; boundary=x", "", http.StatusBadRequest},
		{"", "", http.StatusBadRequest},
		{"application/json", "?limit=0.000001", http.StatusBadRequest},
		{"application/json; charset=utf-8", "", 299},
		{"application/json", "", 299},
		{"application/json", "", http.StatusTooManyRequests}, // the limiter allowed seven
	} {
		if got := send(tc.contentType, tc.query); got != tc.want {
			t.Errorf("Content-Type %q, query %q: %d, want %d", tc.contentType, tc.query, got, tc.want)
		}
	}
}

// countingLimiter allows a number of requests, then refuses.
type countingLimiter struct{ allow int }

func (l *countingLimiter) Allow(string) (bool, error) {
	l.allow--
	return l.allow >= 0, nil
}

type stubClock struct{}

func (stubClock) Current() uint64       { return 0 }
func (stubClock) Finalized() uint64     { return 0 }
func (stubClock) Advance(uint64)        {}
func (stubClock) SetOffset(int64) bool  { return true }
func (stubClock) Offset() int64         { return 0 }
func (stubClock) NextIn() time.Duration { return 0 }
func (stubClock) Length() time.Duration { return 0 }

type stubUI struct{}

func (stubUI) Handler(string) echo.HandlerFunc {
	return func(c echo.Context) error { return c.NoContent(http.StatusOK) }
}

type stubStreams struct{}

func (stubStreams) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
}
