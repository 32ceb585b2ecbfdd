package app

import (
	"net/http"
	"testing"

	"github.com/contentledger/contentledger/pkg/api"
)

// TestGovernedSnapshots: the health, cluster, replication and queue
// snapshots carry their markers and the answers of the routes they govern;
// the health snapshot alone takes no token.
func TestGovernedSnapshots(t *testing.T) {
	const token = "s3cret"
	base := startMockWith(t, func(c *Config) { c.AuthToken = token })
	get := func(path string, withToken bool, out any) int {
		t.Helper()
		if out == nil {
			out = &map[string]any{}
		}
		if withToken {
			return getJSONWith(t, base+path, token, out)
		}
		return getJSON(t, base+path, out)
	}

	var h api.HealthSnapshot
	if code := get("/v1/ops/snapshots/health", false, &h); code != http.StatusOK || h.ContractVersion != api.HealthSnapshotVersion ||
		h.NodeID != 0 || h.At.IsZero() || h.Status != "ok" || h.Health["role"] != nil || h.Health["checks"] == nil {
		t.Fatalf("health snapshot without a token (statuses only): %d %+v", code, h)
	}
	h = api.HealthSnapshot{}
	if code := get("/v1/ops/snapshots/health", true, &h); code != http.StatusOK || h.ContractVersion != api.HealthSnapshotVersion ||
		h.NodeID != 1 || h.At.IsZero() || h.Status != "ok" || h.Health["role"] != "LEADER" || h.Health["checks"] == nil {
		t.Fatalf("health snapshot: %d %+v", code, h)
	}
	for _, path := range []string{"/v1/ops/snapshots/cluster", "/v1/ops/snapshots/replication", "/v1/ops/snapshots/queue"} {
		if code := get(path, false, nil); code != http.StatusUnauthorized {
			t.Fatalf("%s without the token: %d", path, code)
		}
	}
	var c api.ClusterSnapshot
	if code := get("/v1/ops/snapshots/cluster", true, &c); code != http.StatusOK || c.ContractVersion != api.ClusterSnapshotVersion ||
		c.NodeID != 1 || len(c.Cluster.Nodes) != 1 || !c.Cluster.Nodes[0].Reachable {
		t.Fatalf("cluster snapshot: %d %+v", code, c)
	}
	var r api.ReplicationSnapshot
	if code := get("/v1/ops/snapshots/replication", true, &r); code != http.StatusOK || r.ContractVersion != api.ReplicationSnapshotVersion ||
		r.Replication.ContractVersion != api.ReplicationLagVersion {
		t.Fatalf("replication snapshot: %d %+v", code, r)
	}
	var q api.QueueSnapshot
	if code := get("/v1/ops/snapshots/queue", true, &q); code != http.StatusOK || q.ContractVersion != api.QueueSnapshotVersion ||
		q.NodeID != 1 || q.Queue.ContractVersion != api.QueueStatsVersion {
		t.Fatalf("queue snapshot: %d %+v", code, q)
	}
}
