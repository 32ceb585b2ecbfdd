package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// Messaging-layer detail routes (/v1/msgbus/*): local diagnostics of the
// raft layer as this validator sees it.

func (s *Server) leadershipHistory(c echo.Context) error {
	history, changes := s.deps.Cluster.LeadershipHistory()
	if history == nil {
		history = []api.LeadershipChange{}
	}
	return c.JSON(http.StatusOK, api.LeadershipHistory{ContractVersion: api.LeadershipHistoryVersion,
		NodeID: s.deps.Cluster.Status().NodeID, Changes: changes, History: history})
}

func (s *Server) validatorIdentities(c echo.Context) error {
	st := s.deps.Cluster.Status()
	out := api.ValidatorIdentities{ContractVersion: api.ValidatorIdentitiesVersion, Validators: []api.PeerView{}}
	for _, m := range s.deps.Cluster.Members() {
		out.Validators = append(out.Validators, api.PeerView{Member: m, Self: m.ID == st.NodeID, IsLeader: m.ID == st.Leader})
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) nodeStatus(c echo.Context) error {
	st := s.deps.Cluster.Status()
	st.ContractVersion = api.NodeStatusVersion
	_, changes := s.deps.Cluster.LeadershipHistory()
	started := s.deps.Cluster.StartedAt()
	return c.JSON(http.StatusOK, api.NodeStatus{ConsensusStatus: st, StartedAt: started,
		UptimeSeconds: int64(time.Since(started) / time.Second), LeadershipChanges: changes})
}

func (s *Server) clusterState(c echo.Context) error {
	st := s.deps.Cluster.Status()
	voters, learners := s.deps.Cluster.Membership()
	return c.JSON(http.StatusOK, api.ClusterState{ContractVersion: api.ClusterStateVersion, Leader: st.Leader, Term: st.Term,
		Voters: voters, Learners: learners, Quorum: len(voters)/2 + 1, Members: s.deps.Cluster.Members()})
}

func (s *Server) raftMetrics(c echo.Context) error {
	return c.JSON(http.StatusOK, s.deps.Cluster.RaftMetrics())
}

func (s *Server) replicationLag(c echo.Context) error {
	lag, err := s.withHeads(s.deps.Cluster.Replication())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, lag)
}
