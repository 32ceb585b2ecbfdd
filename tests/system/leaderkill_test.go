package system

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// TestLeaderKillKeepsEveryAcceptedProposal kills the leader with SIGKILL
// while clients submit without waiting: every proposal that was answered
// 202 must end COMMITTED exactly once (its node at revision 1), on every
// surviving validator, and the survivors must agree on the state hash.
func TestLeaderKillKeepsEveryAcceptedProposal(t *testing.T) {
	c := newCluster(t, 3, "MOCK")
	leader := c.waitLeader()
	var followers []*node
	for _, n := range c.nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	cfg, err := c.client(leader).BlockchainConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	accepted := map[common.Hash]string{} // proposal id -> path, answered 202
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			key, _ := crypto.GenerateKey()
			for i := 0; ctx.Err() == nil; i++ {
				n := c.nodes[(w+i)%len(c.nodes)] // through leader and followers alike
				p := &ledgerclient.Proposal{Message: []byte(`{"title":"kept"}`), ContentType: "page"}
				form, path, err := ledgerclient.Form(cfg, key, p, common.Hash{})
				if err != nil {
					t.Error(err)
					return
				}
				sub, err := c.client(n).Submit(ctx, proposal.Write, form)
				if err == nil && sub.HTTPStatus == http.StatusAccepted {
					mu.Lock()
					accepted[p.ID] = path
					mu.Unlock()
				}
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(accepted) }
	harness.Eventually(t, 30*time.Second, func() bool { return count() >= 150 })
	// Under load the validators are rarely at the same index; their hashes
	// are still compared, at the lowest applied index among them.
	var health api.ClusterHealth
	if err := get(followers[0].url()+"/health/cluster", &health); err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, n := range health.Nodes {
		if n.ComparedHash != "" {
			compared++
		}
	}
	if !health.StateHashAgreement || health.ComparedAt == 0 || compared < 2 {
		t.Fatalf("cluster health under load: %+v", health)
	}
	c.kill(leader)
	atKill := count()
	c.waitLeaderAmong(followers)
	harness.Eventually(t, 30*time.Second, func() bool { return count() >= atKill+100 })
	stop()
	wg.Wait()

	client := c.client(followers[0])
	for id, path := range accepted {
		var s api.ProposalStatus
		harness.Eventually(t, 60*time.Second, func() bool {
			s, err = client.Status(context.Background(), id, 2*time.Second)
			return err == nil && api.Terminal(s.Status)
		})
		if !api.Committed(s.Status) {
			t.Fatalf("proposal %s was answered 202 and ended %s (%s)", id.Hex(), s.Status, s.Reason)
		}
		for _, n := range followers {
			var node api.Node
			if err := get(n.url()+"/api/explore?path="+url.QueryEscape(path), &node); err != nil || node.Revision != 1 || node.ProposalID != id.Hex() {
				t.Fatalf("validator %d, node of %s: %+v %v", n.id, id.Hex(), node, err)
			}
		}
	}
	index, hash := c.converged(followers...)
	t.Logf("%d proposals answered 202 (%d before the kill); all COMMITTED once; survivors agree at %d (%s)", len(accepted), atKill, index, hash)
}
