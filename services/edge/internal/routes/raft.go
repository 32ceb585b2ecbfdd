package routes

import (
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// raft is the raft metrics view, from the leader.
func (s *server) raft(c echo.Context) error {
	r := s.reader(c)
	var m api.RaftMetrics
	if _, err := r.readLeader(at(srcRaftMetrics), &m); err != nil {
		return err
	}
	return s.envelope(c, map[string]any{
		"nodeId": api.NodeName(m.NodeID), "role": m.Role, "leader": api.NodeName(m.Leader),
		"term": m.Term, "commitIndex": m.CommitIndex, "appliedIndex": m.AppliedIndex,
		"firstLogIndex": m.FirstLogIndex, "lastLogIndex": m.LastLogIndex, "lastSnapshotIndex": m.LastSnapshotIndex,
		"appendRatePerSec": m.AppendRatePerSec,
		"elections":        map[string]any{"count24h": m.Elections.Count24h, "lastAt": m.Elections.LastAt, "count": m.Elections.Count},
		"proposalsDropped": m.ProposalsDropped,
		"transport":        m.Transport,
		"sources":          r.attempts(),
	})
}

// replication is the leader's view of every member's log.
func (s *server) replication(c echo.Context) error {
	r := s.reader(c)
	var lag api.ReplicationLag
	if _, err := r.readLeader(at(srcReplication), &lag); err != nil {
		return err
	}
	nodes := make([]map[string]any, 0, len(lag.Nodes))
	for _, n := range lag.Nodes {
		node := map[string]any{
			"nodeId": n.Name, "matchIndex": n.MatchIndex, "nextIndex": n.NextIndex, "lagEntries": n.LagEntries,
			"lagMs": n.LagMs, "state": n.State, "recentActive": n.RecentActive, "learner": n.Learner,
		}
		if n.Head != nil {
			// The member's newest head report and whether it agrees
			// with the leader's segment chain (docs/adr/0038).
			node["head"] = n.Head
		}
		nodes = append(nodes, node)
	}
	return s.envelope(c, map[string]any{
		"leader": api.NodeName(lag.Leader), "fromLeader": lag.IsLeader, "lastIndex": lag.LastIndex,
		"maxLagEntries": lag.MaxLagEntries, "nodes": nodes, "sources": r.attempts(),
	})
}
