package api

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// The route index (/v1/index): every route this validator serves, read
// from the router when asked, so that it cannot drift from what is served,
// each with its layer in the contract's taxonomy and whether the token
// guards it. Routes the contract names are classed as the contract
// classes them (the two source routes it says the live index used to class
// as internal, /v1/gc/estimate and /v1/proposals/epochs, are source here);
// the project's own routes carry contract: false. It also lists the
// contract's source routes this validator does not serve: the gaps the
// edge publishes.

// routeLayers classes every route the validator registers, by echo path
// (read only). A route missing here is served as "unclassified", which a
// test refuses.
var routeLayers = map[string]routeClass{
	// source, as the contract lists them
	"/v1/consensus/leader":              {api.LayerSource, true},
	"/v1/consensus/status":              {api.LayerSource, true},
	"/v1/ops/snapshots/health":          {api.LayerSource, true},
	"/v1/ops/snapshots/cluster":         {api.LayerSource, true},
	"/v1/ops/snapshots/replication":     {api.LayerSource, true},
	"/v1/ops/snapshots/queue":           {api.LayerSource, true},
	"/v1/ops/snapshots/storage":         {api.LayerSource, true},
	"/v1/ops/snapshots/runtime":         {api.LayerSource, true},
	"/v1/proposals/queue/stats":         {api.LayerSource, true},
	"/v1/proposals/release-flow":        {api.LayerSource, true},
	"/v1/proposals/epochs":              {api.LayerSource, true},
	"/v1/explorer/summary":              {api.LayerSource, true},
	"/v1/explorer/release-flow":         {api.LayerSource, true},
	"/v1/explorer/proposals/:id":        {api.LayerSource, true},
	"/v1/explorer/wallets/:wallet":      {api.LayerSource, true},
	"/v1/config/osgi":                   {api.LayerSource, true},
	"/v1/config/osgi/schema":            {api.LayerSource, true},
	"/v1/config/osgi/sources":           {api.LayerSource, true},
	"/v1/config/osgi/coverage":          {api.LayerSource, true},
	"/v1/config/osgi/delta":             {api.LayerSource, true},
	"/v1/events/recent":                 {api.LayerSource, true},
	"/v1/events/stats":                  {api.LayerSource, true},
	"/v1/blockchain/config":             {api.LayerSource, true},
	"/v1/gc/status":                     {api.LayerSource, true},
	"/v1/gc/estimate":                   {api.LayerSource, true},
	"/v1/compaction/proposals":          {api.LayerSource, true},
	"/v1/fragmentation/metrics":         {api.LayerSource, true},
	"/v1/fragmentation/metrics/:wallet": {api.LayerSource, true},
	"/v1/fragmentation/top":             {api.LayerSource, true},
	// source, the project's: what the edge composes besides the contract's
	"/v1/consensus/state-hash": {api.LayerSource, false},
	"/v1/proposals/counts":     {api.LayerSource, false},
	"/v1/finality":             {api.LayerSource, false},
	"/v1/transactions/summary": {api.LayerSource, false},
	"/v1/transactions/:txHash": {api.LayerSource, false},
	"/v1/chain/status":         {api.LayerSource, false},
	// local-ui
	"/":            {api.LayerLocalUI, true},
	"/dashboard":   {api.LayerLocalUI, true},
	"/explorer":    {api.LayerLocalUI, true},
	"/api-browser": {api.LayerLocalUI, true},
	// local-diagnostic
	"/v1/index":                       {api.LayerLocalDiagnostic, true},
	"/health":                         {api.LayerLocalDiagnostic, true},
	"/health/local":                   {api.LayerLocalDiagnostic, true},
	"/health/deep":                    {api.LayerLocalDiagnostic, true},
	"/health/cluster":                 {api.LayerLocalDiagnostic, true},
	"/metrics":                        {api.LayerLocalDiagnostic, true},
	"/api/metrics":                    {api.LayerLocalDiagnostic, true},
	"/segments/:name":                 {api.LayerLocalDiagnostic, true},
	"/manifest":                       {api.LayerLocalDiagnostic, true},
	"/journal.log":                    {api.LayerLocalDiagnostic, true},
	"/api/explore":                    {api.LayerLocalDiagnostic, true},
	"/api/cid/stats":                  {api.LayerLocalDiagnostic, true},
	"/api/cid/reverse/:cid":           {api.LayerLocalDiagnostic, true},
	"/api/segments/recent":            {api.LayerLocalDiagnostic, true},
	"/api/segments/tars":              {api.LayerLocalDiagnostic, true},
	"/v1/msgbus/cluster-state":        {api.LayerLocalDiagnostic, true},
	"/v1/msgbus/validator-identities": {api.LayerLocalDiagnostic, true},
	"/v1/msgbus/raft-metrics":         {api.LayerLocalDiagnostic, true},
	"/v1/msgbus/node-status":          {api.LayerLocalDiagnostic, true},
	"/v1/msgbus/leadership-history":   {api.LayerLocalDiagnostic, true},
	"/v1/msgbus/replication-lag":      {api.LayerLocalDiagnostic, true},
	"/v1/events/stream":               {api.LayerLocalDiagnostic, true},
	"/v1/ops/events/stream":           {api.LayerLocalDiagnostic, true},
	"/v1/events/publisher":            {api.LayerLocalDiagnostic, false},
	// internal
	"/v1/propose-write":                      {api.LayerInternal, true},
	"/v1/propose-delete":                     {api.LayerInternal, true},
	"/v1/wallets/content":                    {api.LayerInternal, true},
	"/v1/wallets/stats":                      {api.LayerInternal, true},
	"/v1/proposals/pending/count":            {api.LayerInternal, true},
	"/v1/proposals/:id/status":               {api.LayerInternal, true},
	"/v1/peers":                              {api.LayerInternal, true},
	"/v1/ops/operations/:id":                 {api.LayerInternal, true},
	"/v1/gc/account/:wallet":                 {api.LayerInternal, true},
	"/v1/gc/account/:wallet/pay":             {api.LayerInternal, true},
	"/v1/gc/account/:wallet/set-limit":       {api.LayerInternal, true},
	"/v1/gc/account/:wallet/execute-pending": {api.LayerInternal, true},
	"/v1/explorer/epochs":                    {api.LayerInternal, true},
	"/api/mock/advance-epoch":                {api.LayerInternal, true},
	"/api/mock/set-epoch-offset":             {api.LayerInternal, true},
	"/api/mock/epoch-status":                 {api.LayerInternal, true},
	"/v1/cluster/members":                    {api.LayerInternal, false},
	"/v1/cluster/members/:id":                {api.LayerInternal, false},
}

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

type routeClass struct {
	layer    string
	contract bool
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

// routeIndex answers /v1/index from e's routes.
func (s *Server) routeIndex(e *echo.Echo) echo.HandlerFunc {
	return func(c echo.Context) error {
		out := api.RouteIndex{NodeID: s.deps.Cluster.Status().NodeID, Version: s.cfg.Version, Routes: []api.RouteEntry{},
			MissingSourceRoutes: []string{}}
		served := map[string]bool{}
		for _, r := range e.Routes() {
			class, ok := routeLayers[r.Path]
			if !ok {
				class.layer = api.LayerUnclassified
			}
			auth := "token"
			if s.cfg.AuthToken == "" || strings.HasPrefix(r.Path, "/health") || openSnapshot(r.Path) {
				auth = "none"
			}
			path := template(r.Path)
			out.Routes = append(out.Routes, api.RouteEntry{Method: r.Method, Path: path, Layer: class.layer, Contract: class.contract, Auth: auth})
			if r.Method == http.MethodGet {
				served[path] = true
			}
		}
		slices.SortFunc(out.Routes, func(a, b api.RouteEntry) int {
			return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Method, b.Method))
		})
		for _, want := range contractSourceRoutes {
			found := false
			for p := range served {
				if samePattern(p, want) {
					found = true
					break
				}
			}
			if !found {
				out.MissingSourceRoutes = append(out.MissingSourceRoutes, want)
			}
		}
		return c.JSON(http.StatusOK, out)
	}
}
