package system

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
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

// join starts a new validator that joins the running cluster: it is added
// through via's membership route first, then started with an empty data
// directory and SVC_VALIDATOR_JOIN.
func (c *cluster) join(via *node, id uint64) *node {
	c.t.Helper()
	template := c.nodes[0]
	dir := filepath.Dir(template.dataDir)
	n := &node{id: id, httpAddr: freeAddr(c.t), peerAddr: freeAddr(c.t), dataDir: filepath.Join(dir, "v"+strconv.FormatUint(id, 10)),
		logPath: filepath.Join(dir, "v"+strconv.FormatUint(id, 10)+".log")}
	body, _ := json.Marshal(api.Member{ID: id, PeerAddr: n.peerAddr, APIURL: n.url()})
	if code, out := send(c.t, http.MethodPost, via.url()+"/v1/cluster/members", body); code != http.StatusOK {
		c.t.Fatalf("adding validator %d: %d %s", id, code, out)
	}
	var dial []string
	for _, m := range append(c.nodes, n) {
		dial = append(dial, fmt.Sprintf("%d=%s=%s", m.id, m.peerAddr, m.url()))
	}
	// Later values of a key win, so the template's env is overridden.
	n.env = append(append(append([]string(nil), template.env...), c.peerTLSEnv(id)...),
		"SVC_VALIDATOR_NODE_ID="+strconv.FormatUint(id, 10),
		"SVC_VALIDATOR_DATA_DIR="+n.dataDir,
		"SVC_VALIDATOR_HTTP_ADDR="+n.httpAddr,
		"SVC_VALIDATOR_PEER_ADDR="+n.peerAddr,
		"SVC_VALIDATOR_INITIAL_CLUSTER="+strings.Join(dial, ","),
		"SVC_VALIDATOR_JOIN=true",
	)
	c.nodes = append(c.nodes, n)
	c.start(n)
	return n
}

func send(t testing.TB, method, u string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

// TestMembershipChangeUnderLoad adds a fourth validator and removes an old
// one while clients keep writing; every write acknowledged COMMITTED is on
// the new validator at the end, and the remaining three agree.
func TestMembershipChangeUnderLoad(t *testing.T) {
	c := newCluster(t, 3, "MOCK")
	first := c.waitLeader()

	var mu sync.Mutex
	var entry []*node // validators clients may write through
	entry = append(entry, c.nodes...)
	committed := map[common.Hash]bool{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			key, _ := crypto.GenerateKey()
			for i := 0; ctx.Err() == nil; i++ {
				mu.Lock()
				n := entry[(w+i)%len(entry)]
				mu.Unlock()
				if id, ok := tryWrite(ctx, c.client(n), key); ok {
					mu.Lock()
					committed[id] = true
					mu.Unlock()
				}
			}
		})
	}
	countCommitted := func() int { mu.Lock(); defer mu.Unlock(); return len(committed) }
	harness.Eventually(t, 30*time.Second, func() bool { return countCommitted() >= 30 })

	fourth := c.join(first, 4)
	c.converged(c.nodes...)
	mu.Lock()
	entry = append(entry, fourth)
	mu.Unlock()
	before := countCommitted()
	harness.Eventually(t, 30*time.Second, func() bool { return countCommitted() >= before+30 })

	// Remove validator 1 (the leader, if it still is: raft hands over).
	old := c.nodes[0]
	if code, out := send(t, http.MethodDelete, c.nodes[1].url()+"/v1/cluster/members/1", nil); code != http.StatusOK {
		t.Fatalf("removing validator 1: %d %s", code, out)
	}
	mu.Lock()
	entry = entry[1:]
	mu.Unlock()
	c.kill(old)
	remaining := c.nodes[1:]
	c.waitLeaderAmong(remaining)
	before = countCommitted()
	harness.Eventually(t, 30*time.Second, func() bool { return countCommitted() >= before+30 })
	stop()
	wg.Wait()

	index, hash := c.converged(remaining...)
	var cs api.ClusterState
	if err := get(fourth.url()+"/v1/msgbus/cluster-state", &cs); err != nil || len(cs.Voters) != 3 || cs.Voters[0] != 2 {
		t.Fatalf("membership after the change: %+v %v", cs, err)
	}
	client := c.client(fourth)
	for id := range committed {
		s, err := client.Status(context.Background(), id, 0)
		if err != nil || !api.Committed(s.Status) {
			t.Fatalf("write %s acknowledged COMMITTED is %q on the new validator: %v", id.Hex(), s.Status, err)
		}
	}
	t.Logf("%d writes committed across the change; validators 2-4 agree at index %d (%s)", len(committed), index, hash)
}

// tryWrite submits one write and waits for it; failures during membership
// and leader changes are expected and reported as not committed.
func tryWrite(ctx context.Context, client *ledgerclient.Client, key *ecdsa.PrivateKey) (common.Hash, bool) {
	cfg, err := client.BlockchainConfig(ctx)
	if err != nil {
		return common.Hash{}, false
	}
	p := &ledgerclient.Proposal{Message: []byte(`{"title":"membership"}`), ContentType: "page"}
	form, _, err := ledgerclient.Form(cfg, key, p, common.Hash{})
	if err != nil {
		return common.Hash{}, false
	}
	if _, err := client.Submit(ctx, proposal.Write, form); err != nil {
		return common.Hash{}, false
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	s, err := client.WaitFinal(wctx, p.ID, nil)
	return p.ID, err == nil && s.Status == api.StatusCommitted
}
