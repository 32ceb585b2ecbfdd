package routes

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

// fromLeader reads route from the current leader: any validator names it,
// then the leader answers. When the leader is unknown, or is not among the
// edge's validators, the first validator to answer does; its view is then
// that of a follower, which the body says (role, isLeader).
func (s *server) fromLeader(ctx context.Context, route, contractVersion string, out any) ([]upstream.Source, error) {
	var sources []upstream.Source
	resp, srcs, err := s.up.Get(ctx, "/v1/consensus/leader")
	sources = append(sources, srcs...)
	var leader api.LeaderInfo
	if err == nil && resp.Status == http.StatusOK && json.Unmarshal(resp.Body, &leader) == nil &&
		leader.Known && slices.Contains(s.up.URLs(), leader.LeaderURL) {
		r, src := s.up.GetFrom(ctx, leader.LeaderURL, route)
		sources = append(sources, src)
		if src.OK {
			return sources, s.decodeSource(r, route, contractVersion, out)
		}
	}
	r, srcs, err := s.up.Get(ctx, route)
	sources = append(sources, srcs...)
	if err != nil {
		return sources, &opsError{http.StatusBadGateway, CodeSourceUnavailable, "no validator answered " + route, true}
	}
	return sources, s.decodeSource(r, route, contractVersion, out)
}

// decodeSource checks a source answer's status and contract version.
func (s *server) decodeSource(r upstream.Response, route, contractVersion string, out any) error {
	var marker struct {
		ContractVersion string `json:"contractVersion"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &marker) != nil || marker.ContractVersion != contractVersion {
		return &opsError{http.StatusBadGateway, CodeSourceInvalid, route + " did not answer a " + contractVersion + " body", false}
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		return &opsError{http.StatusBadGateway, CodeSourceInvalid, route + " answered a malformed body", false}
	}
	return nil
}

// raft is the raft metrics view, from the leader.
func (s *server) raft(c echo.Context) error {
	var m api.RaftMetrics
	sources, err := s.fromLeader(c.Request().Context(), "/v1/msgbus/raft-metrics", api.RaftMetricsVersion, &m)
	if err != nil {
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
		"sources":          sources,
	})
}

// replication is the leader's view of every member's log.
func (s *server) replication(c echo.Context) error {
	var r api.ReplicationLag
	sources, err := s.fromLeader(c.Request().Context(), "/v1/msgbus/replication-lag", api.ReplicationLagVersion, &r)
	if err != nil {
		return err
	}
	nodes := make([]map[string]any, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		nodes = append(nodes, map[string]any{
			"nodeId": n.Name, "matchIndex": n.MatchIndex, "nextIndex": n.NextIndex, "lagEntries": n.LagEntries,
			"lagMs": n.LagMs, "state": n.State, "recentActive": n.RecentActive, "learner": n.Learner,
		})
	}
	return s.envelope(c, map[string]any{
		"leader": api.NodeName(r.Leader), "fromLeader": r.IsLeader, "lastIndex": r.LastIndex,
		"maxLagEntries": r.MaxLagEntries, "nodes": nodes, "sources": sources,
	})
}
