// Package api serves the validator's HTTP routes with echo: parsing,
// validation and rendering only, no business rules. Every route is declared
// once, in the route table (routes.go), with its layer and the permission
// it needs; the parts of the validator the routes use come in through
// interfaces declared here (Deps). Every error answers the body of ADR 0006.
// See DESIGN.md.
package api

import (
	"context"
	"errors"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/services/validator/internal/access"
	"github.com/contentledger/contentledger/services/validator/internal/headreport"
	"github.com/contentledger/contentledger/services/validator/internal/settings"
)

// Proposals is the pipeline as the API sees it.
type Proposals interface {
	Submit(ctx context.Context, sub *proposal.Submission) (api.ProposalStatus, bool, error)
	// RefuseEarly returns the refusal of a submission under id of at most
	// n bytes that Submit would refuse at once for a full payment hold
	// (ADR 0030), before its form is decoded; nil to go on.
	RefuseEarly(ctx context.Context, id common.Hash, n int) error
	// RefuseImpatient returns the refusal of a submission of at most n
	// bytes whose client was refused at the payment hold's bound and came
	// back before its Retry-After, before its form is read; nil to go on.
	RefuseImpatient(ctx context.Context, n int) error
	WaitStatus(ctx context.Context, id common.Hash, wait time.Duration) (api.ProposalStatus, error)
	// QueueStats are the queue statistics of this validator's pipeline.
	QueueStats() api.QueueStats
	// ReleaseFlow is what holds proposals back and where they are.
	ReleaseFlow() api.ReleaseFlow
	// EpochOverlay is the proposals not yet applied by epoch.
	EpochOverlay() api.EpochOverlay
}

// Content reads applied state: content, wallet figures, GC accounts.
type Content interface {
	// Node returns the node at path, or ok false.
	Node(path string) (node *ledgerpb.Node, ok bool, err error)
	// Children returns up to limit names of the node's direct children.
	Children(path string, limit int) ([]string, error)
	// WalletStats are a wallet's content figures, nil when it never wrote.
	WalletStats(wallet [20]byte) (*ledgerpb.WalletStats, error)
	// Account is the wallet's stored GC account, nil when it has none.
	Account(wallet [20]byte) (*ledgerpb.GcAccount, error)
	// WalletNodes pages the subtree at root in path order.
	WalletNodes(root string, offset, limit int) ([]*ledgerpb.Node, bool, error)
	// FinalizedEpoch is the newest epoch applied state holds final.
	FinalizedEpoch() uint64
	// Unfinalized counts committed proposals whose epoch is not final, with
	// the oldest of them.
	Unfinalized() (uint64, *ledgerpb.ProposalRecord, error)
	// Counts are the decided proposals by outcome, and the applied index
	// they are at.
	Counts() (*ledgerpb.ProposalCounts, uint64)
}

// Config is what the API needs besides its dependencies.
type Config struct {
	// NodeID is this validator's raft id.
	NodeID uint64
	// DataDir is where the validator keeps its data (/health names it).
	DataDir string
	// Access decides what a bearer token is worth on each lane
	// (access.Gate). Default: every lane open.
	Access Access
	// OperatorLimiter, when set, limits the operator requests one client
	// address may make. Identifiers are client addresses.
	OperatorLimiter Limiter
	// ChatLimiter, when set, limits the questions one client address may
	// put to the operator assistant (each spends the operator's model
	// budget). Identifiers are client addresses.
	ChatLimiter Limiter
	// Form is how proposal forms are parsed.
	Form proposal.Options
	// Blockchain is the body of /v1/blockchain/config.
	Blockchain api.BlockchainConfig
	// MaxStatusWait bounds ?wait= on the status route.
	MaxStatusWait time.Duration
	// MaxChildren bounds the child names /api/explore lists.
	MaxChildren int
	// IPLimiter, when set, limits the proposals one client address may
	// submit (SVC_VALIDATOR_RATE_PER_IP). Identifiers are IP addresses.
	IPLimiter Limiter
	// Version is the software version the explorer summary names
	// (pkg/buildinfo).
	Version string
	// Clients tells the client of a request (c.RealIP), behind the trusted
	// proxies (SVC_VALIDATOR_TRUSTED_PROXIES); nil: the connection's
	// address. MaxBodyBytes is the body limit of a route that names none
	// (bodyLimit); 0: httpserver.DefaultMaxBodyBytes.
	Clients      *httpserver.Clients
	MaxBodyBytes int64
	// PublicGateway is the IPFS gateway clients are sent to for a blob
	// (/api/cid/*); nil: none. MaxBlobBytes is the largest binary
	// /api/blob serves (SVC_VALIDATOR_BLOB_MAX_BYTES; 0: no cap here).
	PublicGateway *url.URL
	MaxBlobBytes  int64
	// PublicURL is the public URL this validator advertises unless the
	// operator set another (SVC_VALIDATOR_PUBLIC_URL; "" none).
	PublicURL string
}

// Deps are the parts of the validator the routes read and drive, each
// through the interface this package declares for it. Optional ones are
// nil when the validator runs without them.
type Deps struct {
	Proposals Proposals
	Content   Content
	Cluster   Cluster
	GC        GC
	// Compactions is the leader's GC proposal manager (the operator's
	// COMPACT routes).
	Compactions Compactions
	// MockEpochs, set in MOCK mode only, serves the /api/mock/* epoch
	// routes; elsewhere they do not exist (404).
	MockEpochs MockEpochs
	// EventStreams serves the replicated event log; EventPublisher is its
	// publication to NATS; OpsEvents, this validator's operational events,
	// and OpsEventStreams streams them. The two streams share one budget of
	// streams per client.
	EventStreams    EventStreams
	EventPublisher  EventPublisher
	OpsEvents       OpsEvents
	OpsEventStreams EventStreams
	// ChainStatus, Streams and Transactions are nil in MOCK mode, where no
	// chain is followed (Streams: when the validator uses no NATS).
	ChainStatus  ChainStatus
	Streams      Streams
	Transactions Transactions
	// NATS are the validator's NATS connections (none in MOCK mode unless it
	// publishes events); PaymentIndex is nil in MOCK mode.
	NATS         []NATSClient
	PaymentIndex PaymentIndex
	// Probes are the checks of /health/deep, by name.
	Probes map[string]Probe
	// Segments is the segment store's views; Database, the Pebble
	// database's figures; RaftLog, the stored raft log's bounds.
	Segments Segments
	Database Database
	RaftLog  RaftLog
	// Gateway is the IPFS gateway's checker; nil when none is configured.
	Gateway Gateway
	// Binaries is the upload intent flow; Blobs, the blob mappings;
	// BlobReader reads binaries through the gateway, nil when none is
	// configured (docs/adr/0037).
	Binaries   Binaries
	Blobs      Blobs
	BlobReader BlobReader
	// Collectors are the Prometheus collectors /metrics serves besides the
	// HTTP series (internal/metrics).
	Collectors []prometheus.Collector
	// UI is the local UI's pages; nil: not served.
	UI UI
	// Chat is the operator assistant; nil when no endpoint is configured.
	Chat Chat
	// Settings and Tunables are what the configuration views show.
	Settings []settings.Setting
	Tunables []api.Tunable
	// ClientRegistrations binds client ids to wallets; Heads is the applied
	// state's head; HeadReports, the followers' reports the leader keeps;
	// PublicURL, where the operator's public URL is kept (docs/adr/0038).
	ClientRegistrations Clients
	Heads               Heads
	HeadReports         HeadBook
	PublicURL           LocalValue
}

// Access decides what a bearer token is worth on a lane (access.Gate).
type Access interface {
	// Check decides what token ("": none) is worth on lane.
	Check(lane access.Lane, token string) access.Decision
	// First is a token of lane, "" when the lane is open: what the
	// validator presents to its peers.
	First(lane access.Lane) string
}

// UI is the local UI's pages (ui.Pages).
type UI interface {
	// Handler serves the page of route; nil when there is none.
	Handler(route string) echo.HandlerFunc
}

// Limiter admits or refuses one request of an identifier (echo's
// middleware.RateLimiterStore).
type Limiter interface {
	Allow(identifier string) (bool, error)
}

// Server holds the routes.
type Server struct {
	cfg        Config
	deps       Deps
	log        *zap.Logger
	peerHTTP   *http.Client // forwarding and peer status calls
	resolver   resolver     // member host names, for forwarded requests
	deepHealth deepHealth
	// publicCluster is /health/cluster's last answer to anyone.
	publicCluster publicClusterView
	metrics       *httpMetrics
	// served are the routes of the table this server serves, and
	// permissions what each needs, by routeKey.
	served      []Route
	permissions map[string]Permission
	// contract is the contract's routes as /v1/index shows them.
	contract contractIndex
	now      func() time.Time
	// handler is the echo instance New returns: the operator assistant
	// reads the routes through it (chatRoutes).
	handler *echo.Echo
}

// New builds the echo instance with every route.
func New(cfg Config, deps Deps, log *zap.Logger) *echo.Echo {
	if cfg.MaxStatusWait <= 0 {
		cfg.MaxStatusWait = 60 * time.Second
	}
	if cfg.MaxChildren <= 0 {
		cfg.MaxChildren = 1000
	}
	if cfg.Access == nil {
		cfg.Access = access.Tokens{}
	}
	s := &Server{cfg: cfg, deps: deps, log: log, now: time.Now, metrics: newHTTPMetrics(deps.Collectors),
		peerHTTP: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}}
	e := echo.New()
	s.handler = e
	e.HideBanner, e.HidePort = true, true
	// The client address is the connection's unless it is a trusted proxy
	// (httpserver.Clients); forwarding headers from anyone else are ignored.
	e.IPExtractor = cfg.Clients.IPExtractor()
	e.HTTPErrorHandler = s.handleError
	e.Pre(s.metrics.count)
	e.Use(s.authenticate)
	e.Use(s.limitBody)
	s.permissions = map[string]Permission{}
	table := s.routes()
	for _, r := range table {
		if r.handler == nil {
			continue // not served: its dependency is absent
		}
		e.Add(r.Method, r.Path, r.handler)
		s.served = append(s.served, r)
		s.permissions[routeKey(r.Method, r.Path)] = r.Permission
	}
	s.contract = newContractIndex(table, s.served)
	return e
}

// authenticate enforces the route's permission: a Public route passes;
// any other passes when its lane is open or the bearer token is one of
// the lane's (401 without a token, 403 with another). A request that
// matched no route needs what the ops-read lane needs, so that probing for
// routes costs as much as reading them. Operator requests must also carry
// their arguments as JSON and stay within the operator rate.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		perm, matched := s.permissions[routeKey(c.Request().Method, c.Path())]
		if !matched {
			perm = OpsRead
		}
		if perm == Public {
			return next(c)
		}
		switch s.cfg.Access.Check(access.Lane(perm), bearerToken(c.Request())) {
		case access.Missing:
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="validator"`)
			return apierror.New(apierror.Unauthorized, "the %s lane requires a bearer token", perm)
		case access.Denied:
			return apierror.New(apierror.Forbidden, "the bearer token is not permitted on the %s lane", perm)
		}
		if perm == Operator {
			if err := s.operatorRequest(c); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// bearerToken is the request's bearer token, "" without one.
func bearerToken(r *http.Request) string {
	token, _ := strings.CutPrefix(r.Header.Get(echo.HeaderAuthorization), "Bearer ")
	return strings.TrimSpace(token)
}

// operatorRequest refuses an operator request that a browser could have
// sent on another site's behalf (anything but JSON: a form post or a
// no-cors fetch cannot set Content-Type application/json without a CORS
// preflight, which the validator never answers), that carries arguments
// in its query instead of its body, or that goes past the operator rate.
func (s *Server) operatorRequest(c echo.Context) error {
	// Counted by client key (IPv6: its /64), once: on the member a client
	// reached, not again on the leader it forwards to (as limitIP). A
	// member's own head reports are not counted: they would use up the
	// operators' budget at the leader of a cluster on one host.
	ip := c.RealIP()
	by := c.Request().Header.Get(forwardedHeader)
	exempt := by != "" && s.isMemberAddress(by, ip) || c.Path() == headreport.Path && s.fromMember(ip)
	if s.cfg.OperatorLimiter != nil && !exempt {
		if ok, err := s.cfg.OperatorLimiter.Allow(httpserver.KeyOfAddr(ip)); err != nil || !ok {
			c.Response().Header().Set("Retry-After", "1")
			return apierror.New(apierror.RateLimited, "too many operator requests from this address; retry shortly")
		}
	}
	mediaType, _, _ := strings.Cut(c.Request().Header.Get(echo.HeaderContentType), ";")
	if !strings.EqualFold(strings.TrimSpace(mediaType), echo.MIMEApplicationJSON) {
		return apierror.Field("Content-Type", "operator requests must be sent as application/json, their arguments in the JSON body")
	}
	if q := c.QueryParams(); len(q) > 0 {
		return apierror.Field(slices.Sorted(maps.Keys(q))[0], "operator requests take their arguments in the JSON body, not in the query")
	}
	return nil
}

// opsReader reports whether the caller may see what the ops-read lane
// shows: the full view of the public routes.
func (s *Server) opsReader(c echo.Context) bool {
	switch s.cfg.Access.Check(access.OpsRead, bearerToken(c.Request())) {
	case access.Open, access.Granted:
		return true
	}
	return false
}

// handleError writes every error as the body of ADR 0006.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		// Too late for an error body: the answer is cut short. Ending it
		// normally would hand the reader a body that looks complete (a
		// chunked answer's last chunk), so the connection is dropped
		// instead (http.ErrAbortHandler, which net/http neither logs nor
		// answers). Logged unless the client went away.
		if c.Request().Context().Err() == nil {
			s.log.Warn("request failed after its answer began; its connection is dropped", zap.String("path", c.Path()), zap.Error(err))
		}
		panic(http.ErrAbortHandler)
	}
	apiErr := apierror.As(err)
	var he *echo.HTTPError
	switch {
	case apiErr != nil:
	case errors.As(err, &he):
		apiErr = httpError(he)
	default:
		s.log.Error("request failed", zap.String("path", c.Path()), zap.Error(err))
		apiErr = apierror.New(apierror.Internal, "internal error")
	}
	switch {
	case apiErr.RetryAfter > 0:
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(apiErr.RetryAfter.Seconds()))))
	case apiErr.Code == apierror.LeaderUnknown || apiErr.Code == apierror.Overloaded || apiErr.Code == apierror.RateLimited:
		c.Response().Header().Set("Retry-After", "1")
	}
	if err := c.JSON(apiErr.Status(), apierror.Body{Error: apiErr}); err != nil {
		s.log.Debug("writing error body", zap.Error(err))
	}
}

func httpError(he *echo.HTTPError) *apierror.Error {
	switch he.Code {
	case http.StatusNotFound:
		return apierror.New(apierror.NotFound, "no such route")
	case http.StatusMethodNotAllowed:
		return apierror.New(apierror.MethodNotAllowed, "method not allowed on this route")
	case http.StatusRequestEntityTooLarge:
		return apierror.New(apierror.ContentTooLarge, "request body too large")
	case http.StatusUnsupportedMediaType:
		return apierror.New(apierror.InvalidField, "unsupported content type")
	}
	if he.Code >= 400 && he.Code < 500 {
		return apierror.New(apierror.InvalidField, "%v", he.Message)
	}
	return apierror.New(apierror.Internal, "internal error")
}

func (s *Server) blockchainConfig(c echo.Context) error {
	return c.JSON(http.StatusOK, s.cfg.Blockchain)
}
