package system

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tests/harness"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// stop sends SIGTERM, as systemd or Kubernetes stops a validator, and
// waits for the process to exit.
func (c *cluster) stop(n *node) {
	c.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		c.t.Fatalf("validator %d did not stop within 30s of SIGTERM", n.id)
	}
}

// rollingLoad writes through every validator, as clients behind a load
// balancer do: a submission that fails (its validator is restarting) is
// sent again, the same proposal, through the next validator, until it is
// acknowledged (committed). Only acknowledged writes are counted and
// checked.
type rollingLoad struct {
	c    *cluster
	cfg  api.BlockchainConfig
	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	acked int
	want  map[string]string // full path: the value last acknowledged
}

func startRollingLoad(t *testing.T, c *cluster, workers int) *rollingLoad {
	t.Helper()
	cfg, err := c.client(c.nodes[0]).BlockchainConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l := &rollingLoad{c: c, cfg: cfg, stop: make(chan struct{}), want: map[string]string{}}
	for w := range workers {
		key, _ := crypto.GenerateKey()
		l.wg.Go(func() { l.run(w, key) })
	}
	return l
}

func (l *rollingLoad) run(worker int, key *ecdsa.PrivateKey) {
	via := worker
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		value := randomValue(256)
		// Every fourth write rewrites a path written before.
		sub := fmt.Sprintf("roll/w%d/p%d", worker, i)
		if i%4 == 3 {
			sub = fmt.Sprintf("roll/w%d/p%d", worker, i-3)
		}
		p := &ledgerclient.Proposal{Message: []byte(`{"v":"` + value + `"}`), ContentType: "page", Path: sub, ID: ledgerclient.NewProposalID()}
		form, path, err := ledgerclient.Form(l.cfg, key, p, common.Hash{})
		if err != nil {
			panic(err)
		}
		for !l.commit(l.c.client(l.c.nodes[via%len(l.c.nodes)]), p.ID, form) {
			via++
			select {
			case <-l.stop:
				return
			case <-time.After(50 * time.Millisecond): // a validator restarting: try the next
			}
		}
		l.mu.Lock()
		l.acked++
		l.want[path] = value
		l.mu.Unlock()
	}
}

// commit submits a write and reports whether it was acknowledged.
func (l *rollingLoad) commit(client *ledgerclient.Client, id common.Hash, form map[string][]string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := client.Submit(ctx, proposal.Write, form); err != nil {
		return false
	}
	s, err := client.WaitFinal(ctx, id, nil)
	return err == nil && api.Committed(s.Status)
}

func (l *rollingLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked
}

// waitAcked waits until n more writes than now are acknowledged.
func (l *rollingLoad) waitAcked(t *testing.T, n int) {
	t.Helper()
	target := l.ackedCount() + n
	harness.Eventually(t, 60*time.Second, func() bool { return l.ackedCount() >= target })
}

// TestRollingRestartUnderLoad restarts the validators one at a time, as a
// rolling upgrade does (SIGTERM, start the binary again on the same data
// directory, wait until it has caught up), under write load through every
// validator: writes are acknowledged through each restart, none that was
// acknowledged is lost, and the validators end with equal state hashes.
func TestRollingRestartUnderLoad(t *testing.T) {
	c := newCluster(t, 3, "MOCK")
	c.waitLeaderKnown(c.nodes)
	load := startRollingLoad(t, c, 4)
	load.waitAcked(t, 30)
	for _, n := range c.nodes {
		before := load.ackedCount()
		c.stop(n)
		load.waitAcked(t, 10) // the others carry the writes while it is down
		c.start(n)
		var leader api.ConsensusStatus
		harness.Eventually(t, 60*time.Second, func() bool {
			var st api.ConsensusStatus
			for _, other := range c.nodes {
				if other != n && get(other.url()+"/v1/consensus/status", &leader) == nil && leader.Leader != 0 {
					break
				}
			}
			return get(n.url()+"/v1/consensus/status", &st) == nil && st.AppliedIndex >= leader.CommitIndex && leader.CommitIndex > 0
		})
		load.waitAcked(t, 10) // and writes go on with it back
		t.Logf("validator %d restarted: %d writes acknowledged meanwhile", n.id, load.ackedCount()-before)
	}
	close(load.stop)
	load.wg.Wait()
	index, hash := c.converged(c.nodes...)
	checkContent(t, load.want, c.nodes...)
	t.Logf("%d writes acknowledged, %d paths read back on every validator; all at index %d, state hash %s",
		load.ackedCount(), len(load.want), index, hash)
}
