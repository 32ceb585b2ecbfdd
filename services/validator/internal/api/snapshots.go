package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
)

// The governed snapshots the contract lists besides storage and runtime
// (storage.go, runtime.go). Each embeds the answer of the route that already
// serves its concern, so that the two cannot disagree, under a marker of
// its own: /health (health), /health/cluster (cluster),
// /v1/msgbus/replication-lag (replication) and the leader's
// /v1/proposals/queue/stats (queue). The health snapshot, like /health,
// takes no token (its permission is Public).

func (s *Server) snapshotHeader(version string) api.SnapshotHeader {
	return api.SnapshotHeader{ContractVersion: version, NodeID: s.deps.Cluster.Status().NodeID, At: s.now().UTC()}
}

func (s *Server) healthSnapshot(c echo.Context) error {
	body := s.health()
	out := api.HealthSnapshot{SnapshotHeader: s.snapshotHeader(api.HealthSnapshotVersion), Status: "ok", Health: body}
	code := http.StatusOK
	if body["status"] != "ok" {
		out.Status, code = "unavailable", http.StatusServiceUnavailable
	}
	if !s.opsReader(c) {
		out.NodeID, out.Health = 0, publicHealth(body)
	}
	return c.JSON(code, out)
}

func (s *Server) clusterSnapshot(c echo.Context) error {
	return c.JSON(http.StatusOK, api.ClusterSnapshot{SnapshotHeader: s.snapshotHeader(api.ClusterSnapshotVersion),
		Cluster: s.clusterHealthOf(c.Request().Context())})
}

func (s *Server) replicationSnapshot(c echo.Context) error {
	lag, err := s.withHeads(s.deps.Cluster.Replication())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.ReplicationSnapshot{SnapshotHeader: s.snapshotHeader(api.ReplicationSnapshotVersion),
		Replication: lag})
}

func (s *Server) queueSnapshot(c echo.Context) error {
	return s.fromLeader(c, func() any {
		return api.QueueSnapshot{SnapshotHeader: s.snapshotHeader(api.QueueSnapshotVersion), Queue: s.deps.Proposals.QueueStats()}
	})
}
