package system

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
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
	if sent := snapshotsSentTo(t, []*node{leader}, lagging.id); sent == 0 {
		t.Fatalf("the leader sent validator %d no snapshot", lagging.id)
	}
	// The segments came with the snapshot: its archives are the others'.
	c.sameArchives(c.nodes...)
	t.Logf("validator %d caught up by snapshot to index %d, state hash %s", lagging.id, index, hash)
}

// TestWipedValidatorIsReplaced follows the runbook's replacement of a
// validator whose disk was lost (docs/runbooks/membership.md): its process
// dies and its data directory is wiped; the old id is removed; the others
// commit past the log compaction point; the machine comes back under a new
// id, on the same addresses and the same (empty) directory, with
// SVC_VALIDATOR_JOIN. It can only catch up through a snapshot, and must end
// with the others' state hash.
func TestWipedValidatorIsReplaced(t *testing.T) {
	c := newCluster(t, 3, "MOCK", "SVC_VALIDATOR_SNAPSHOT_ENTRIES=20", "SVC_VALIDATOR_COMPACTION_MARGIN=5")
	leader := c.waitLeader()
	for i := range 10 {
		c.write(leader, fmt.Sprintf(`{"before":%d}`, i))
	}
	lost := c.nodes[slices.IndexFunc(c.nodes, func(n *node) bool { return n != leader })]
	c.kill(lost)
	if err := os.RemoveAll(lost.dataDir); err != nil {
		t.Fatal(err)
	}
	running := slices.DeleteFunc(slices.Clone(c.nodes), func(n *node) bool { return n == lost })

	// 1. Remove the old id (through any healthy validator).
	if code, out := send(t, http.MethodDelete, running[0].url()+"/v1/cluster/members/"+strconv.FormatUint(lost.id, 10), nil); code != http.StatusOK {
		t.Fatalf("removing validator %d: %d %s", lost.id, code, out)
	}
	leader = c.waitLeaderAmong(running)
	for i := range 60 {
		c.write(leader, fmt.Sprintf(`{"meanwhile":%d}`, i))
	}

	// 2. and 3. The machine comes back under a new id.
	const newID = 4
	replacement := c.replaceWiped(lost, running, newID)
	members := append(running, replacement)
	index, hash := c.converged(members...)
	if sent := snapshotsSentTo(t, running, newID); sent == 0 {
		t.Fatalf("no validator sent the replacement a snapshot")
	}
	c.sameArchives(members...)
	t.Logf("validator %d replaced %d and caught up by snapshot to index %d, state hash %s", newID, lost.id, index, hash)
}

// replaceWiped brings the machine of lost, whose data directory was wiped and
// whose id was removed, back under id newID as the runbook says
// (docs/runbooks/membership.md): the member is added through a running
// validator, the process started on the same addresses and the empty
// directory with SVC_VALIDATOR_JOIN. It returns once the leader has made it a
// voter (ADR 0027: after it caught up); a snapshot it needed has arrived by
// then.
func (c *cluster) replaceWiped(lost *node, running []*node, newID uint64) *node {
	t := c.t
	t.Helper()
	body, _ := json.Marshal(api.Member{ID: newID, PeerAddr: lost.peerAddr, APIURL: lost.url()})
	if code, out := send(t, http.MethodPost, running[len(running)-1].url()+"/v1/cluster/members", body); code != http.StatusOK {
		t.Fatalf("adding validator %d: %d %s", newID, code, out)
	}
	var dial []string
	for _, m := range running {
		dial = append(dial, fmt.Sprintf("%d=%s=%s", m.id, m.peerAddr, m.url()))
	}
	dial = append(dial, fmt.Sprintf("%d=%s=%s", newID, lost.peerAddr, lost.url()))
	replacement := &node{id: newID, httpAddr: lost.httpAddr, peerAddr: lost.peerAddr, dataDir: lost.dataDir,
		logPath: strings.TrimSuffix(lost.logPath, ".log") + "-replacement.log"}
	replacement.env = append(append(append([]string(nil), lost.env...), c.peerTLSEnv(newID)...), // later values win
		"SVC_VALIDATOR_NODE_ID="+strconv.FormatUint(newID, 10),
		"SVC_VALIDATOR_INITIAL_CLUSTER="+strings.Join(dial, ","),
		"SVC_VALIDATOR_JOIN=true",
	)
	c.nodes = append(c.nodes, replacement)
	c.start(replacement)

	var want []uint64
	for _, m := range running {
		want = append(want, m.id)
	}
	want = append(want, newID)
	slices.Sort(want)
	var cs api.ClusterState
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := get(replacement.url()+"/v1/msgbus/cluster-state", &cs); err == nil && slices.Equal(cs.Voters, want) {
			return replacement
		}
		if time.Now().After(deadline) {
			t.Fatalf("voters after the replacement: %v, want %v", cs.Voters, want)
		}
		time.Sleep(50 * time.Millisecond) // polling the membership
	}
}

// snapshotsSentTo sums the snapshots the nodes' transports sent to id.
func snapshotsSentTo(t *testing.T, nodes []*node, id uint64) uint64 {
	t.Helper()
	var total uint64
	for _, n := range nodes {
		var peers struct {
			Peers []struct {
				ID        uint64 `json:"id"`
				Transport *struct {
					SnapshotsSent uint64 `json:"snapshotsSent"`
				} `json:"transport"`
			} `json:"peers"`
		}
		if err := get(n.url()+"/v1/peers", &peers); err != nil {
			t.Fatal(err)
		}
		for _, p := range peers.Peers {
			if p.ID == id && p.Transport != nil {
				total += p.Transport.SnapshotsSent
			}
		}
	}
	return total
}
