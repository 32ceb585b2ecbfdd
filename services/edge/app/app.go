// Package app runs the edge adapter: the /ops/v1/* contract composed from
// validator source routes, whose answers are checked against the source
// contract (openapi-validator-source.yaml) first. The edge is stateless;
// run as many as needed.
package app

import (
	"context"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/lifecycle"
	"github.com/contentledger/contentledger/pkg/logging"
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
	LogLevel  string `envconfig:"LOG_LEVEL" default:"info" desc:"least severe level logged: debug, info, warn or error"`
	// The HTTP servers' limits (pkg/httpserver, ADR 0026), as the
	// validator's. Zero takes the package's default; negative connection
	// caps: no cap.
	HTTPReadHeaderTimeout time.Duration `envconfig:"HTTP_READ_HEADER_TIMEOUT" desc:"time to read a request's headers; 0: 5s"`
	HTTPReadTimeout       time.Duration `envconfig:"HTTP_READ_TIMEOUT" desc:"time to read a whole request; 0: 30s"`
	HTTPWriteTimeout      time.Duration `envconfig:"HTTP_WRITE_TIMEOUT" desc:"time from a request's headers to the end of its answer; 0: 90s"`
	HTTPIdleTimeout       time.Duration `envconfig:"HTTP_IDLE_TIMEOUT" desc:"time a keep-alive connection waits for its next request; 0: 120s"`
	HTTPMaxHeaderBytes    int           `envconfig:"HTTP_MAX_HEADER_BYTES" desc:"largest request header block; 0: 64 KiB"`
	HTTPMaxBodyBytes      int64         `envconfig:"HTTP_MAX_BODY_BYTES" desc:"largest request body (the routes take none); larger answers 413; 0: 64 KiB"`
	HTTPMaxConns          int           `envconfig:"HTTP_MAX_CONNS" desc:"open connections in all; one more is closed at once; 0: 8192; negative: no cap"`
	HTTPMaxConnsPerClient int           `envconfig:"HTTP_MAX_CONNS_PER_CLIENT" desc:"open connections of one client (IPv6: one /64; trusted proxies exempt); 0: 256; negative: no cap"`
	HTTPTLSCert           string        `envconfig:"HTTP_TLS_CERT" desc:"PEM certificate: set with HTTP_TLS_KEY, the edge serves HTTPS only; re-read when the files change"`
	HTTPTLSKey            string        `envconfig:"HTTP_TLS_KEY" desc:"PEM private key of HTTP_TLS_CERT"`
	TrustedProxies        []string      `envconfig:"TRUSTED_PROXIES" desc:"comma-separated addresses or CIDRs of proxies whose FORWARDED_HEADER names the client; unset: none"`
	ForwardedHeader       string        `envconfig:"FORWARDED_HEADER" desc:"X-Forwarded-For or Forwarded; empty: X-Forwarded-For"`
}

// HTTPServer is the configuration of the edge's HTTP servers.
func (c Config) HTTPServer() httpserver.Config {
	return httpserver.Config{ReadHeaderTimeout: c.HTTPReadHeaderTimeout, ReadTimeout: c.HTTPReadTimeout,
		WriteTimeout: c.HTTPWriteTimeout, IdleTimeout: c.HTTPIdleTimeout, MaxHeaderBytes: c.HTTPMaxHeaderBytes,
		MaxBodyBytes: c.HTTPMaxBodyBytes, MaxConns: c.HTTPMaxConns, MaxConnsPerClient: c.HTTPMaxConnsPerClient,
		TLSCert: c.HTTPTLSCert, TLSKey: c.HTTPTLSKey, TrustedProxies: c.TrustedProxies, ForwardedHeader: c.ForwardedHeader}
}

// Validate reports a configuration the edge cannot run with, naming the
// setting as the environment spells it.
func (c Config) Validate() error {
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("OPS_LOG_LEVEL: %w", err)
	}
	return nil
}

// Run serves until ctx ends. ready, when not nil, receives the bound address
// once the listener is open.
func Run(ctx context.Context, cfg Config, log *zap.Logger, ready chan<- string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	version := buildinfo.Version()
	m := metrics.New(version)
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
	// The routes are GETs: every request gets the server-wide body limit.
	httpCfg := cfg.HTTPServer()
	srv, err := httpserver.New(httpCfg, httpserver.LimitBodies(e, httpCfg.WithDefaults().MaxBodyBytes))
	if err != nil {
		return fmt.Errorf("edge: HTTP server: %w", err)
	}
	var profiles *httpserver.Server
	if cfg.DebugAddr != "" {
		if profiles, err = profiling.Server(httpCfg); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("edge: listen on %s: %w", cfg.HTTPAddr, err)
	}
	var g lifecycle.Group
	g.Go("http", func(ctx context.Context) error { return srv.Serve(ctx, ln) })
	if profiles != nil {
		debug, err := net.Listen("tcp", cfg.DebugAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("edge: listen on debug address %s: %w", cfg.DebugAddr, err)
		}
		log.Info("debug listener serving /debug/pprof", zap.String("addr", cfg.DebugAddr))
		g.Go("profiles", func(ctx context.Context) error { return profiles.Serve(ctx, debug) })
	}
	log.Info("edge serving", zap.String("version", version), zap.String("addr", ln.Addr().String()), zap.Strings("validators", pool.URLs()),
		zap.Duration("cacheTTL", cfg.CacheTTL), zap.Int("perValidator", cfg.PerValidator))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	return g.Run(ctx)
}
