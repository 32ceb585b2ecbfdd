// Package routes serves the edge contract /ops/v1/*: every answer is the ops
// envelope or the ops error envelope, composed from validator source routes.
package routes

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/contentledger/contentledger/pkg/api"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ops"
	"github.com/contentledger/contentledger/services/edge/internal/auth"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

// Error codes of the edge, in error.code.
const (
	CodeUnauthorized      = "unauthorized"
	CodeForbidden         = "forbidden"
	CodeRouteNotFound     = "route_not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeNotFound          = "not_found"
	CodeSourceUnavailable = "source_unavailable"
	CodeSourceInvalid     = "source_contract_invalid"
	CodeInternal          = "internal"
)

// Upstream is the validator pool as the routes use it.
type Upstream interface {
	Get(ctx context.Context, route string) (upstream.Response, []upstream.Source, error)
	GetFrom(ctx context.Context, base, route string) (upstream.Response, upstream.Source)
	URLs() []string
}

// Config is what the routes need besides the pool.
type Config struct {
	ClusterID string
	Lanes     auth.Lanes
	Now       func() time.Time
}

type server struct {
	cfg Config
	up  Upstream
	log *zap.Logger
}

// opsError is an error answered as the ops error envelope.
type opsError struct {
	status    int
	code      string
	message   string
	retryable bool
}

func (e *opsError) Error() string { return e.code + ": " + e.message }

// New builds the echo instance of the edge.
func New(cfg Config, up Upstream, log *zap.Logger) *echo.Echo {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &server{cfg: cfg, up: up, log: log}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	g := e.Group("/ops/v1", s.authenticate)
	g.GET("/health", s.health)
	g.GET("/cluster", s.cluster)
	g.GET("/raft", s.raft)
	g.GET("/replication", s.replication)
	g.GET("/queue", s.queue)
	g.GET("/proposals", s.proposals)
	g.GET("/proposals/queue/stats", s.passThrough("/v1/proposals/queue/stats", api.QueueStatsVersion))
	g.GET("/proposals/release-flow", s.passThrough("/v1/proposals/release-flow", api.ReleaseFlowVersion))
	g.GET("/explorer/release-flow", s.passThrough("/v1/explorer/release-flow", api.ExplorerReleaseFlowVersion))
	g.GET("/proposals/epochs", s.passThrough("/v1/proposals/epochs", api.EpochOverlayVersion))
	g.GET("/finality", s.passThrough("/v1/finality", api.FinalityVersion))
	g.GET("/explorer/summary", s.passThrough("/v1/explorer/summary", api.ExplorerSummaryVersion))
	g.GET("/explorer/wallets/:wallet", s.explorerWallet)
	g.GET("/explorer/proposal/:proposalId", s.proposal)
	e.GET("/health", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	return e
}

func (s *server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch s.cfg.Lanes.Check(c.Request().URL.Path, c.Request().Header.Get(echo.HeaderAuthorization)) {
		case http.StatusUnauthorized:
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="ops"`)
			return &opsError{http.StatusUnauthorized, CodeUnauthorized, "a bearer token is required for this route", false}
		case http.StatusForbidden:
			return &opsError{http.StatusForbidden, CodeForbidden, "the bearer token is not permitted for this route", false}
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
		oe = &opsError{http.StatusNotFound, CodeRouteNotFound, "no such route", false}
	case errors.As(err, &he) && he.Code == http.StatusMethodNotAllowed:
		oe = &opsError{http.StatusMethodNotAllowed, CodeMethodNotAllowed, "only GET is served", false}
	default:
		s.log.Error("request failed", zap.String("path", c.Path()), zap.Error(err))
		oe = &opsError{http.StatusInternalServerError, CodeInternal, "internal error", true}
	}
	if err := c.JSON(oe.status, ops.NewError(s.cfg.Now(), oe.code, oe.message, oe.retryable)); err != nil {
		s.log.Debug("writing error body", zap.Error(err))
	}
}

func (s *server) envelope(c echo.Context, data map[string]any) error {
	return c.JSON(http.StatusOK, ops.NewEnvelope(s.cfg.Now(), s.cfg.ClusterID, data))
}

// healthAnswer is one validator's /health body, nil when it gave none.
type healthAnswer struct {
	body map[string]any
	src  upstream.Source
}

// health asks every validator for /health at once and rolls the answers up.
func (s *server) health(c echo.Context) error {
	urls := s.up.URLs()
	answers := make([]healthAnswer, len(urls))
	var wg sync.WaitGroup
	for i, base := range urls {
		wg.Go(func() {
			resp, src := s.up.GetFrom(c.Request().Context(), base, "/health")
			a := healthAnswer{src: src}
			// /health answers 503 with a body when the node is unhealthy.
			if resp.Body != nil && json.Unmarshal(resp.Body, &a.body) == nil {
				a.src.OK = a.src.Error == "" || resp.Status == http.StatusServiceUnavailable
			}
			answers[i] = a
		})
	}
	wg.Wait()

	reachable, healthy := 0, 0
	validators := make([]map[string]any, 0, len(answers))
	sources := make([]upstream.Source, 0, len(answers))
	for _, a := range answers {
		sources = append(sources, a.src)
		if a.body == nil {
			validators = append(validators, map[string]any{"url": a.src.NodeID, "reachable": false, "error": a.src.Error})
			continue
		}
		reachable++
		if a.body["status"] == "ok" {
			healthy++
		}
		v := map[string]any{"url": a.src.NodeID, "reachable": true}
		for k, val := range a.body {
			v[k] = val
		}
		validators = append(validators, v)
	}
	quorum := len(urls)/2 + 1
	status := "healthy"
	switch {
	case healthy < quorum:
		status = "critical"
	case healthy < len(urls):
		status = "degraded"
	}
	check := func(ok bool, detail string) map[string]any {
		st := "ok"
		if !ok {
			st = "failing"
		}
		return map[string]any{"status": st, "detail": detail}
	}
	checks := map[string]any{
		"cluster": check(healthy >= quorum, plural(healthy, "healthy validator")+" of "+plural(len(urls), "configured")),
		"api":     check(true, "edge serving"),
	}
	for _, name := range []string{"storage", "chain", "nats"} {
		checks[name] = s.componentCheck(name, answers)
	}
	return s.envelope(c, map[string]any{
		"status":     status,
		"checks":     checks,
		"validators": validators,
		"quorum":     quorum,
		"reachable":  reachable,
		"sources":    sources,
	})
}

// componentCheck reduces the validators' own checks of one component: failing
// if any reachable validator reports it failing.
func (s *server) componentCheck(name string, answers []healthAnswer) map[string]any {
	status, detail := "unknown", "no validator reported it"
	for _, a := range answers {
		checks, _ := a.body["checks"].(map[string]any)
		c, _ := checks[name].(map[string]any)
		if c == nil {
			continue
		}
		st, _ := c["status"].(string)
		d, _ := c["detail"].(string)
		if status == "unknown" || st != "ok" {
			status, detail = st, d
		}
	}
	return map[string]any{"status": status, "detail": detail}
}

func plural(n int, what string) string { return strconv.Itoa(n) + " " + what }

var proposalIDPattern = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)

// proposal is the proposal detail: the validator's status record, with its
// payment transaction.
func (s *server) proposal(c echo.Context) error {
	id := c.Param("proposalId")
	if !proposalIDPattern.MatchString(id) {
		return &opsError{http.StatusNotFound, CodeNotFound, "proposal ids are 0x followed by 64 hex digits", false}
	}
	resp, sources, err := s.up.Get(c.Request().Context(), "/v1/proposals/"+id+"/status")
	if err != nil {
		return &opsError{http.StatusBadGateway, CodeSourceUnavailable, "no validator answered the proposal status route", true}
	}
	switch {
	case resp.Status == http.StatusNotFound:
		return &opsError{http.StatusNotFound, CodeNotFound, "no proposal " + id, false}
	case resp.Status != http.StatusOK:
		return &opsError{http.StatusBadGateway, CodeSourceInvalid, "the proposal status route answered " + http.StatusText(resp.Status), false}
	}
	var record map[string]any
	if err := json.Unmarshal(resp.Body, &record); err != nil || record["proposalId"] == nil || record["status"] == nil {
		return &opsError{http.StatusBadGateway, CodeSourceInvalid, "the proposal status route answered a body that is not a status record", false}
	}
	data := map[string]any{"proposal": record, "sources": sources}
	if pay, ok := record["payment"]; ok {
		data["transaction"] = pay
	}
	return s.envelope(c, data)
}
