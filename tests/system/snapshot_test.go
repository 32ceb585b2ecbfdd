package system

import (
	"fmt"
	"testing"
)

// TestLaggingValidatorCatchesUpBySnapshot stops a follower, lets the others
// commit far past the log compaction point, and restarts it: raft can only
// bring it up to date with a snapshot, and it must end with the same state
// hash as the others.
func TestLaggingValidatorCatchesUpBySnapshot(t *testing.T) {
	c := newCluster(t, 3, "MOCK", "SVC_VALIDATOR_SNAPSHOT_ENTRIES=20", "SVC_VALIDATOR_COMPACTION_MARGIN=5")
	leader := c.waitLeader()
	var lagging *node
	for _, n := range c.nodes {
		if n != leader {
			lagging = n
			break
		}
	}
	c.kill(lagging)
	var running []*node
	for _, n := range c.nodes {
		if n != lagging {
			running = append(running, n)
		}
	}
	for i := range 60 {
		c.write(leader, fmt.Sprintf(`{"n":%d}`, i))
	}
	before, _ := c.converged(running...)

	c.start(lagging)
	index, hash := c.converged(c.nodes...)
	if index < before {
		t.Fatalf("converged at %d, before the restart the others were at %d", index, before)
	}
	var peers struct {
		Peers []struct {
			ID        uint64 `json:"id"`
			Transport *struct {
				SnapshotsSent uint64 `json:"snapshotsSent"`
			} `json:"transport"`
		} `json:"peers"`
	}
	if err := get(leader.url()+"/v1/peers", &peers); err != nil {
		t.Fatal(err)
	}
	for _, p := range peers.Peers {
		if p.ID == lagging.id && (p.Transport == nil || p.Transport.SnapshotsSent == 0) {
			t.Fatalf("the leader sent validator %d no snapshot: %+v", p.ID, p.Transport)
		}
	}
	t.Logf("validator %d caught up by snapshot to index %d, state hash %s", lagging.id, index, hash)
}
