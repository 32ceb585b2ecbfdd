package system

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
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
	code, out := send(c.t, http.MethodPost, via.url()+"/v1/cluster/members", body)
	var added struct{ Learners []uint64 }
	if code != http.StatusOK || json.Unmarshal([]byte(out), &added) != nil || !slices.Contains(added.Learners, id) {
		c.t.Fatalf("adding validator %d as a learner: %d %s", id, code, out)
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
	req.Header.Set("Authorization", "Bearer "+operatorToken)
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
	// The leader promotes it by itself once it caught up.
	c.waitMembership(fourth, func(cs api.ClusterState) bool { return slices.Contains(cs.Voters, 4) && len(cs.Learners) == 0 })
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

// waitMembership waits until n's view of the membership satisfies ok.
func (c *cluster) waitMembership(n *node, ok func(api.ClusterState) bool) api.ClusterState {
	c.t.Helper()
	var cs api.ClusterState
	harness.Eventually(c.t, 30*time.Second, func() bool {
		cs = api.ClusterState{}
		return get(n.url()+"/v1/msgbus/cluster-state", &cs) == nil && ok(cs)
	})
	return cs
}

// refusal is the code and reason of a membership_refused answer.
func refusal(t *testing.T, code int, out string) string {
	t.Helper()
	var body struct {
		Error struct {
			Code    string
			Details map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &body); err != nil {
		t.Fatalf("answer %d %q is not an error body: %v", code, out, err)
	}
	reason, _ := body.Error.Details["reason"].(string)
	return fmt.Sprintf("%d %s %s", code, body.Error.Code, reason)
}

// TestMembershipAttacks: the membership changes an operator token could
// use to halt the cluster are refused, and writes keep committing. Three
// phantom members: the first joins as a learner (no vote, so the quorum is
// unchanged), the others are refused while it is one. A removed id cannot
// come back. With one voter down, removing another live voter would leave
// two voters of which one is reachable: refused.
func TestMembershipAttacks(t *testing.T) {
	c := newCluster(t, 3, "MOCK")
	leader := c.waitLeader()

	var mu sync.Mutex
	committed := 0
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() {
		key, _ := crypto.GenerateKey()
		for ctx.Err() == nil {
			if _, ok := tryWrite(ctx, c.client(leader), key); ok {
				mu.Lock()
				committed++
				mu.Unlock()
			}
		}
	})
	keepsCommitting := func(what string) {
		t.Helper()
		mu.Lock()
		before := committed
		mu.Unlock()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			now := committed
			mu.Unlock()
			if now >= before+5 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: writes stopped committing (%d, then %d)", what, before, now)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	keepsCommitting("before the attack")

	phantom := func(id uint64) (int, string) {
		body, _ := json.Marshal(api.Member{ID: id, PeerAddr: fmt.Sprintf("127.0.0.1:%d", 1+id), APIURL: fmt.Sprintf("http://127.0.0.1:%d", 1+id)})
		return send(t, http.MethodPost, leader.url()+"/v1/cluster/members", body)
	}
	if code, out := phantom(4); code != http.StatusOK {
		t.Fatalf("adding the first phantom: %d %s", code, out)
	}
	for _, id := range []uint64{5, 6} {
		if code, out := phantom(id); refusal(t, code, out) != "409 membership_refused too_many_learners" {
			t.Fatalf("adding phantom %d while 4 is a learner: %d %s", id, code, out)
		}
	}
	cs := c.waitMembership(leader, func(api.ClusterState) bool { return true })
	if !slices.Equal(cs.Voters, []uint64{1, 2, 3}) || !slices.Equal(cs.Learners, []uint64{4}) || cs.Quorum != 2 {
		t.Fatalf("membership after three phantoms: voters %v learners %v quorum %d", cs.Voters, cs.Learners, cs.Quorum)
	}
	if code, out := send(t, http.MethodPost, leader.url()+"/v1/cluster/members/4/promote", nil); refusal(t, code, out) != "409 membership_refused learner_behind" {
		t.Fatalf("promoting a phantom: %d %s", code, out)
	}
	keepsCommitting("with a phantom learner")

	if code, out := send(t, http.MethodDelete, leader.url()+"/v1/cluster/members/4", nil); code != http.StatusOK {
		t.Fatalf("removing the phantom: %d %s", code, out)
	}
	if code, out := phantom(4); refusal(t, code, out) != "409 membership_refused removed_id" {
		t.Fatalf("re-adding the removed id 4: %d %s", code, out)
	}
	if code, out := phantom(2); refusal(t, code, out) != "409 membership_refused already_member" {
		t.Fatalf("adding a voter's id: %d %s", code, out)
	}

	// Take down a follower and wait until the leader sees it silent.
	var down, live *node
	for _, n := range c.nodes {
		switch {
		case n == leader:
		case down == nil:
			down = n
		default:
			live = n
		}
	}
	c.kill(down)
	harness.Eventually(t, 30*time.Second, func() bool {
		var lag api.ReplicationLag
		if get(leader.url()+"/v1/msgbus/replication-lag", &lag) != nil {
			return false
		}
		i := slices.IndexFunc(lag.Nodes, func(r api.ReplicationNode) bool { return r.NodeID == down.id })
		return i >= 0 && !lag.Nodes[i].RecentActive
	})
	path := fmt.Sprintf("%s/v1/cluster/members/%d", leader.url(), live.id)
	if code, out := send(t, http.MethodDelete, path, nil); refusal(t, code, out) != "409 membership_refused no_reachable_quorum" {
		t.Fatalf("removing live validator %d while %d is down: %d %s", live.id, down.id, code, out)
	}
	cs = c.waitMembership(leader, func(api.ClusterState) bool { return true })
	if !slices.Equal(cs.Voters, []uint64{1, 2, 3}) || len(cs.Learners) != 0 {
		t.Fatalf("membership after the refused removal: voters %v learners %v", cs.Voters, cs.Learners)
	}
	keepsCommitting("with one validator down")
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
