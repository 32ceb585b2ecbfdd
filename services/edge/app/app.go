// Package app runs the edge adapter: the /ops/v1/* contract composed from
// validator source routes, whose answers are checked against the source
// contract (openapi-validator-source.yaml) first. The edge is stateless;
// run as many as needed.
package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/lifecycle"
	"github.com/contentledger/contentledger/pkg/profiling"
	"github.com/contentledger/contentledger/services/edge/internal/auth"
	"github.com/contentledger/contentledger/services/edge/internal/metrics"
	"github.com/contentledger/contentledger/services/edge/internal/routes"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
	"github.com/contentledger/contentledger/services/edge/openapi"
)

// Config is the edge's configuration, read from the environment with the
// prefix OPS (ADR 0008); the contract's names OPS_API_AUTH_TOKEN and
// OPS_RUNTIME_AUTH_TOKEN are kept exactly.
type Config struct {
	HTTPAddr         string        `envconfig:"HTTP_ADDR" default:"0.0.0.0:8787" desc:"address the /ops/v1 API listens on"`
	Validators       []string      `envconfig:"VALIDATORS" default:"http://127.0.0.1:8090" desc:"comma-separated validator base URLs"`
	ValidatorToken   string        `envconfig:"VALIDATOR_TOKEN" desc:"bearer token sent to validators: a token of their ops-read lane (SVC_VALIDATOR_OPS_READ_TOKENS, or AUTH_TOKEN)"`
	APIAuthToken     string        `envconfig:"API_AUTH_TOKEN" desc:"bearer token required on /ops/v1/*; unset: no token needed"`
	RuntimeAuthToken string        `envconfig:"RUNTIME_AUTH_TOKEN" desc:"stricter bearer token required on /ops/v1/runtime/*"`
	ClusterID        string        `envconfig:"CLUSTER_ID" default:"contentledger-local" desc:"clusterId stamped on every envelope"`
	UpstreamTimeout  time.Duration `envconfig:"UPSTREAM_TIMEOUT" default:"2s" desc:"timeout of one call to a validator, and of the wait for one of its slots"`
	PerValidator     int           `envconfig:"VALIDATOR_CONCURRENCY" default:"16" desc:"calls in flight to one validator at most; 0: no bound"`
	CacheTTL         time.Duration `envconfig:"CACHE_TTL" default:"500ms" desc:"how long an accepted validator answer is reused; 0: not reused (concurrent identical reads still share one call)"`
	CacheEntries     int           `envconfig:"CACHE_ENTRIES" default:"4096" desc:"validator answers kept at most, and as many composed views"`
	LeaderRefresh    time.Duration `envconfig:"LEADER_REFRESH" default:"1s" desc:"how long the leader's identity is kept; a failed read from it asks again at once"`
	// DebugAddr serves Go's /debug/pprof profiles on a listener of its own,
	// kept off the API port so that it can be bound to loopback only.
	DebugAddr string `envconfig:"DEBUG_ADDR" desc:"address of the /debug/pprof listener; unset: off"`
}

// Run serves until ctx ends. ready, when not nil, receives the bound address
// once the listener is open.
func Run(ctx context.Context, cfg Config, log *zap.Logger, ready chan<- string) error {
	m := metrics.New()
	version := buildinfo.Version()
	pool, err := upstream.NewPool(upstream.Config{
		URLs: cfg.Validators, Timeout: cfg.UpstreamTimeout, Token: cfg.ValidatorToken,
		PerValidator: cfg.PerValidator, Observer: m,
	})
	if err != nil {
		return err
	}
	// A shared call may go through every validator in turn, each with
	// its wait for a slot and its call.
	shared := 2 * cfg.UpstreamTimeout * time.Duration(len(pool.URLs()))
	cache := upstream.NewCache(pool, upstream.CacheConfig{TTL: cfg.CacheTTL, Entries: cfg.CacheEntries, Shared: shared, Observer: m})
	docs, err := openapi.Load()
	if err != nil {
		return err
	}
	contract, err := docs.SourceContract()
	if err != nil {
		return err
	}
	e := routes.New(routes.Config{
		ClusterID:      cfg.ClusterID,
		Lanes:          auth.Lanes{APIToken: cfg.APIAuthToken, RuntimeToken: cfg.RuntimeAuthToken},
		EdgeDocument:   docs.EdgeYAML,
		SourceDocument: docs.SourceYAML,
		LeaderRefresh:  cfg.LeaderRefresh,
		Metrics:        m,
		Views:          cfg.CacheEntries,
		Version:        version,
	}, cache, contract, log)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("edge: listen on %s: %w", cfg.HTTPAddr, err)
	}
	var g lifecycle.Group
	g.Go("http", func(ctx context.Context) error {
		return lifecycle.ServeHTTP(ctx, &http.Server{Handler: e, ReadHeaderTimeout: 5 * time.Second}, ln)
	})
	if cfg.DebugAddr != "" {
		debug, err := net.Listen("tcp", cfg.DebugAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("edge: listen on debug address %s: %w", cfg.DebugAddr, err)
		}
		log.Info("debug listener serving /debug/pprof", zap.String("addr", cfg.DebugAddr))
		g.Go("profiles", func(ctx context.Context) error { return lifecycle.ServeHTTP(ctx, profiling.Server(), debug) })
	}
	log.Info("edge serving", zap.String("version", version), zap.String("addr", ln.Addr().String()), zap.Strings("validators", pool.URLs()),
		zap.Duration("cacheTTL", cfg.CacheTTL), zap.Int("perValidator", cfg.PerValidator))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	return g.Run(ctx)
}
