package api

import (
	"cmp"
	"maps"
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
// token guards it; the project's own routes carry contract: false. It also
// lists the contract's source routes this validator does not serve: the
// gaps the edge publishes.

// contractSourceRoutes are the source routes the contract lists, as it
// writes them (read only).
var contractSourceRoutes = []string{
	"/v1/consensus/leader", "/v1/consensus/status",
	"/v1/ops/snapshots/health", "/v1/ops/snapshots/runtime", "/v1/ops/snapshots/storage",
	"/v1/ops/snapshots/cluster", "/v1/ops/snapshots/replication", "/v1/ops/snapshots/queue",
	"/v1/proposals/queue/stats", "/v1/proposals/release-flow", "/v1/proposals/epochs",
	"/v1/explorer/summary", "/v1/explorer/release-flow", "/v1/explorer/proposals/{proposalId}",
	"/v1/explorer/wallets/{walletAddress}", "/v1/config/osgi", "/v1/config/osgi/schema",
	"/v1/config/osgi/sources", "/v1/config/osgi/coverage", "/v1/config/osgi/delta",
	"/v1/events/recent", "/v1/events/stats", "/v1/blockchain/config", "/v1/gc/status",
	"/v1/gc/estimate", "/v1/compaction/proposals", "/v1/fragmentation/metrics",
	"/v1/fragmentation/metrics/{walletAddress}", "/v1/fragmentation/top",
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
// their parameters.
func samePattern(a, b string) bool {
	pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		param := strings.HasPrefix(pa[i], "{") && strings.HasPrefix(pb[i], "{")
		if pa[i] != pb[i] && !param {
			return false
		}
	}
	return true
}

// routeIndex serves GET /v1/index.
func (s *Server) routeIndex(c echo.Context) error {
	out := api.RouteIndex{NodeID: s.cfg.NodeID, Version: s.cfg.Version, Routes: []api.RouteEntry{}, MissingSourceRoutes: []string{}}
	served := map[string]bool{}
	for _, r := range s.served {
		auth := "none"
		if r.Permission != Public && s.cfg.Access.Check(access.Lane(r.Permission), "") != access.Open {
			auth = "token"
		}
		path := template(r.Path)
		out.Routes = append(out.Routes, api.RouteEntry{Method: r.Method, Path: path, Layer: r.Layer, Contract: r.Contract,
			Lane: string(r.Permission), Auth: auth})
		if r.Method == http.MethodGet {
			served[path] = true
		}
	}
	slices.SortFunc(out.Routes, func(a, b api.RouteEntry) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Method, b.Method))
	})
	for _, want := range contractSourceRoutes {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(served)), func(p string) bool { return samePattern(p, want) }) {
			out.MissingSourceRoutes = append(out.MissingSourceRoutes, want)
		}
	}
	return c.JSON(http.StatusOK, out)
}
