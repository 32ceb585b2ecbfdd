package api

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/access"
)

// The route index (/v1/index): every route this validator serves, read
// from the route table (routes.go), so that it cannot drift from what is
// served, each with its layer in the contract's taxonomy and whether the
// token guards it; the project's own routes carry contract: false. Beside
// them, every route of the contract's validator tables with its layer
// there and whether this validator serves it, and the contract's routes
// the route table does not have. TestContractRoutes holds the table to the
// contract's list: the same layer for every route both name.

// contractRoute is one route of the contract's validator tables.
type contractRoute struct {
	// method is "" where the contract names none.
	method, path, layer string
}

// contractRoutes lists the routes of the contract's validator tables
// (shared/spec/contract.md: "Validator: source routes", "local-ui
// routes", "local-diagnostic routes", "internal routes"), in its order and
// as it writes them: {name} parameters, /segments/* for the segment files,
// a method only where it names one. A route is served when a route of the
// table matches it (matches), whatever the table calls its parameters.
func contractRoutes() []contractRoute {
	const (
		get, post      = http.MethodGet, http.MethodPost
		source, ui     = api.LayerSource, api.LayerLocalUI
		diag, internal = api.LayerLocalDiagnostic, api.LayerInternal
	)
	return []contractRoute{
		// source (all GET)
		{get, "/v1/consensus/leader", source}, {get, "/v1/consensus/status", source},
		{get, "/v1/ops/snapshots/health", source}, {get, "/v1/ops/snapshots/runtime", source},
		{get, "/v1/ops/snapshots/storage", source}, {get, "/v1/ops/snapshots/cluster", source},
		{get, "/v1/ops/snapshots/replication", source}, {get, "/v1/ops/snapshots/queue", source},
		{get, "/v1/proposals/queue/stats", source}, {get, "/v1/proposals/release-flow", source},
		{get, "/v1/proposals/epochs", source}, {get, "/v1/explorer/summary", source},
		{get, "/v1/explorer/release-flow", source}, {get, "/v1/explorer/proposals/{proposalId}", source},
		{get, "/v1/explorer/wallets/{walletAddress}", source}, {get, "/v1/config/osgi", source},
		{get, "/v1/config/osgi/schema", source}, {get, "/v1/config/osgi/sources", source},
		{get, "/v1/config/osgi/coverage", source}, {get, "/v1/config/osgi/delta", source},
		{get, "/v1/events/recent", source}, {get, "/v1/events/stats", source},
		{get, "/v1/blockchain/config", source}, {get, "/v1/gc/status", source},
		{get, "/v1/gc/estimate", source}, {get, "/v1/compaction/proposals", source},
		{get, "/v1/fragmentation/metrics", source}, {get, "/v1/fragmentation/metrics/{walletAddress}", source},
		{get, "/v1/fragmentation/top", source},

		// local-ui
		{"", "/", ui}, {"", "/dashboard", ui}, {"", "/api-browser", ui}, {"", "/explorer", ui}, {"", "/chat", ui},

		// local-diagnostic
		{"", "/v1/index", diag},
		{"", "/health", diag}, {"", "/health/local", diag}, {"", "/health/deep", diag}, {"", "/health/cluster", diag},
		{"", "/metrics", diag}, {"", "/api/metrics", diag},
		{"", "/journal.log", diag}, {"", "/manifest", diag}, {"", "/gc.log", diag}, {"", "/segments/*", diag},
		{get, "/api/explore", diag},
		{"", "/api/segments/recent", diag}, {"", "/api/segments/tars", diag},
		{get, "/api/blob/{blobId}", diag}, {get, "/api/cid/{oakBlobId}", diag}, {get, "/api/cid/reverse/{cid}", diag},
		{get, "/api/cid/gateway/{oakBlobId}", diag}, {get, "/api/cid/stats", diag},
		{"", "/v1/msgbus/cluster-state", diag}, {"", "/v1/msgbus/validator-identities", diag},
		{"", "/v1/msgbus/raft-metrics", diag}, {"", "/v1/msgbus/node-status", diag},
		{"", "/v1/msgbus/leadership-history", diag}, {"", "/v1/msgbus/replication-lag", diag},
		{get, "/v1/events/stream", diag}, {get, "/v1/ops/events/stream", diag},

		// internal
		{post, "/v1/propose-write", internal}, {post, "/v1/propose-delete", internal},
		{get, "/v1/wallets/content", internal}, {get, "/v1/wallets/stats", internal},
		{"", "/v1/proposals/pending/count", internal}, {"", "/v1/proposals/{proposalId}/status", internal},
		{"", "/v1/binary/declare-intent", internal}, {"", "/v1/binary/check-intent/{token}", internal},
		{"", "/v1/binary/complete-upload", internal},
		{"", "/v1/register-client", internal}, {"", "/v1/peers", internal}, {"", "/v1/ngrok-url", internal},
		{"", "/v1/head", internal}, {"", "/v1/follower/head-update", internal},
		{"", "/v1/ops/operations/{operationId}", internal},
		{post, "/v1/propose-gc", internal}, {post, "/v1/gc/execute", internal}, {post, "/v1/gc/trigger", internal},
		{"", "/v1/gc/vote", internal},
		{get, "/v1/gc/account/{walletAddress}", internal}, {"", "/v1/gc/account/{walletAddress}/pay", internal},
		{"", "/v1/gc/account/{walletAddress}/set-limit", internal}, {"", "/v1/gc/account/{walletAddress}/execute-pending", internal},
		{"", "/v1/explorer/epochs", internal},
		{"", "/v1/chat", internal},
		{"", "/api/mock/advance-epoch", internal}, {"", "/api/mock/set-epoch-offset", internal}, {"", "/api/mock/epoch-status", internal},
	}
}

// matches reports whether r of the route table is the contract's route c:
// the same method where the contract names one, and the same path but for
// the names of parameters.
func (c contractRoute) matches(r Route) bool {
	return (c.method == "" || c.method == r.Method) && samePattern(template(r.Path), c.path)
}

// template writes an echo path as the contract does: :name as {name}.
func template(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if name, ok := strings.CutPrefix(p, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}

// samePattern reports whether two templates differ only in the names of
// their parameters ({name}, or the contract's * for one segment).
func samePattern(a, b string) bool {
	pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
	if len(pa) != len(pb) {
		return false
	}
	param := func(p string) bool { return strings.HasPrefix(p, "{") || p == "*" }
	for i := range pa {
		if pa[i] != pb[i] && !(param(pa[i]) && param(pb[i])) {
			return false
		}
	}
	return true
}

// contractIndex is the contract's part of the index, fixed when the server
// is built: every contract route with whether one of served answers it,
// the source routes none answers, and the routes table does not have.
type contractIndex struct {
	routes        []api.ContractRoute
	missingSource []string
	missing       []string
}

func newContractIndex(table, served []Route) contractIndex {
	ix := contractIndex{routes: []api.ContractRoute{}, missingSource: []string{}, missing: []string{}}
	for _, c := range contractRoutes() {
		isServed := slices.ContainsFunc(served, c.matches)
		ix.routes = append(ix.routes, api.ContractRoute{Method: c.method, Path: c.path, Layer: c.layer, Served: isServed})
		if !isServed && c.layer == api.LayerSource {
			ix.missingSource = append(ix.missingSource, c.path)
		}
		if !slices.ContainsFunc(table, c.matches) {
			ix.missing = append(ix.missing, c.path)
		}
	}
	return ix
}

// routeIndex serves GET /v1/index.
func (s *Server) routeIndex(c echo.Context) error {
	out := api.RouteIndex{NodeID: s.cfg.NodeID, Version: s.cfg.Version, Routes: []api.RouteEntry{},
		MissingSourceRoutes: s.contract.missingSource, ContractRoutes: s.contract.routes, MissingRoutes: s.contract.missing}
	for _, r := range s.served {
		auth := "none"
		if r.Permission != Public && s.cfg.Access.Check(access.Lane(r.Permission), "") != access.Open {
			auth = "token"
		}
		out.Routes = append(out.Routes, api.RouteEntry{Method: r.Method, Path: template(r.Path), Layer: r.Layer, Contract: r.Contract,
			Lane: string(r.Permission), Auth: auth})
	}
	slices.SortFunc(out.Routes, func(a, b api.RouteEntry) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Method, b.Method))
	})
	return c.JSON(http.StatusOK, out)
}
