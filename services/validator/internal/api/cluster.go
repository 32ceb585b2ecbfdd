package api

import (
	"context"
	"encoding/json"
	"fmt"
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
	// AddMember adds a voting member through raft and waits until raft
	// has installed it.
	AddMember(ctx context.Context, m api.Member) error
	// RemoveMember removes a member through raft and waits until raft has
	// installed the change.
	RemoveMember(ctx context.Context, id uint64) error
}

// forwardedHeader marks a request a follower forwarded to the leader; a
// request carrying it is never forwarded again, so a stale leader view
// cannot bounce a request between nodes.
const forwardedHeader = "X-Ledger-Forwarded-By"

// leader returns the leader member, and whether it is known and not this
// node.
func (s *Server) leader() (api.Member, api.ConsensusStatus, bool) {
	st := s.cluster.Status()
	if st.Leader == 0 || st.Leader == st.NodeID {
		return api.Member{}, st, false
	}
	for _, m := range s.cluster.Members() {
		if m.ID == st.Leader {
			return m, st, true
		}
	}
	return api.Member{}, st, false
}

// forward proxies the request to the leader. handled is false when this
// node should answer itself: it is the leader.
func (s *Server) forward(c echo.Context) (handled bool, err error) {
	st := s.cluster.Status()
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
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.Out.Header.Set(forwardedHeader, strconv.FormatUint(st.NodeID, 10))
			if s.cfg.AuthToken != "" {
				r.Out.Header.Set(echo.HeaderAuthorization, "Bearer "+s.cfg.AuthToken)
			}
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
	st := s.cluster.Status()
	info := api.LeaderInfo{ContractVersion: api.ConsensusLeaderVersion, Term: st.Term, Known: st.Leader != 0, Self: st.Role == api.RoleLeader}
	if st.Leader != 0 {
		info.LeaderID, info.LeaderName = st.Leader, api.NodeName(st.Leader)
		for _, m := range s.cluster.Members() {
			if m.ID == st.Leader {
				info.LeaderURL = m.APIURL
			}
		}
	}
	return c.JSON(http.StatusOK, info)
}

func (s *Server) consensusStatus(c echo.Context) error {
	return c.JSON(http.StatusOK, s.cluster.Status())
}

func (s *Server) peers(c echo.Context) error {
	st := s.cluster.Status()
	out := api.Peers{ContractVersion: api.PeersVersion, Self: st.NodeID, Peers: []api.PeerView{}}
	for _, m := range s.cluster.Members() {
		out.Peers = append(out.Peers, api.PeerView{Member: m, Self: m.ID == st.NodeID, IsLeader: m.ID == st.Leader,
			Transport: s.cluster.PeerTransport(m.ID)})
	}
	return c.JSON(http.StatusOK, out)
}

// clusterHealth asks every member for its consensus status at once and sets
// their (appliedIndex, stateHash) side by side.
func (s *Server) clusterHealth(c echo.Context) error {
	members := s.cluster.Members()
	self := s.cluster.Status()
	nodes := make([]api.NodeHealth, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			n := api.NodeHealth{ID: m.ID, Name: api.NodeName(m.ID), APIURL: m.APIURL}
			start := time.Now()
			var st api.ConsensusStatus
			var err error
			if m.ID == self.NodeID {
				st = self
			} else {
				st, err = s.peerStatus(c.Request().Context(), m.APIURL)
			}
			n.LatencyMs = time.Since(start).Milliseconds()
			if err != nil {
				n.Error = err.Error()
			} else {
				n.Reachable, n.Role, n.Term, n.AppliedIndex, n.CommitIndex, n.StateHash = true, st.Role, st.Term, st.AppliedIndex, st.CommitIndex, st.StateHash
			}
			nodes[i] = n
		})
	}
	wg.Wait()
	return c.JSON(http.StatusOK, summarize(nodes, self.Leader))
}

// summarize rolls member answers up. Hashes are compared at the highest
// applied index that two or more reachable members share.
func summarize(nodes []api.NodeHealth, leader uint64) api.ClusterHealth {
	h := api.ClusterHealth{ContractVersion: api.ClusterHealthVersion, Quorum: len(nodes)/2 + 1, Leader: leader, StateHashAgreement: true, Nodes: nodes}
	byIndex := map[uint64]map[string]bool{}
	for _, n := range nodes {
		if !n.Reachable {
			continue
		}
		h.Reachable++
		if byIndex[n.AppliedIndex] == nil {
			byIndex[n.AppliedIndex] = map[string]bool{}
		}
		byIndex[n.AppliedIndex][n.StateHash] = true
	}
	for index, hashes := range byIndex {
		if len(hashes) > 1 {
			h.StateHashAgreement = false
		}
		count := 0
		for _, n := range nodes {
			if n.Reachable && n.AppliedIndex == index {
				count++
			}
		}
		if count > 1 && index > h.ComparedAt {
			h.ComparedAt = index
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

func (s *Server) peerStatus(ctx context.Context, base string) (api.ConsensusStatus, error) {
	var st api.ConsensusStatus
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/consensus/status", nil)
	if err != nil {
		return st, err
	}
	if s.cfg.AuthToken != "" {
		req.Header.Set(echo.HeaderAuthorization, "Bearer "+s.cfg.AuthToken)
	}
	resp, err := s.peerHTTP.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}
