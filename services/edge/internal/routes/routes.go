// Package routes serves the edge contract /ops/v1/*: every answer is the ops
// envelope or the ops error envelope, composed from validator source routes
// whose answers are checked against the source contract first.
//
// A request is decided in this order, each step before any validator is
// asked: bearer token (401, 403), route and method (404, 405), parameters
// (400, 404); then the sources are read (502 when none answers within its
// contract).
package routes

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ops"
	"github.com/contentledger/contentledger/services/edge/internal/auth"
	"github.com/contentledger/contentledger/services/edge/internal/metrics"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

// Upstream is the validator pool as the routes use it.
type Upstream interface {
	// Get asks the validators in turn until accept takes an answer.
	Get(ctx context.Context, route upstream.Route, accept upstream.Accept) (upstream.Response, []upstream.Source, error)
	// GetFrom asks one validator.
	GetFrom(ctx context.Context, base string, route upstream.Route, accept upstream.Accept) (upstream.Response, upstream.Source, error)
	// URLs are the validators' base URLs, in the order Get asks them.
	URLs() []string
	// Age is the age of the kept answer v names; false once it is no
	// longer kept unchanged (upstream.Cache.Age).
	Age(v upstream.Version) (time.Duration, bool)
}

// Contract checks a validator's answer against the source contract
// (openapi.SourceContract).
type Contract interface {
	// Check validates an answer to the source route template; the error
	// wraps openapi.ErrUndocumented when the status is not listed.
	Check(template string, status int, body []byte) error
}

// Metrics counts the edge's requests and serves every metric of the edge
// (metrics.Metrics).
type Metrics interface {
	// Request counts one answered request; route is the route as
	// /openapi.yaml writes it, or "unmatched".
	Request(route string, status int, took time.Duration)
	// View counts one ops view answered: result is "kept" (the view
	// composed earlier) or "composed" (for this request).
	View(route, result string)
	// Handler serves /metrics.
	Handler() http.Handler
}

// Config is what the routes need besides the pool and the contract.
type Config struct {
	ClusterID string
	Lanes     auth.Lanes
	// EdgeDocument and SourceDocument are served at /openapi.yaml and
	// /openapi-validator-source.yaml.
	EdgeDocument, SourceDocument []byte
	Now                          func() time.Time
	// LeaderRefresh is how long the edge keeps the leader it was told
	// of before asking again; a failed read from the leader asks again
	// at once. 0 asks on every request.
	LeaderRefresh time.Duration
	// Metrics, when nil, are the edge's own (metrics.New).
	Metrics Metrics
	// Views bounds the composed views kept (a view with a wallet or a
	// proposal id is one per id); 0: 4096.
	Views int
	// Version is the edge's software version, which /health names
	// (pkg/buildinfo); "" leaves it out.
	Version string
}

type server struct {
	cfg      Config
	up       Upstream
	contract Contract
	log      *zap.Logger
	leader   leaderCache
	views    *viewCache
	// envelopeHead and envelopeMid are the envelope before and after
	// generatedAt, encoded once.
	envelopeHead, envelopeMid []byte
	// bodies are answer buffers (*[]byte) used again: nearly every
	// request writes a kept view of a few kilobytes, and allocating and
	// clearing one each time was a tenth of the edge's own work.
	bodies sync.Pool
	// templates maps echo's route paths to the document's, the label of
	// the request metrics.
	templates map[string]string
}

// route is one route of the edge: its path as /openapi.yaml writes it, the
// check of its parameters, and its answer.
type route struct {
	path  string
	check func(echo.Context) error // nil: no parameters
	serve echo.HandlerFunc
}

// routes is the edge's route table, in the order of the contract's.
func (s *server) routes() []route {
	return []route{
		{"/ops/v1/overview", nil, s.overview},
		{"/ops/v1/header", nil, s.header},
		{"/ops/v1/network", nil, s.network},
		{"/ops/v1/cluster", nil, s.cluster},
		{"/ops/v1/raft", nil, s.raft},
		{"/ops/v1/replication", nil, s.replication},
		{"/ops/v1/queue", nil, s.queue},
		{"/ops/v1/signals", nil, s.signals},
		{"/ops/v1/durability", nil, s.durability},
		{"/ops/v1/health", nil, s.health},
		{"/ops/v1/proposals", nil, s.proposals},
		{"/ops/v1/proposals/queue/stats", nil, s.passThrough(at(srcQueueStats))},
		{"/ops/v1/proposals/release-flow", nil, s.passThrough(at(srcReleaseFlow))},
		{"/ops/v1/proposals/epochs", nil, s.passThrough(at(srcEpochs))},
		{"/ops/v1/explorer/summary", nil, s.passThrough(at(srcExplorerSummary))},
		{"/ops/v1/explorer/release-flow", nil, s.passThrough(at(srcExplorerFlow))},
		{"/ops/v1/explorer/proposal/{proposalId}", hexParam("proposalId", 64), s.explorerProposal},
		{"/ops/v1/explorer/wallets/{walletAddress}", hexParam("walletAddress", 40), s.explorerWallet},
		{"/ops/v1/runtime/msgbus", nil, s.msgbus},
		{"/ops/v1/runtime/media-driver", nil, s.mediaDriver},
		{"/ops/v1/runtime/storage", nil, s.runtimeStorage},
		{"/ops/v1/runtime/blobstore", nil, s.blobstore},
		{"/ops/v1/runtime/metrics", nil, s.runtimeMetrics},
		{"/ops/v1/config/osgi", nil, s.eachConfig(srcConfig, "reloadMode", "components")},
		{"/ops/v1/config/osgi/schema", nil, s.passThrough(at(srcConfigSchema))},
		{"/ops/v1/config/osgi/sources", nil, s.eachConfig(srcConfigSources, "sources")},
		{"/ops/v1/config/osgi/coverage", nil, s.passThrough(at(srcConfigCoverage))},
		{"/ops/v1/config/osgi/delta", nil, s.eachConfig(srcConfigDelta, "changed")},
		{"/ops/v1/events/recent", limitParam(1, eventsLimitMax), s.eventsRecent},
		{"/ops/v1/events/stats", nil, s.eventsStats},
		{"/ops/v1/transactions/summary", nil, s.passThrough(at(srcTxSummary))},
		{"/ops/v1/transactions/{transactionId}", hexParam("transactionId", 64), s.transaction},
		{"/ops/v1/finality", nil, s.passThrough(at(srcFinality))},
		{"/ops/v1/tarmk", nil, s.tarmk},
		{"/ops/v1/tar-chain", nil, s.tarChain},
		{"/ops/v1/blockchain/config", nil, s.passThrough(at(srcBlockchain))},
		{"/ops/v1/gc/status", nil, s.passThrough(at(srcGcStatus))},
		{"/ops/v1/gc/estimate", nil, s.passThrough(at(srcGcEstimate))},
		{"/ops/v1/compaction/proposals", nil, s.passThrough(at(srcCompaction))},
		{"/ops/v1/fragmentation/metrics", nil, s.passThrough(at(srcFragmentation))},
		{"/ops/v1/fragmentation/metrics/{walletAddress}", hexParam("walletAddress", 40), s.fragmentationWallet},
		{"/ops/v1/fragmentation/top", limitParam(1, 0), s.fragmentationTop},
		// The edge's own routes: no token, no validator.
		{"/openapi.yaml", nil, document(s.cfg.EdgeDocument)},
		{"/openapi-validator-source.yaml", nil, document(s.cfg.SourceDocument)},
		{"/health", nil, s.liveness},
		{"/metrics", nil, func(c echo.Context) error {
			s.cfg.Metrics.Handler().ServeHTTP(c.Response(), c.Request())
			return nil
		}},
	}
}

// liveness answers /health: the edge is up, and which version it runs.
func (s *server) liveness(c echo.Context) error {
	body := map[string]string{"status": "ok"}
	if s.cfg.Version != "" {
		body["version"] = s.cfg.Version
	}
	return c.JSON(http.StatusOK, body)
}

// New builds the echo instance of the edge.
func New(cfg Config, up Upstream, contract Contract, log *zap.Logger) *echo.Echo {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(cfg.Version)
	}
	if cfg.Views <= 0 {
		cfg.Views = 4096
	}
	s := &server{cfg: cfg, up: up, contract: contract, log: log, templates: map[string]string{}, views: newViewCache(cfg.Views)}
	s.envelopeHead, s.envelopeMid = envelopeParts(cfg.ClusterID)
	s.leader.every = cfg.LeaderRefresh
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.observe)
	// Tokens are checked before routing is acted on, so that without a
	// token nothing, not even which routes exist, is told.
	e.Use(s.authenticate)
	for _, r := range s.routes() {
		// Every method reaches the handler, so that each answers the
		// same 405 (echo would answer OPTIONS itself, with 204).
		e.Any(echoPath(r.path), s.handle(r))
		s.templates[echoPath(r.path)] = r.path
	}
	return e
}

// observe counts every request by route and status. The error is answered
// here rather than by echo after the middleware, so that its status is
// known when it is counted.
func (s *server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		route, ok := s.templates[c.Path()]
		if !ok {
			route = "unmatched"
		}
		s.cfg.Metrics.Request(route, c.Response().Status, time.Since(start))
		return nil
	}
}

// echoPath writes an OpenAPI path template the way echo routes it.
func echoPath(p string) string {
	return strings.NewReplacer("{", ":", "}", "").Replace(p)
}

// handle answers GET only: the contract has no other method, and a HEAD
// would cost the validators as much as a GET for no body, so it is 405
// like the rest.
func (s *server) handle(r route) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Method != http.MethodGet {
			return echo.ErrMethodNotAllowed
		}
		if r.check != nil {
			if err := r.check(c); err != nil {
				return err
			}
		}
		if strings.HasPrefix(r.path, opsPrefix) {
			return s.serveView(c, r.serve)
		}
		return r.serve(c)
	}
}

// opsPrefix is the part of the edge that takes tokens.
const opsPrefix = "/ops/v1/"

// authenticate applies the token lanes to every request under /ops/v1/,
// known route or not. The lane is chosen from the request's path; echo
// routes on the path as sent, unclean, so a path that reaches a runtime
// route always starts with the runtime prefix.
func (s *server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		path := c.Request().URL.Path
		if !strings.HasPrefix(path, opsPrefix) {
			return next(c)
		}
		switch s.cfg.Lanes.Check(path, c.Request().Header.Get(echo.HeaderAuthorization)) {
		case http.StatusUnauthorized:
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="ops"`)
			return newError(CodeUnauthorized, "a bearer token is required for this route")
		case http.StatusForbidden:
			return newError(CodeForbidden, "the bearer token is not permitted for this route")
		}
		return next(c)
	}
}

func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var oe *opsError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &oe):
	case errors.As(err, &he) && he.Code == http.StatusNotFound:
		oe = newError(CodeRouteNotFound, "no such route")
	case errors.As(err, &he) && he.Code == http.StatusMethodNotAllowed:
		oe = newError(CodeMethodNotAllowed, "only GET is served")
	default:
		s.log.Error("request failed", zap.String("path", c.Path()), zap.Error(err))
		oe = newError(CodeInternal, "internal error")
	}
	if oe.code == CodeMethodNotAllowed {
		c.Response().Header().Set(echo.HeaderAllow, http.MethodGet)
	}
	status, retryable := codeStatus(oe.code)
	body := ops.NewError(s.cfg.Now(), oe.code, oe.message, retryable)
	body.Error.Details = oe.details
	if err := c.JSON(status, body); err != nil {
		s.log.Debug("writing error body", zap.Error(err))
	}
}

func (s *server) envelope(c echo.Context, data map[string]any) error {
	if r, ok := c.Get(readerKey).(*reader); ok {
		return s.compose(c, r, data)
	}
	return c.JSON(http.StatusOK, ops.NewEnvelope(s.cfg.Now(), s.cfg.ClusterID, data))
}

func document(yaml []byte) echo.HandlerFunc {
	return func(c echo.Context) error { return c.Blob(http.StatusOK, "application/yaml", yaml) }
}
