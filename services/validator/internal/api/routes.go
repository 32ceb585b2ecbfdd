package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/validator/internal/access"
)

// Permission is what a caller needs to use a route: nothing (Public) or
// a token of the access lane the route belongs to (internal/access).
type Permission string

// The permissions.
const (
	// Public routes take no token, so that load balancers, orchestrators
	// and monitoring need no secret: /health* and the open snapshots. They
	// show the full view only to a caller the ops-read lane admits.
	Public Permission = "public"
	// Submit is an author's: proposing, proposal status, content and
	// wallet reads.
	Submit = Permission(access.Submit)
	// OpsRead is every read a dashboard, the edge or Prometheus needs.
	OpsRead = Permission(access.OpsRead)
	// Operator changes the cluster or the GC accounts: membership, limits,
	// executing debt, paying it by hand. Its requests carry their arguments
	// as JSON (Content-Type application/json, which a cross-site form
	// cannot send) and are rate-limited per client.
	Operator = Permission(access.Operator)
	// Mock moves the MOCK mode epoch clock.
	Mock = Permission(access.Mock)
)

// Route is one route of the validator's route table.
type Route struct {
	Method string
	// Path is echo's: parameters are :name.
	Path string
	// Layer is the contract's layer (api.LayerSource, LayerLocalUI,
	// LayerLocalDiagnostic, LayerInternal); Contract, whether the contract
	// names the route (the project's own routes do not).
	Layer    string
	Contract bool
	// Permission is what a caller needs.
	Permission Permission
	// handler is nil when the route is not served: its dependency is
	// absent (the mock routes outside MOCK mode, say).
	handler echo.HandlerFunc
}

// routes is the validator's route table: every route it may serve, once.
// Registration, the authentication, the route index (/v1/index) and the
// request metrics all read it; there is no second list.
func (s *Server) routes() []Route {
	const (
		get, post, del = http.MethodGet, http.MethodPost, http.MethodDelete
		source, ui     = api.LayerSource, api.LayerLocalUI
		diag, internal = api.LayerLocalDiagnostic, api.LayerInternal
	)
	d := s.deps
	return []Route{
		// source, as the contract lists them
		{get, "/v1/consensus/leader", source, true, OpsRead, s.consensusLeader},
		{get, "/v1/consensus/status", source, true, OpsRead, s.consensusStatus},
		{get, "/v1/ops/snapshots/health", source, true, Public, s.healthSnapshot},
		{get, "/v1/ops/snapshots/cluster", source, true, OpsRead, s.clusterSnapshot},
		{get, "/v1/ops/snapshots/replication", source, true, OpsRead, s.replicationSnapshot},
		{get, "/v1/ops/snapshots/queue", source, true, OpsRead, s.queueSnapshot},
		{get, "/v1/ops/snapshots/storage", source, true, Public, s.storageSnapshot},
		{get, "/v1/ops/snapshots/runtime", source, true, Public, s.runtimeSnapshot},
		{get, "/v1/proposals/queue/stats", source, true, OpsRead, s.queueStats},
		{get, "/v1/proposals/release-flow", source, true, OpsRead, s.releaseFlow},
		// The contract says the live index classed this one and
		// /v1/gc/estimate as internal; they are source here.
		{get, "/v1/proposals/epochs", source, true, OpsRead, s.epochOverlay},
		{get, "/v1/explorer/summary", source, true, OpsRead, s.explorerSummary},
		{get, "/v1/explorer/release-flow", source, true, OpsRead, s.explorerReleaseFlow},
		{get, "/v1/explorer/proposals/:id", source, true, OpsRead, s.explorerProposal},
		{get, "/v1/explorer/wallets/:wallet", source, true, OpsRead, s.explorerWallet},
		{get, "/v1/config/osgi", source, true, OpsRead, s.configValues},
		{get, "/v1/config/osgi/schema", source, true, OpsRead, s.configSchema},
		{get, "/v1/config/osgi/sources", source, true, OpsRead, s.configSources},
		{get, "/v1/config/osgi/coverage", source, true, OpsRead, s.configCoverage},
		{get, "/v1/config/osgi/delta", source, true, OpsRead, s.configDelta},
		{get, "/v1/events/recent", source, true, OpsRead, s.recentOpsEvents},
		{get, "/v1/events/stats", source, true, OpsRead, s.opsEventStats},
		{get, "/v1/blockchain/config", source, true, Submit, s.blockchainConfig},
		{get, "/v1/gc/status", source, true, OpsRead, s.gcStatus},
		{get, "/v1/gc/estimate", source, true, OpsRead, s.gcEstimate},
		{get, "/v1/compaction/proposals", source, true, OpsRead, s.compactionProposals},
		{get, "/v1/fragmentation/metrics", source, true, OpsRead, s.fragmentationMetrics},
		{get, "/v1/fragmentation/metrics/:wallet", source, true, OpsRead, s.fragmentationWallet},
		{get, "/v1/fragmentation/top", source, true, OpsRead, s.fragmentationTop},
		// source, the project's: what the edge composes besides the contract's
		{get, "/v1/consensus/state-hash", source, false, OpsRead, s.stateHash},
		{get, "/v1/proposals/counts", source, false, OpsRead, s.proposalCounts},
		{get, "/v1/finality", source, false, OpsRead, s.finality},
		{get, "/v1/transactions/summary", source, false, OpsRead, s.transactionSummary},
		{get, "/v1/transactions/:txHash", source, false, OpsRead, s.transaction},
		{get, "/v1/chain/status", source, false, OpsRead, s.chainStatus},

		// local-ui
		{get, "/", ui, true, OpsRead, s.page("/")},
		{get, "/dashboard", ui, true, OpsRead, s.page("/dashboard")},
		{get, "/explorer", ui, true, OpsRead, s.page("/explorer")},
		{get, "/api-browser", ui, true, OpsRead, s.page("/api-browser")},
		{get, "/chat", ui, true, OpsRead, s.page("/chat")},

		// local-diagnostic
		{get, "/v1/index", diag, true, OpsRead, s.routeIndex},
		{get, "/health", diag, true, Public, s.getHealth},
		{get, "/health/local", diag, true, Public, s.getHealth},
		{get, "/health/deep", diag, true, Public, s.getDeepHealth},
		{get, "/health/cluster", diag, true, Public, s.clusterHealth},
		{get, "/metrics", diag, true, OpsRead, s.prometheusMetrics},
		{get, "/api/metrics", diag, true, OpsRead, s.jsonMetrics},
		{get, "/segments/:name", diag, true, OpsRead, s.segmentArchive},
		{get, "/manifest", diag, true, OpsRead, s.manifest},
		{get, "/journal.log", diag, true, OpsRead, s.journal},
		{get, "/gc.log", diag, true, OpsRead, s.gcLog},
		{get, "/api/explore", diag, true, Submit, s.explore},
		{get, "/api/cid/stats", diag, true, OpsRead, s.cidStats},
		{get, "/api/cid/reverse/:cid", diag, true, OpsRead, s.cidReverse},
		// The blob routes: an author's application resolves its binaries
		// with them (the contract's read pattern, step 3).
		{get, "/api/cid/:blobId", diag, true, Submit, s.needs(s.deps.Blobs, s.blobCID)},
		{get, "/api/cid/gateway/:blobId", diag, true, Submit, s.needs(s.deps.Blobs, s.blobGateway)},
		{get, "/api/blob/:blobId", diag, true, Submit, s.needs(s.deps.Blobs, s.blobBytes)},
		{get, "/api/segments/recent", diag, true, OpsRead, s.recentSegments},
		{get, "/api/segments/tars", diag, true, OpsRead, s.segmentTars},
		{get, "/v1/msgbus/cluster-state", diag, true, OpsRead, s.clusterState},
		{get, "/v1/msgbus/validator-identities", diag, true, OpsRead, s.validatorIdentities},
		{get, "/v1/msgbus/raft-metrics", diag, true, OpsRead, s.raftMetrics},
		{get, "/v1/msgbus/node-status", diag, true, OpsRead, s.nodeStatus},
		{get, "/v1/msgbus/leadership-history", diag, true, OpsRead, s.leadershipHistory},
		{get, "/v1/msgbus/replication-lag", diag, true, OpsRead, s.replicationLag},
		// The two stream routes of the contract: the replicated events and
		// this validator's operational events, one budget of streams per
		// client across both (internal/events/DESIGN.md, ADR 0039).
		{get, "/v1/events/stream", diag, true, OpsRead, s.eventStream(d.EventStreams)},
		{get, "/v1/ops/events/stream", diag, true, OpsRead, s.eventStream(d.OpsEventStreams)},
		{get, "/v1/events/publisher", diag, false, OpsRead, s.eventPublisher},

		// internal
		{post, "/v1/propose-write", internal, true, Submit, s.proposeWrite},
		{post, "/v1/propose-delete", internal, true, Submit, s.proposeDelete},
		{get, "/v1/wallets/content", internal, true, Submit, s.walletContent},
		{get, "/v1/wallets/stats", internal, true, Submit, s.walletStats},
		{get, "/v1/proposals/pending/count", internal, true, OpsRead, s.pendingCount},
		{get, "/v1/proposals/:id/status", internal, true, Submit, s.proposalStatus},
		{get, "/v1/peers", internal, true, OpsRead, s.peers},
		{get, "/v1/ops/operations/:id", internal, true, Submit, s.operation},
		{get, "/v1/gc/account/:wallet", internal, true, Submit, s.gcAccount},
		{post, "/v1/gc/account/:wallet/pay", internal, true, Operator, s.gcPay},
		{post, "/v1/gc/account/:wallet/set-limit", internal, true, Operator, s.gcSetLimit},
		{post, "/v1/gc/account/:wallet/execute-pending", internal, true, Operator, s.gcExecutePending},
		// The GC proposal lifecycle (docs/adr/0033). Cleanup is part of
		// the compaction entry, so /v1/gc/execute is /v1/propose-gc.
		{post, "/v1/propose-gc", internal, true, Operator, s.proposeGc},
		{post, "/v1/gc/execute", internal, true, Operator, s.proposeGc},
		{post, "/v1/gc/trigger", internal, true, Operator, s.gcTrigger},
		{get, "/v1/gc/vote", internal, true, OpsRead, s.gcVote},
		{get, "/v1/explorer/epochs", internal, true, OpsRead, s.explorerEpochs},
		{post, "/v1/binary/declare-intent", internal, true, Submit, s.needs(s.deps.Binaries, s.declareIntent)},
		{get, "/v1/binary/check-intent/:token", internal, true, Submit, s.needs(s.deps.Binaries, s.checkIntent)},
		{post, "/v1/binary/complete-upload", internal, true, Submit, s.needs(s.deps.Binaries, s.completeUpload)},
		{post, "/v1/chat", internal, true, Operator, s.chat},
		{post, "/api/mock/advance-epoch", internal, true, Mock, s.mock(s.mockAdvanceEpoch)},
		{post, "/api/mock/set-epoch-offset", internal, true, Mock, s.mock(s.mockSetEpochOffset)},
		{get, "/api/mock/epoch-status", internal, true, Mock, s.mock(s.mockEpochStatus)},
		{get, "/v1/cluster/members", internal, false, OpsRead, s.listMembers},
		{post, "/v1/cluster/members", internal, false, Operator, s.addMember},
		{del, "/v1/cluster/members/:id", internal, false, Operator, s.removeMember},
		{post, "/v1/cluster/members/:id/promote", internal, false, Operator, s.promoteMember},
		// Registration and compatibility (docs/adr/0038).
		{post, "/v1/register-client", internal, true, Submit, s.registerClient},
		{get, "/v1/register-client/:clientId", internal, false, Submit, s.clientRegistration},
		{get, "/v1/head", internal, true, OpsRead, s.head},
		{post, "/v1/follower/head-update", internal, true, Operator, s.followerHeadUpdate},
		{get, "/v1/ngrok-url", internal, true, OpsRead, s.getPublicURL},
		{post, "/v1/ngrok-url", internal, true, Operator, s.setPublicURL},
	}
}

// routeKey names a route by method and echo path.
func routeKey(method, path string) string { return method + " " + path }

// page serves a page of the local UI; nil without one.
func (s *Server) page(route string) echo.HandlerFunc {
	if s.deps.UI == nil {
		return nil
	}
	return s.deps.UI.Handler(route)
}

// eventStream serves a stream route of its own; nil without the streams.
func (s *Server) eventStream(streams EventStreams) echo.HandlerFunc {
	if streams == nil {
		return nil
	}
	return echo.WrapHandler(streams.Handler())
}

// needs serves h when its dependency is there; nil (not served) without
// it.
func (s *Server) needs(dep any, h echo.HandlerFunc) echo.HandlerFunc {
	if dep == nil {
		return nil
	}
	return h
}

// mock serves a route of the MOCK mode epoch clock; nil outside MOCK mode,
// where those routes do not exist (404).
func (s *Server) mock(h echo.HandlerFunc) echo.HandlerFunc {
	if s.deps.MockEpochs == nil {
		return nil
	}
	return h
}
