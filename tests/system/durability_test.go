package system

import (
	"context"
	"crypto/ecdsa"
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

// TestKill9LosesNothingCommitted writes under load, kills the validator with
// SIGKILL in the middle, restarts it on the same data directory, and checks
// that every proposal that had been reported COMMITTED is still there, with
// its node.
func TestKill9LosesNothingCommitted(t *testing.T) {
	c := newCluster(t, 1, "MOCK")
	n := c.waitLeader()
	client := c.client(n)
	cfg, err := client.BlockchainConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	committed := map[common.Hash]string{} // id -> path
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { writeUntilStopped(ctx, t, client, cfg, key, &mu, committed) })
	}
	harness.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(committed) >= 200
	})
	c.kill(n) // in the middle of the load
	stop()
	wg.Wait()
	mu.Lock()
	acknowledged := len(committed)
	mu.Unlock()
	t.Logf("%d proposals were acknowledged COMMITTED before SIGKILL", acknowledged)

	c.start(n)
	c.waitLeader()
	for id, path := range committed {
		s, err := client.Status(context.Background(), id, 0)
		if err != nil || !api.Committed(s.Status) {
			t.Fatalf("proposal %s acknowledged COMMITTED is %q after restart: %v", id.Hex(), s.Status, err)
		}
		var node api.Node
		if err := get(n.url()+"/api/explore?path="+path, &node); err != nil || node.ProposalID != id.Hex() {
			t.Fatalf("node %s of a committed proposal after restart: %v", path, err)
		}
	}
}

// writeUntilStopped submits writes one after another and records those that
// reached COMMITTED. Errors are expected once the validator is killed.
func writeUntilStopped(ctx context.Context, t *testing.T, client *ledgerclient.Client, cfg api.BlockchainConfig, key *ecdsa.PrivateKey, mu *sync.Mutex, committed map[common.Hash]string) {
	for ctx.Err() == nil {
		p := &ledgerclient.Proposal{Message: []byte(`{"title":"durable"}`), ContentType: "page"}
		form, path, err := ledgerclient.Form(cfg, key, p, common.Hash{})
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := client.Submit(ctx, proposal.Write, form); err != nil {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s, err := client.WaitFinal(wctx, p.ID, nil)
		cancel()
		if err == nil && s.Status == api.StatusCommitted {
			mu.Lock()
			committed[p.ID] = path
			mu.Unlock()
		}
	}
}
