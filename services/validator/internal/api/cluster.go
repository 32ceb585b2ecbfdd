package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/services/validator/internal/access"
)

// Cluster is this validator's view of its cluster.
type Cluster interface {
	// Status is this node's consensus status.
	Status() api.ConsensusStatus
	// Members lists the cluster's validators, this one included.
	Members() []api.Member
	// Membership is the voters and learners raft holds.
	Membership() (voters, learners []uint64)
	// LeadershipHistory lists the leader changes this node saw, and their count.
	LeadershipHistory() ([]api.LeadershipChange, uint64)
	// StartedAt is when this validator started.
	StartedAt() time.Time
	// PeerTransport is the raft transport's view of a peer, nil when there
	// is none.
	PeerTransport(id uint64) *api.PeerTransport
	// RaftMetrics are this node's raft figures.
	RaftMetrics() api.RaftMetrics
	// Replication is the leader's view of every member's log.
	Replication() api.ReplicationLag
	// StateHashAt is this node's state hash right after it applied index,
	// while it still holds it.
	StateHashAt(index uint64) (string, bool)
	// AddMember adds a member as a learner through raft, when the
	// membership rules allow it, and waits until raft has installed it.
	// The leader promotes it once it is caught up. A refusal is an
	// *apierror.Error (membership_refused with a reason, ADR 0027).
	AddMember(ctx context.Context, m api.Member) error
	// PromoteMember makes a caught-up learner a voter through raft, when
	// the rules allow it, and waits until raft has installed it.
	PromoteMember(ctx context.Context, id uint64) error
	// RemoveMember removes a member through raft, when the rules allow it,
	// and waits until raft has installed the change.
	RemoveMember(ctx context.Context, id uint64) error
}

// forwardedHeader marks a request a follower forwarded to the leader; a
// request carrying it is never forwarded again, so a stale leader view
// cannot bounce a request between nodes.
const forwardedHeader = "X-Ledger-Forwarded-By"

// forwardedClientHeader carries, on a forwarded request, the client the
// follower took it from (its key: an address, an IPv6 /64), so that the
// leader bounds what each client has waiting (clientKey). It is believed
// only from a member's own address, like forwardedHeader.
const forwardedClientHeader = "X-Ledger-Forwarded-For"

// leader returns the leader member, and whether it is known and not this
// node.
func (s *Server) leader() (api.Member, api.ConsensusStatus, bool) {
	st := s.deps.Cluster.Status()
	if st.Leader == 0 || st.Leader == st.NodeID {
		return api.Member{}, st, false
	}
	for _, m := range s.deps.Cluster.Members() {
		if m.ID == st.Leader {
			return m, st, true
		}
	}
	return api.Member{}, st, false
}

// bufferBody reads the request's whole body (bounded by its route's limit
// and the server's read timeout) before it is forwarded, so that a client
// trickling a body holds a connection of this validator only, never one
// of the leader's: forwarding a stream would let one slow client at every
// follower take up the followers' connection budget at the leader.
func (s *Server) bufferBody(c echo.Context) error {
	req := c.Request()
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	body, err := io.ReadAll(req.Body)
	switch {
	case httpserver.IsTooLarge(err):
		return httpserver.TooLarge(s.bodyLimit(req.Method, c.Path()))
	case err != nil:
		return apierror.New(apierror.InvalidField, "the request body could not be read: %v", err)
	}
	req.Body, req.ContentLength, req.TransferEncoding = io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
	return nil
}

// forward proxies the request to the leader. handled is false when this
// node should answer itself: it is the leader.
func (s *Server) forward(c echo.Context) (handled bool, err error) {
	st := s.deps.Cluster.Status()
	if st.Role == api.RoleLeader {
		return false, nil
	}
	if by := c.Request().Header.Get(forwardedHeader); by != "" {
		return true, apierror.New(apierror.LeaderUnknown, "forwarded by validator %s to a validator that is not the leader", by)
	}
	m, _, ok := s.leader()
	if !ok {
		return true, apierror.New(apierror.LeaderUnknown, "no leader is known; retry shortly")
	}
	target, err := url.Parse(m.APIURL)
	if err != nil {
		return true, fmt.Errorf("leader %d has a bad API URL %q: %w", m.ID, m.APIURL, err)
	}
	if err := s.bufferBody(c); err != nil {
		return true, err
	}
	client := s.clientKey(c)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			// The caller's own token goes along (ProxyRequest.Out keeps its
			// headers): the leader admits exactly whom this validator does.
			r.Out.Header.Set(forwardedHeader, strconv.FormatUint(st.NodeID, 10))
			r.Out.Header.Set(forwardedClientHeader, client)
		},
		Transport: s.peerHTTP.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("forwarding to the leader failed", zap.Uint64("leader", m.ID), zap.Error(err))
			e := apierror.New(apierror.LeaderUnknown, "the leader (validator %d) did not answer; retry shortly", m.ID)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(e.Status())
			_ = json.NewEncoder(w).Encode(apierror.Body{Error: e})
		},
	}
	proxy.ServeHTTP(c.Response(), c.Request())
	return true, nil
}

func (s *Server) consensusLeader(c echo.Context) error {
	st := s.deps.Cluster.Status()
	info := api.LeaderInfo{ContractVersion: api.ConsensusLeaderVersion, Term: st.Term, Known: st.Leader != 0, Self: st.Role == api.RoleLeader}
	if st.Leader != 0 {
		info.LeaderID, info.LeaderName = st.Leader, api.NodeName(st.Leader)
		for _, m := range s.deps.Cluster.Members() {
			if m.ID == st.Leader {
				info.LeaderURL = m.APIURL
			}
		}
	}
	return c.JSON(http.StatusOK, info)
}

func (s *Server) consensusStatus(c echo.Context) error {
	return c.JSON(http.StatusOK, s.deps.Cluster.Status())
}

func (s *Server) peers(c echo.Context) error {
	st := s.deps.Cluster.Status()
	out := api.Peers{ContractVersion: api.PeersVersion, Self: st.NodeID, Peers: []api.PeerView{}}
	for _, m := range s.deps.Cluster.Members() {
		out.Peers = append(out.Peers, api.PeerView{Member: m, Self: m.ID == st.NodeID, IsLeader: m.ID == st.Leader,
			Transport: s.deps.Cluster.PeerTransport(m.ID)})
	}
	return c.JSON(http.StatusOK, out)
}

// clusterHealth asks every member for its consensus status at once and sets
// their (appliedIndex, stateHash) side by side; then it asks each for its
// hash at the lowest applied index among them and compares those.
func (s *Server) clusterHealth(c echo.Context) error {
	if !s.opsReader(c) {
		return c.JSON(http.StatusOK, s.publicClusterHealth(c.Request().Context()))
	}
	return c.JSON(http.StatusOK, s.clusterHealthOf(c.Request().Context()))
}

// publicClusterHealth is /health/cluster's answer to anyone: the quorum's
// figures, asked of the peers at most once per deepHealthReuse, so that
// anonymous requests cannot turn into a request to every peer each.
func (s *Server) publicClusterHealth(ctx context.Context) api.ClusterHealth {
	h := &s.publicCluster
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil || s.now().Sub(h.at) >= deepHealthReuse {
		full := s.clusterHealthOf(ctx)
		h.last, h.at = &api.ClusterHealth{ContractVersion: full.ContractVersion, Status: full.Status, Quorum: full.Quorum,
			Reachable: full.Reachable, StateHashAgreement: full.StateHashAgreement, Nodes: []api.NodeHealth{}}, s.now()
	}
	return *h.last
}

// publicClusterView is the last public answer of /health/cluster.
type publicClusterView struct {
	mu   sync.Mutex
	last *api.ClusterHealth
	at   time.Time
}

// clusterHealthOf asks every member for its status, then for its state
// hash at the lowest applied index among them.
func (s *Server) clusterHealthOf(ctx context.Context) api.ClusterHealth {
	members := s.deps.Cluster.Members()
	self := s.deps.Cluster.Status()
	nodes := make([]api.NodeHealth, len(members))
	each := func(fn func(i int, m api.Member)) {
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Go(func() { fn(i, m) })
		}
		wg.Wait()
	}
	each(func(i int, m api.Member) {
		n := api.NodeHealth{ID: m.ID, Name: api.NodeName(m.ID), APIURL: m.APIURL}
		start := time.Now()
		var st api.ConsensusStatus
		var err error
		if m.ID == self.NodeID {
			st = self
		} else {
			st, err = s.peerStatus(ctx, m.APIURL)
		}
		n.LatencyMs = time.Since(start).Milliseconds()
		if err != nil {
			n.Error = err.Error()
		} else {
			n.Reachable, n.Role, n.Term, n.AppliedIndex, n.CommitIndex, n.StateHash = true, st.Role, st.Term, st.AppliedIndex, st.CommitIndex, st.StateHash
		}
		nodes[i] = n
	})
	comparedAt := lowestApplied(nodes)
	if comparedAt > 0 {
		each(func(i int, m api.Member) {
			switch {
			case !nodes[i].Reachable:
			case m.ID == self.NodeID:
				nodes[i].ComparedHash, _ = s.deps.Cluster.StateHashAt(comparedAt)
			default:
				nodes[i].ComparedHash = s.peerStateHash(ctx, m.APIURL, comparedAt)
			}
		})
	}
	return summarize(nodes, self.Leader, comparedAt)
}

// lowestApplied is the lowest applied index among the reachable nodes, 0
// when none is.
func lowestApplied(nodes []api.NodeHealth) uint64 {
	var lowest uint64
	for _, n := range nodes {
		if n.Reachable && n.AppliedIndex > 0 && (lowest == 0 || n.AppliedIndex < lowest) {
			lowest = n.AppliedIndex
		}
	}
	return lowest
}

// summarize rolls member answers up; the hashes compared are the nodes'
// ComparedHash, their hashes at comparedAt.
func summarize(nodes []api.NodeHealth, leader, comparedAt uint64) api.ClusterHealth {
	h := api.ClusterHealth{ContractVersion: api.ClusterHealthVersion, Quorum: len(nodes)/2 + 1, Leader: leader,
		StateHashAgreement: true, ComparedAt: comparedAt, Nodes: nodes}
	var first string
	for _, n := range nodes {
		if n.Reachable {
			h.Reachable++
		}
		switch {
		case n.ComparedHash == "":
		case first == "":
			first = n.ComparedHash
		case n.ComparedHash != first:
			h.StateHashAgreement = false
		}
	}
	switch {
	case h.Reachable < h.Quorum || leader == 0 || !h.StateHashAgreement:
		h.Status = "unavailable"
	case h.Reachable < len(nodes):
		h.Status = "degraded"
	default:
		h.Status = "ok"
	}
	return h
}

// stateHash serves GET /v1/consensus/state-hash?index=N.
func (s *Server) stateHash(c echo.Context) error {
	index, err := strconv.ParseUint(c.QueryParam("index"), 10, 64)
	if err != nil || index == 0 {
		return apierror.New(apierror.InvalidField, "index must be a positive integer")
	}
	hash, ok := s.deps.Cluster.StateHashAt(index)
	if !ok {
		return apierror.New(apierror.NotFound, "this validator holds no state hash for index %d (not applied yet, or too old)", index)
	}
	return c.JSON(http.StatusOK, api.StateHashAt{ContractVersion: api.StateHashVersion, NodeID: s.deps.Cluster.Status().NodeID,
		Index: index, StateHash: hash})
}

// peerStateHash asks a peer for its state hash at index; "" when it cannot
// tell (unreachable, or the index is outside its history).
func (s *Server) peerStateHash(ctx context.Context, base string, index uint64) string {
	var out api.StateHashAt
	if err := s.peerGet(ctx, base+"/v1/consensus/state-hash?index="+strconv.FormatUint(index, 10), &out); err != nil {
		return ""
	}
	return out.StateHash
}

func (s *Server) peerStatus(ctx context.Context, base string) (api.ConsensusStatus, error) {
	var st api.ConsensusStatus
	return st, s.peerGet(ctx, base+"/v1/consensus/status", &st)
}

// peerGet reads a peer's JSON answer, waiting at most 2 s.
func (s *Server) peerGet(ctx context.Context, u string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	// Every peer route read here is on the ops-read lane.
	if token := s.cfg.Access.First(access.OpsRead); token != "" {
		req.Header.Set(echo.HeaderAuthorization, "Bearer "+token)
	}
	resp, err := s.peerHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
