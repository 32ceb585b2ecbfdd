package routes

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
	"github.com/contentledger/contentledger/services/edge/openapi"
)

// The validator routes the edge reads, as /openapi-validator-source.yaml
// names them. Every answer is checked against that document's schema for
// the route before it is decoded.
const (
	srcHealth           = "/health"
	srcClusterHealth    = "/health/cluster"
	srcLeader           = "/v1/consensus/leader"
	srcStatus           = "/v1/consensus/status"
	srcStateHash        = "/v1/consensus/state-hash"
	srcPeers            = "/v1/peers"
	srcRaftMetrics      = "/v1/msgbus/raft-metrics"
	srcReplication      = "/v1/msgbus/replication-lag"
	srcClusterState     = "/v1/msgbus/cluster-state"
	srcQueueStats       = "/v1/proposals/queue/stats"
	srcReleaseFlow      = "/v1/proposals/release-flow"
	srcEpochs           = "/v1/proposals/epochs"
	srcCounts           = "/v1/proposals/counts"
	srcExplorerSummary  = "/v1/explorer/summary"
	srcExplorerFlow     = "/v1/explorer/release-flow"
	srcExplorerProposal = "/v1/explorer/proposals/{proposalId}"
	srcExplorerWallet   = "/v1/explorer/wallets/{walletAddress}"
	srcFinality         = "/v1/finality"
	srcBlockchain       = "/v1/blockchain/config"
	srcGcStatus         = "/v1/gc/status"
	srcGcEstimate       = "/v1/gc/estimate"
	srcCompaction       = "/v1/compaction/proposals"
	srcGcVote           = "/v1/gc/vote"
	srcFragmentation    = "/v1/fragmentation/metrics"
	srcFragWallet       = "/v1/fragmentation/metrics/{walletAddress}"
	srcFragTop          = "/v1/fragmentation/top"
	srcStorage          = "/v1/ops/snapshots/storage"
	srcRuntime          = "/v1/ops/snapshots/runtime"
	srcConfig           = "/v1/config/osgi"
	srcConfigSchema     = "/v1/config/osgi/schema"
	srcConfigSources    = "/v1/config/osgi/sources"
	srcConfigCoverage   = "/v1/config/osgi/coverage"
	srcConfigDelta      = "/v1/config/osgi/delta"
	srcEventsRecent     = "/v1/events/recent"
	srcEventsStats      = "/v1/events/stats"
	srcTxSummary        = "/v1/transactions/summary"
	srcTransaction      = "/v1/transactions/{transactionId}"
	srcChainStatus      = "/v1/chain/status"
)

// consumedSources lists the routes above; a test holds each to a path of
// the source document (which describes the validators' other source
// routes too).
func consumedSources() []string {
	return []string{srcHealth, srcClusterHealth, srcLeader, srcStatus, srcStateHash, srcPeers, srcRaftMetrics,
		srcReplication, srcClusterState, srcQueueStats, srcReleaseFlow, srcEpochs, srcCounts, srcExplorerSummary,
		srcExplorerFlow, srcExplorerProposal, srcExplorerWallet, srcFinality, srcBlockchain, srcGcStatus, srcGcEstimate,
		srcCompaction, srcGcVote, srcFragmentation, srcFragWallet, srcFragTop, srcStorage, srcRuntime, srcConfig, srcConfigSchema,
		srcConfigSources, srcConfigCoverage, srcConfigDelta, srcEventsRecent, srcEventsStats, srcTxSummary, srcTransaction, srcChainStatus}
}

// call is one request to a source route: the route's template in the
// source document, and the path (with query) asked.
type call struct{ template, path string }

func at(template string) call { return call{template, template} }

func (c call) route() upstream.Route { return upstream.Route{Template: c.template, Path: c.path} }

// with fills the {name} segment of the path.
func (c call) with(name, value string) call {
	c.path = strings.Replace(c.path, "{"+name+"}", value, 1)
	return c
}

// accept takes the answers the source document lists for the route, with
// a body that matches. A 5xx it does not list is a validator that could
// not answer (down, electing, overloaded): another may.
func (s *server) accept(template string) upstream.Accept {
	return func(r upstream.Response) error {
		err := s.contract.Check(template, r.Status, r.Body)
		if errors.Is(err, openapi.ErrUndocumented) && r.Status >= http.StatusInternalServerError {
			return upstream.Unavailable("status %d", r.Status)
		}
		return err
	}
}

// reader reads the source routes of one request and keeps every attempt
// for data.sources[]. Its methods may be called from several goroutines.
type reader struct {
	s   *server
	ctx context.Context

	mu      sync.Mutex
	sources []upstream.Source
	// deps are the kept answers read, each with its attempts in sources;
	// volatile is set by a read that used anything else (a failure, an
	// answer not kept, the clock): its view cannot be kept.
	deps     []dep
	volatile bool
	// asked are the attempts at the leader's identity: made for this
	// request alone (leaderCache keeps the answer), so a kept view
	// leaves them out.
	asked []upstream.Source

	// One leader for the whole request, so that a view's leader reads
	// agree.
	leaderOnce sync.Once
	leader     string
	usedLeader bool
}

// readerKey is where a request's reader is found by the envelope.
const readerKey = "edge.reader"

func (s *server) reader(c echo.Context) *reader {
	r := &reader{s: s, ctx: c.Request().Context()}
	c.Set(readerKey, r)
	return r
}

// record keeps the attempts of one read; kept names the answer taken (the
// zero Version when it is not kept or none was taken).
func (r *reader) record(kept upstream.Version, src ...upstream.Source) {
	r.mu.Lock()
	from := len(r.sources)
	r.sources = append(r.sources, src...)
	if kept.Seq == 0 {
		r.volatile = true
	} else {
		r.deps = append(r.deps, dep{kept: kept, from: from, to: len(r.sources)})
	}
	r.mu.Unlock()
}

// uncacheable marks the view as depending on more than its kept answers.
func (r *reader) uncacheable() {
	r.mu.Lock()
	r.volatile = true
	r.mu.Unlock()
}

// attempts returns the attempts so far, never nil (data.sources[] is an
// array even when empty).
func (r *reader) attempts() []upstream.Source {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(append(make([]upstream.Source, 0, len(r.asked)+len(r.sources)), r.asked...), r.sources...)
}

// read asks the validators in turn for c, and decodes the first answer
// within the contract into each of out. The status is returned,
// since a source may list others than 200 (404, or /health's 503); the
// caller reads out accordingly. Failure is the ops error to answer.
func (r *reader) read(c call, out ...any) (int, error) {
	resp, srcs, err := r.s.up.Get(r.ctx, c.route(), r.s.accept(c.template))
	r.record(resp.Kept, srcs...)
	if err != nil {
		return 0, r.sourceError(c, err)
	}
	return resp.Status, decode(c, resp, out...)
}

// readFrom asks one validator; the error is upstream's, for the views that
// report each validator's answer.
func (r *reader) readFrom(base string, c call, out ...any) (int, error) {
	resp, src, err := r.s.up.GetFrom(r.ctx, base, c.route(), r.s.accept(c.template))
	r.record(resp.Kept, src)
	if err != nil {
		return 0, err
	}
	return resp.Status, decode(c, resp, out...)
}

// readLeader reads c from the leader: the views of the pipeline are the
// leader's. When no leader is known, or it is not among the edge's
// validators, or it fails, any validator answers; its view is then a
// follower's, which its body says.
func (r *reader) readLeader(c call, out ...any) (int, error) {
	if base := r.leaderURL(); base != "" {
		if status, err := r.readFrom(base, c, out...); err == nil {
			return status, nil
		}
		// The leader may have stepped down or gone: the next
		// request asks who leads now.
		r.s.leader.forget(base)
	}
	return r.read(c, out...)
}

// leaderCache is the leader as the edge was last told: asking
// /v1/consensus/leader for every request would double the calls of the
// pipeline's views. A leader that changes is seen after at most every, or
// at the first failed read from the old one; meanwhile a follower's view
// is a view too, which the body says.
type leaderCache struct {
	every time.Duration

	mu  sync.Mutex
	url string
	at  time.Time
	ok  bool
}

func (l *leaderCache) get(now time.Time) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.url, l.ok && now.Sub(l.at) < l.every
}

func (l *leaderCache) set(url string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.url, l.at, l.ok = url, at, true
}

// forget drops url unless another leader was learnt meanwhile.
func (l *leaderCache) forget(url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.url == url {
		l.ok = false
	}
}

// leaderURL is the validator that leads; "" when none answers or none is
// known (kept as well: during an election every request would ask).
func (r *reader) leaderURL() string {
	r.leaderOnce.Do(func() { r.leader, r.usedLeader = r.askLeader(), true })
	return r.leader
}

func (r *reader) askLeader() string {
	if url, ok := r.s.leader.get(time.Now()); ok {
		return url
	}
	leaderRoute := at(srcLeader)
	var info api.LeaderInfo
	// Fresh: the cache of answers would hand back the leader just
	// forgotten; concurrent requests still share the one call.
	resp, srcs, err := r.s.up.Get(r.ctx, upstream.Route{Template: leaderRoute.template, Path: leaderRoute.path, Fresh: true},
		r.s.accept(leaderRoute.template))
	r.mu.Lock()
	r.asked = append(r.asked, srcs...)
	r.mu.Unlock()
	if err != nil || resp.Status != http.StatusOK || decode(leaderRoute, resp, &info) != nil {
		return ""
	}
	url := ""
	if info.Known && slices.Contains(r.s.up.URLs(), info.LeaderURL) {
		url = info.LeaderURL
	}
	r.s.leader.set(url, time.Now())
	return url
}

// answeredBy is the validator whose answer to c was taken.
func (r *reader) answeredBy(c call) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.sources) - 1; i >= 0; i-- {
		if src := r.sources[i]; src.OK && src.Route == c.path {
			return src.NodeID
		}
	}
	return ""
}

// noneAnswered is the error of a view that asked every validator for c and
// could use no answer: errs are their failures.
func (r *reader) noneAnswered(c call, errs []error) error {
	err := upstream.ErrUnavailable
	for _, e := range errs {
		if errors.Is(e, upstream.ErrRejected) {
			err = upstream.ErrRejected
		}
	}
	return r.sourceError(c, err)
}

// sourceError turns a failed read into the ops error, with the attempts.
func (r *reader) sourceError(c call, err error) error {
	e := newError(CodeSourceUnavailable, "no validator answered %s", c.path)
	if errors.Is(err, upstream.ErrRejected) {
		e = newError(CodeSourceInvalid, "no validator answered %s within its contract (/openapi-validator-source.yaml)", c.path)
	}
	return e.with("sourceRoute", c.template).with("sources", r.attempts())
}

func decode(c call, resp upstream.Response, out ...any) error {
	for _, o := range out {
		// The body matched its schema already; what still fails here is
		// a value the schema allows and the Go type does not (a
		// negative count).
		if err := json.Unmarshal(resp.Body, o); err != nil {
			return newError(CodeSourceInvalid, "%s answered a value the edge cannot read: %v", c.path, err).with("sourceRoute", c.template)
		}
	}
	return nil
}
