package system

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/devchain"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// write submits one signed write through node n and waits for it to commit.
// Outside MOCK it pays for it first, as dev account 1 (the payment names the
// wallet that signs the proposal).
func (c *cluster) write(n *node, message string) (common.Hash, string) {
	c.t.Helper()
	client := c.client(n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := client.BlockchainConfig(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	key, _ := crypto.GenerateKey()
	p := &ledgerclient.Proposal{ID: ledgerclient.NewProposalID(), Message: []byte(message), ContentType: "page"}
	var tx common.Hash
	if c.net != nil {
		key = devchain.DevAccounts[1].MustKey()
		receipt, err := ledgerclient.Pay(ctx, c.net.Chain.Client(), key, c.net.Chain.ChainID, c.net.Chain.PaymentLedger, p.ID, p.Class)
		if err != nil {
			c.t.Fatal(err)
		}
		tx = receipt.TxHash
	}
	form, path, err := ledgerclient.Form(cfg, key, p, tx)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := client.Submit(ctx, proposal.Write, form); err != nil {
		c.t.Fatalf("submit through validator %d: %v", n.id, err)
	}
	s, err := client.WaitFinal(ctx, p.ID, nil)
	if err != nil || !api.Committed(s.Status) {
		c.t.Fatalf("proposal through validator %d: %s %v", n.id, s.Status, err)
	}
	return p.ID, path
}

// converged waits until every running node reports the same applied index
// and state hash, and returns them.
func (c *cluster) converged(running ...*node) (uint64, string) {
	c.t.Helper()
	var index uint64
	var hash string
	seen := make([]string, len(running)) // the last answers, for the failure message
	deadline := time.Now().Add(30 * time.Second)
	for {
		index, hash = 0, ""
		agree := true
		for i, n := range running {
			var st api.ConsensusStatus
			if err := get(n.url()+"/v1/consensus/status", &st); err != nil {
				seen[i], agree = fmt.Sprintf("validator %d: %v", n.id, err), false
				continue
			}
			seen[i] = fmt.Sprintf("validator %d: %s at applied %d (commit %d, leader %d)", n.id, st.StateHash, st.AppliedIndex, st.CommitIndex, st.Leader)
			if i == 0 {
				index, hash = st.AppliedIndex, st.StateHash
			} else if st.AppliedIndex != index || st.StateHash != hash {
				agree = false
			}
		}
		if agree {
			return index, hash
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("validators did not converge within 30s:\n%s", strings.Join(seen, "\n"))
		}
		time.Sleep(20 * time.Millisecond) // polling the validators
	}
}

func TestThreeValidatorsFailover(t *testing.T) {
	c := newCluster(t, 3, "MOCK")
	leader := c.waitLeaderKnown(c.nodes) // the follower written through must know it
	var follower *node
	for _, n := range c.nodes {
		if n != leader {
			follower = n
			break
		}
	}
	id, path := c.write(follower, `{"title":"through a follower"}`)
	c.converged(c.nodes...)
	// Every validator's metrics show both peer streams up, and the
	// replicated counters agree.
	var committed string
	for i, n := range c.nodes {
		m := metricLines(t, n)
		for _, p := range c.nodes {
			if p == n {
				continue
			}
			if got := m[fmt.Sprintf(`validator_peer_connected{direction="out",peer="%d"}`, p.id)]; got != "1" {
				t.Fatalf("validator %d: stream to validator %d: %q", n.id, p.id, got)
			}
		}
		if i == 0 {
			committed = m["validator_proposals_committed_total"]
		}
		if got := m["validator_proposals_committed_total"]; got != committed || got == "" || got == "0" {
			t.Fatalf("validator %d counts %q committed proposals, validator %d %q", n.id, got, c.nodes[0].id, committed)
		}
	}
	for _, n := range c.nodes {
		var node api.Node
		if err := get(n.url()+"/api/explore?path="+path, &node); err != nil || node.ProposalID != id.Hex() {
			t.Fatalf("validator %d does not hold %s: %v", n.id, path, err)
		}
	}
	var peers api.Peers
	if err := get(leader.url()+"/v1/peers", &peers); err != nil || len(peers.Peers) != 3 {
		t.Fatalf("peers %+v %v", peers, err)
	}
	for _, p := range peers.Peers {
		if !p.Self && (p.Transport == nil || !p.Transport.Connected || p.Transport.MsgsSent == 0) {
			t.Fatalf("leader's transport to validator %d: %+v", p.ID, p.Transport)
		}
	}
	var lag api.ReplicationLag
	harness.Eventually(t, 10*time.Second, func() bool {
		if err := get(leader.url()+"/v1/msgbus/replication-lag", &lag); err != nil || !lag.IsLeader || len(lag.Nodes) != 3 {
			return false
		}
		for _, n := range lag.Nodes {
			if n.State != "replicate" || n.LagEntries != 0 {
				return false
			}
		}
		return true
	})
	var health api.ClusterHealth
	if err := get(follower.url()+"/health/cluster", &health); err != nil || health.Status != "ok" || !health.StateHashAgreement || health.Reachable != 3 {
		t.Fatalf("cluster health %+v %v", health, err)
	}

	c.kill(leader)
	var survivors []*node
	for _, n := range c.nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	next := c.waitLeaderAmong(survivors)
	if next == leader {
		t.Fatal("the killed leader is still leader")
	}
	c.write(survivors[0], `{"title":"after failover"}`)
	c.converged(survivors...)

	c.start(leader)
	index, hash := c.converged(c.nodes...)
	t.Logf("all three at index %d with state hash %s", index, hash)
}

// waitLeaderAmong waits for one of nodes to report itself leader.
func (c *cluster) waitLeaderAmong(nodes []*node) *node {
	c.t.Helper()
	var leader *node
	harness.Eventually(c.t, 30*time.Second, func() bool {
		for _, n := range nodes {
			var st api.ConsensusStatus
			if get(n.url()+"/v1/consensus/status", &st) == nil && st.Role == api.RoleLeader {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}
