package app

import (
	"net/http"
	"slices"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestRouteIndex: /v1/index lists every route served, each with a layer,
// classes the source routes the contract names as source, names the
// contract's source routes this validator does not serve, and lists every
// route of the contract with its layer and whether it is served.
func TestRouteIndex(t *testing.T) {
	const token = "s3cret"
	base := startMockWith(t, func(c *Config) { c.AuthToken = token })
	var ix api.RouteIndex
	if code := getJSON(t, base+"/v1/index", &ix); code != http.StatusUnauthorized {
		t.Fatalf("/v1/index without the token: %d", code)
	}
	if code := getJSONWith(t, base+"/v1/index", token, &ix); code != http.StatusOK || ix.NodeID != 1 || ix.Version == "" {
		t.Fatalf("/v1/index: %d %+v", code, ix)
	}
	find := func(method, path string) api.RouteEntry {
		t.Helper()
		i := slices.IndexFunc(ix.Routes, func(r api.RouteEntry) bool { return r.Method == method && r.Path == path })
		if i < 0 {
			t.Fatalf("%s %s not in the index", method, path)
		}
		return ix.Routes[i]
	}
	for _, r := range ix.Routes {
		if r.Layer == api.LayerUnclassified {
			t.Errorf("%s %s is served without a layer: class it in the route table, internal/api/routes.go", r.Method, r.Path)
		}
	}
	for _, w := range []api.RouteEntry{
		// The two source routes the contract says the live index classed
		// as internal.
		{Method: http.MethodGet, Path: "/v1/gc/estimate", Layer: api.LayerSource, Contract: true, Lane: "ops-read", Auth: "token"},
		{Method: http.MethodGet, Path: "/v1/proposals/epochs", Layer: api.LayerSource, Contract: true, Lane: "ops-read", Auth: "token"},
		{Method: http.MethodGet, Path: "/v1/explorer/proposals/{id}", Layer: api.LayerSource, Contract: true, Lane: "ops-read", Auth: "token"},
		{Method: http.MethodGet, Path: "/v1/ops/snapshots/storage", Layer: api.LayerSource, Contract: true, Lane: "public", Auth: "none"},
		{Method: http.MethodGet, Path: "/v1/transactions/summary", Layer: api.LayerSource, Contract: false, Lane: "ops-read", Auth: "token"},
		{Method: http.MethodGet, Path: "/health/deep", Layer: api.LayerLocalDiagnostic, Contract: true, Lane: "public", Auth: "none"},
		{Method: http.MethodGet, Path: "/segments/{name}", Layer: api.LayerLocalDiagnostic, Contract: true, Lane: "ops-read", Auth: "token"},
		{Method: http.MethodGet, Path: "/v1/index", Layer: api.LayerLocalDiagnostic, Contract: true, Lane: "ops-read", Auth: "token"},
		{Method: http.MethodGet, Path: "/v1/proposals/{id}/status", Layer: api.LayerInternal, Contract: true, Lane: "submit", Auth: "token"},
		{Method: http.MethodPost, Path: "/v1/propose-write", Layer: api.LayerInternal, Contract: true, Lane: "submit", Auth: "token"},
		{Method: http.MethodDelete, Path: "/v1/cluster/members/{id}", Layer: api.LayerInternal, Contract: false, Lane: "operator", Auth: "token"},
	} {
		if got := find(w.Method, w.Path); got != w {
			t.Errorf("%+v, want %+v", got, w)
		}
	}
	// Every source route the contract lists is served.
	if len(ix.MissingSourceRoutes) != 0 {
		t.Fatalf("source routes not served: %v", ix.MissingSourceRoutes)
	}

	// Every route of the contract, with its layer there and whether this
	// validator serves it; a missing one is not served.
	for _, w := range []api.ContractRoute{
		{Method: http.MethodGet, Path: "/v1/explorer/wallets/{walletAddress}", Layer: api.LayerSource, Served: true},
		{Path: "/segments/*", Layer: api.LayerLocalDiagnostic, Served: true},
		{Method: http.MethodPost, Path: "/v1/propose-write", Layer: api.LayerInternal, Served: true},
		{Path: "/api/mock/advance-epoch", Layer: api.LayerInternal, Served: true}, // MOCK mode
	} {
		if !slices.Contains(ix.ContractRoutes, w) {
			t.Errorf("%+v is not in the index's contract routes", w)
		}
	}
	for _, missing := range ix.MissingRoutes {
		if i := slices.IndexFunc(ix.ContractRoutes, func(r api.ContractRoute) bool { return r.Path == missing }); i < 0 || ix.ContractRoutes[i].Served {
			t.Errorf("missing route %s: not an unserved contract route", missing)
		}
	}
}
