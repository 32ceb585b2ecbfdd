package app

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap/zaptest"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/buildinfo"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/pkg/signing"
)

var testContract = common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")

// startMock runs a MOCK-mode validator on a temp dir and returns its URL.
func startMock(t *testing.T) string {
	return startMockWith(t, func(*Config) {})
}

// mockConfig is a single MOCK-mode validator's configuration on dataDir.
func mockConfig(dataDir string) Config {
	return Config{
		Mode: Mock, NodeID: 1, ClusterID: "test", DataDir: dataDir, HTTPAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
		ChainID: 1337, ContractAddress: testContract.Hex(), ContentRoot: "ledger", MaxMessageBytes: 1 << 20,
		EpochLength: 384 * time.Second, TickInterval: 20 * time.Millisecond, PaymentWait: time.Second,
		MaxPending: 100, MaxBatch: 64, MaxPendingMessages: 256, MicroBatch: 64, MicroBatchBytes: 256 << 10,
	}
}

func startMockWith(t *testing.T, edit func(*Config)) string {
	t.Helper()
	cfg := mockConfig(t.TempDir())
	edit(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, zaptest.NewLogger(t), ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("validator stopped with %v", err)
		}
	})
	var base string
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("validator did not start: %v", err)
	}
	waitFor(t, func() bool {
		var h map[string]any
		return getJSONWith(t, base+"/health", cfg.AuthToken, &h) == http.StatusOK && h["role"] == "LEADER"
	})
	return base
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	return getJSONWith(t, url, "", out)
}

// getJSONWith is getJSON with a bearer token (none when empty).
func getJSONWith(t *testing.T, url, token string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %s: %v", url, body, err)
	}
	return resp.StatusCode
}

type author struct {
	key    *ecdsa.PrivateKey
	wallet common.Address
}

func newAuthor(t *testing.T) author {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return author{key, crypto.PubkeyToAddress(key.PublicKey)}
}

// form builds a signed write form; signer signs it (the author, or another
// key to forge).
func (a author) form(t *testing.T, id common.Hash, message string, signer *ecdsa.PrivateKey) url.Values {
	sub := "page/" + id.Hex()[2:18]
	path := proposal.ContentPath("ledger", a.wallet, "default", sub)
	sig, err := signing.Sign(signing.Domain{ChainID: 1337, VerifyingContract: testContract}, signing.Proposal{
		Action: "write", ProposalID: id, Wallet: a.wallet, Path: path, Organization: "default",
		ContentType: "page", PaymentTier: "standard", MessageHash: signing.MessageHash([]byte(message)),
	}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return url.Values{
		"proposalId": {id.Hex()}, "walletAddress": {a.wallet.Hex()}, "message": {message},
		"signature": {hexutil.Encode(sig)}, "contentType": {"page"}, "paymentTier": {"standard"},
	}
}

func post(t *testing.T, base string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(base+"/v1/propose-write", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// stateOf is what a recorded proposal changes: the replicated proposal
// counts. (The applied index moves on its own: the leader appends finality
// and GC debt entries.)
func stateOf(t *testing.T, base string) api.ProposalCounts {
	var c api.ProposalCounts
	if code := getJSON(t, base+"/v1/proposals/counts", &c); code != http.StatusOK {
		t.Fatalf("proposal counts: %d", code)
	}
	c.AppliedIndex = 0
	return c
}

func waitCommitted(t *testing.T, base string, id common.Hash) api.ProposalStatus {
	t.Helper()
	var s api.ProposalStatus
	waitFor(t, func() bool {
		getJSON(t, base+api.StatusLink(id.Hex())+"?wait=5s", &s)
		return api.Terminal(s.Status)
	})
	return s
}

func TestWriteCommitsAndReadsBack(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	id := common.HexToHash("0x01")
	code, body := post(t, base, a.form(t, id, `{"jcr:primaryType":"cq:Page","title":"Hello","jcr:content":{"text":"hi"}}`, a.key))
	// MOCK mode decides at intake: the 202 carries the replicated status.
	if code != http.StatusAccepted || body["status"] != "COMMITTED" || body["links"].(map[string]any)["status"] != api.StatusLink(id.Hex()) {
		t.Fatalf("submit: %d %v", code, body)
	}
	s := waitCommitted(t, base, id)
	if s.Status != api.StatusCommitted || s.CommitIndex == 0 || s.CommittedAt == nil || s.Wallet != strings.ToLower(a.wallet.Hex()) {
		t.Fatalf("status %+v", s)
	}

	var n api.Node
	if code := getJSON(t, base+"/api/explore?path="+url.QueryEscape(s.Path), &n); code != http.StatusOK {
		t.Fatalf("explore %d", code)
	}
	if n.PrimaryType != "cq:Page" || string(n.Properties["title"]) != `"Hello"` || len(n.Children) != 1 || n.Children[0] != "jcr:content" {
		t.Fatalf("node %+v", n)
	}
	var child api.Node
	getJSON(t, base+"/api/explore?path="+url.QueryEscape(s.Path+"/jcr:content"), &child)
	if string(child.Properties["text"]) != `"hi"` {
		t.Fatalf("child %+v", child)
	}
	var folder api.Node
	walletRoot := proposal.WalletRoot("ledger", a.wallet)
	if code := getJSON(t, base+"/api/explore?path="+url.QueryEscape(walletRoot), &folder); code != http.StatusOK || !folder.Virtual || len(folder.Children) != 1 || folder.Children[0] != "default" {
		t.Fatalf("wallet root %d %+v", code, folder)
	}
}

func TestResubmission(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	id := common.HexToHash("0x02")
	form := a.form(t, id, "first", a.key)
	if code, body := post(t, base, form); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, body)
	}
	waitCommitted(t, base, id)
	code, body := post(t, base, form)
	if code != http.StatusOK || body["status"] != "COMMITTED" {
		t.Fatalf("identical resubmission: %d %v", code, body)
	}
	before := stateOf(t, base)
	code, body = post(t, base, a.form(t, id, "second", a.key))
	if code != http.StatusConflict || body["error"].(map[string]any)["code"] != string(apierror.ProposalIDConflict) {
		t.Fatalf("conflicting resubmission: %d %v", code, body)
	}
	if after := stateOf(t, base); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused resubmission was recorded: %+v -> %+v", before, after)
	}
}

func TestSignatureRejections(t *testing.T) {
	base := startMock(t)
	a, other := newAuthor(t), newAuthor(t)
	before := stateOf(t, base)

	forged := a.form(t, common.HexToHash("0x03"), "x", other.key)
	tampered := a.form(t, common.HexToHash("0x04"), "x", a.key)
	tampered.Set("message", "y")
	sig := hexutil.MustDecode(a.form(t, common.HexToHash("0x05"), "x", a.key).Get("signature"))
	sig[10] ^= 0xff
	corrupted := a.form(t, common.HexToHash("0x05"), "x", a.key)
	corrupted.Set("signature", hexutil.Encode(sig))

	for name, form := range map[string]url.Values{"another wallet's key": forged, "tampered message": tampered, "corrupted signature": corrupted} {
		code, body := post(t, base, form)
		e, _ := body["error"].(map[string]any)
		if code != http.StatusUnauthorized || e["code"] != string(apierror.InvalidSignature) || e["retryable"] != false {
			t.Errorf("%s: %d %v", name, code, body)
		}
	}
	var s map[string]any
	if code := getJSON(t, base+api.StatusLink(common.HexToHash("0x03").Hex()), &s); code != http.StatusNotFound {
		t.Errorf("a refused proposal has a status: %d %v", code, s)
	}
	if after := stateOf(t, base); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused proposals were recorded: %+v -> %+v", before, after)
	}
}

func TestAuthToken(t *testing.T) {
	base := startMockWith(t, func(c *Config) { c.AuthToken = "s3cret" })
	call := func(path, token string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	for _, path := range []string{"/health", "/health/local"} {
		// Without a token: the status a load balancer needs, nothing more.
		if code, body := call(path, ""); code != http.StatusOK || body["status"] != "ok" || body["nodeId"] != nil || body["leader"] != nil {
			t.Errorf("%s without a token: %d %v", path, code, body)
		}
		if code, body := call(path, "s3cret"); code != http.StatusOK || body["nodeId"] != float64(1) || body["role"] != "LEADER" {
			t.Errorf("%s with the token: %d %v", path, code, body)
		}
	}
	// /health/cluster: the quorum's figures without a token, the members with it.
	if code, body := call("/health/cluster", ""); code != http.StatusOK || body["status"] != "ok" || body["leader"] != float64(0) ||
		len(body["nodes"].([]any)) != 0 {
		t.Errorf("/health/cluster without a token: %d %v", code, body)
	}
	if code, body := call("/health/cluster", "s3cret"); code != http.StatusOK || body["leader"] != float64(1) || len(body["nodes"].([]any)) != 1 {
		t.Errorf("/health/cluster with the token: %d %v", code, body)
	}
	code, body := call("/v1/blockchain/config", "")
	if code != http.StatusUnauthorized || body["error"].(map[string]any)["code"] != string(apierror.Unauthorized) {
		t.Errorf("no token: %d %v", code, body)
	}
	code, body = call("/v1/blockchain/config", "wrong")
	if code != http.StatusForbidden || body["error"].(map[string]any)["code"] != string(apierror.Forbidden) {
		t.Errorf("wrong token: %d %v", code, body)
	}
	if code, body = call("/v1/blockchain/config", "s3cret"); code != http.StatusOK || body["mode"] != "MOCK" {
		t.Errorf("right token: %d %v", code, body)
	}
}

func TestConsensusRoutesSingleNode(t *testing.T) {
	base := startMock(t)
	var leader api.LeaderInfo
	getJSON(t, base+"/v1/consensus/leader", &leader)
	if !leader.Known || !leader.Self || leader.LeaderID != 1 || leader.LeaderURL != base || leader.ContractVersion != api.ConsensusLeaderVersion {
		t.Fatalf("leader %+v", leader)
	}
	var st api.ConsensusStatus
	getJSON(t, base+"/v1/consensus/status", &st)
	if st.Role != api.RoleLeader || st.Term == 0 || st.AppliedIndex == 0 || len(st.Peers) != 0 || st.Epoch < 1000 || len(st.StateHash) != 66 {
		t.Fatalf("status %+v", st)
	}
	var peers api.Peers
	getJSON(t, base+"/v1/peers", &peers)
	if len(peers.Peers) != 1 || !peers.Peers[0].Self || !peers.Peers[0].IsLeader {
		t.Fatalf("peers %+v", peers)
	}
	var health api.ClusterHealth
	if code := getJSON(t, base+"/health/cluster", &health); code != http.StatusOK || health.Status != "ok" || !health.StateHashAgreement ||
		health.Reachable != 1 || health.ComparedAt == 0 || health.Nodes[0].ComparedHash == "" {
		t.Fatalf("cluster health %d %+v", code, health)
	}
	var at api.StateHashAt
	if code := getJSON(t, base+"/v1/consensus/state-hash?index="+strconv.FormatUint(health.ComparedAt, 10), &at); code != http.StatusOK ||
		at.Index != health.ComparedAt || at.StateHash != health.Nodes[0].ComparedHash || at.ContractVersion != api.StateHashVersion {
		t.Fatalf("state hash at %d: %d %+v", health.ComparedAt, code, at)
	}
	for _, q := range []string{"", "0", "x", "-1"} {
		var e apierror.Body
		if code := getJSON(t, base+"/v1/consensus/state-hash?index="+q, &e); code != http.StatusBadRequest || e.Error == nil || e.Error.Code != apierror.InvalidField {
			t.Errorf("index=%q: %d %+v", q, code, e.Error)
		}
	}
	var q api.QueueStats
	if code := getJSON(t, base+"/v1/proposals/queue/stats", &q); code != http.StatusOK || q.ContractVersion != api.QueueStatsVersion ||
		q.MaxPendingMessages == 0 || q.CurrentEpoch < 1000 || q.CurrentEpoch-q.FinalizedEpoch != 2 || q.EpochsUntilFinality != 2 {
		t.Fatalf("queue stats %d %+v", code, q)
	}
	var pc api.PendingCount
	if code := getJSON(t, base+"/v1/proposals/pending/count", &pc); code != http.StatusOK || pc.ContractVersion != api.PendingCountVersion || pc.Pending != 0 {
		t.Fatalf("pending count %d %+v", code, pc)
	}
	var e apierror.Body
	if code := getJSON(t, base+"/v1/consensus/state-hash?index=999999", &e); code != http.StatusNotFound || e.Error == nil || e.Error.Code != apierror.NotFound {
		t.Errorf("an index not applied yet: %d %+v", code, e.Error)
	}
	// The leadership log follows raft on a loop of its own: the election
	// /health already shows may reach it a moment later.
	var history api.LeadershipHistory
	waitFor(t, func() bool {
		getJSON(t, base+"/v1/msgbus/leadership-history", &history)
		return len(history.History) > 0 && history.History[len(history.History)-1].Leader == 1
	})
	var cs api.ClusterState
	getJSON(t, base+"/v1/msgbus/cluster-state", &cs)
	if len(cs.Voters) != 1 || cs.Voters[0] != 1 || cs.Quorum != 1 {
		t.Fatalf("cluster state %+v", cs)
	}
	var rm api.RaftMetrics
	getJSON(t, base+"/v1/msgbus/raft-metrics", &rm)
	if rm.Role != api.RoleLeader || rm.LastLogIndex < rm.AppliedIndex || rm.FirstLogIndex == 0 || rm.Elections.Count == 0 || rm.Elections.LastAt == nil {
		t.Fatalf("raft metrics %+v", rm)
	}
	var lag api.ReplicationLag
	getJSON(t, base+"/v1/msgbus/replication-lag", &lag)
	if !lag.IsLeader || len(lag.Nodes) != 1 || lag.Nodes[0].NodeID != 1 {
		t.Fatalf("replication lag %+v", lag)
	}
	var ns api.NodeStatus
	getJSON(t, base+"/v1/msgbus/node-status", &ns)
	if ns.NodeID != 1 || ns.LeadershipChanges == 0 || ns.StartedAt.IsZero() {
		t.Fatalf("node status %+v", ns)
	}
}

func TestMockEpochRoutes(t *testing.T) {
	base := startMock(t)
	call := func(method, path string, out any) int {
		t.Helper()
		return request(t, method, base+path, nil, out)
	}

	var st api.MockEpochStatus
	if code := call(http.MethodGet, "/api/mock/epoch-status", &st); code != http.StatusOK || st.CurrentEpoch != 1000 ||
		st.FinalizedEpoch != 998 || st.Offset != 0 || st.EpochLengthSeconds != 384 || st.NextEpochInMs <= 0 || st.ContractVersion != api.MockEpochStatusVersion {
		t.Fatalf("epoch status %d %+v", code, st)
	}
	if code := call(http.MethodPost, "/api/mock/advance-epoch?epochs=3", &st); code != http.StatusOK || st.CurrentEpoch != 1003 || st.FinalizedEpoch != 1001 || st.Offset != 3 {
		t.Fatalf("advance 3: %d %+v", code, st)
	}
	if code := call(http.MethodPost, "/api/mock/advance-epoch", &st); code != http.StatusOK || st.CurrentEpoch != 1004 {
		t.Fatalf("advance 1: %d %+v", code, st)
	}
	if code := call(http.MethodPost, "/api/mock/set-epoch-offset?offset=-5", &st); code != http.StatusOK || st.CurrentEpoch != 995 || st.Offset != -5 {
		t.Fatalf("offset -5: %d %+v", code, st)
	}
	// Proposals are stamped with the moved clock.
	var q api.QueueStats
	if getJSON(t, base+"/v1/proposals/queue/stats", &q); q.CurrentEpoch != 995 {
		t.Fatalf("queue stats epoch %d after the offset", q.CurrentEpoch)
	}
	for _, tc := range []struct{ path, field string }{
		{"/api/mock/advance-epoch?epochs=0", "epochs"},
		{"/api/mock/advance-epoch?epochs=x", "epochs"},
		{"/api/mock/advance-epoch?epochs=10001", "epochs"},
		{"/api/mock/set-epoch-offset", "offset"},
		{"/api/mock/set-epoch-offset?offset=-2000", "offset"},
	} {
		var e apierror.Body
		if code := call(http.MethodPost, tc.path, &e); code != http.StatusBadRequest || e.Error == nil || e.Error.Details["field"] != tc.field {
			t.Errorf("%s: %d %+v", tc.path, code, e.Error)
		}
	}
	if getJSON(t, base+"/api/mock/epoch-status", &st); st.CurrentEpoch != 995 {
		t.Fatalf("a refused request moved the clock: %+v", st)
	}
	var e apierror.Body
	if code := call(http.MethodGet, "/api/mock/advance-epoch", &e); code != http.StatusMethodNotAllowed {
		t.Errorf("GET advance-epoch: %d", code)
	}
}

// TestFinalityInMockMode: a committed proposal becomes FINALIZED once the
// MOCK clock has moved its epoch to final, through a replicated entry.
func TestFinalityInMockMode(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	id := common.HexToHash("0x0f")
	if code, body := post(t, base, a.form(t, id, `{"title":"final"}`, a.key)); code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, body)
	}
	s := waitCommitted(t, base, id)
	if s.Status != api.StatusCommitted || s.Epoch != 1000 || s.FinalizedAt != nil {
		t.Fatalf("committed %+v", s)
	}
	var f api.Finality
	if code := getJSON(t, base+"/v1/finality", &f); code != http.StatusOK || f.CommittedUnfinalized != 1 || f.OldestUnfinalizedEpoch != 1000 ||
		f.CurrentEpoch != 1000 || f.ContractVersion != api.FinalityVersion {
		t.Fatalf("finality before: %d %+v", code, f)
	}
	resp, err := http.Post(base+"/api/mock/advance-epoch?epochs=2", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, func() bool {
		getJSON(t, base+api.StatusLink(id.Hex())+"?wait=2s", &s)
		return s.Status == api.StatusFinalized
	})
	if s.FinalizedAt == nil || s.CommittedAt == nil || s.FinalizedAt.Before(*s.CommittedAt) {
		t.Fatalf("finalized %+v", s)
	}
	var q api.QueueStats
	if getJSON(t, base+"/v1/proposals/queue/stats", &q); q.TotalFinalizedCount != 1 || q.FinalizedEpoch != 1000 {
		t.Fatalf("queue stats %+v", q)
	}
	// Finality does not move the last commit.
	if getJSON(t, base+"/v1/finality", &f); f.CommittedUnfinalized != 0 || f.FinalizedEpoch != 1000 || f.EpochsUntilFinality != 2 ||
		f.LastCommitAt == nil || !f.LastCommitAt.Equal(*s.CommittedAt) {
		t.Fatalf("finality after: %+v", f)
	}
	var n api.ProposalCounts
	if code := getJSON(t, base+"/v1/proposals/counts", &n); code != http.StatusOK || n.Committed != 1 || n.Finalized != 1 || n.Writes != 1 ||
		n.Rejected != 0 || n.AppliedIndex == 0 || n.ContractVersion != api.ProposalCountsVersion {
		t.Fatalf("counts: %d %+v", code, n)
	}
}

// deleteForm builds a signed delete of the page a.form(t, written, ...) wrote.
func (a author) deleteForm(t *testing.T, id, written common.Hash) url.Values {
	sub := "page/" + written.Hex()[2:18]
	path := proposal.ContentPath("ledger", a.wallet, "default", sub)
	sig, err := signing.Sign(signing.Domain{ChainID: 1337, VerifyingContract: testContract}, signing.Proposal{
		Action: "delete", ProposalID: id, Wallet: a.wallet, Path: path, Organization: "default",
		ContentType: "page", PaymentTier: "standard",
	}, a.key)
	if err != nil {
		t.Fatal(err)
	}
	return url.Values{
		"proposalId": {id.Hex()}, "walletAddress": {a.wallet.Hex()}, "path": {sub},
		"signature": {hexutil.Encode(sig)}, "contentType": {"page"}, "paymentTier": {"standard"},
	}
}

// request sends method to u with form as its body (none when nil) and
// decodes the JSON answer into out.
// operate sends an operator's request: POST, its arguments as JSON.
func operate(t *testing.T, u, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return roundTrip(t, req, out)
}

func request(t *testing.T, method, u string, form url.Values, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return roundTrip(t, req, out)
}

// roundTrip sends req and decodes the JSON answer into out.
func roundTrip(t *testing.T, req *http.Request, out any) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// TestGcDebtBlocksAndUnblocksWrites follows ADR 0011 through the API in
// MOCK mode: a delete accrues debt, executing it at or above the limit
// blocks the wallet's writes with 402, and paying it unblocks them.
func TestGcDebtBlocksAndUnblocksWrites(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	accountURL := base + "/v1/gc/account/" + strings.ToLower(a.wallet.Hex())
	var acc api.GcAccount
	if code := getJSON(t, accountURL, &acc); code != http.StatusOK || acc.PendingDebt != "0.00" || acc.Limit != "100.00" || acc.WritesBlocked ||
		acc.ContractVersion != api.GcAccountVersion {
		t.Fatalf("a fresh account: %d %+v", code, acc)
	}

	written := common.HexToHash("0x61")
	if code, body := post(t, base, a.form(t, written, `{"title":"to delete"}`, a.key)); code != http.StatusAccepted {
		t.Fatalf("write: %d %v", code, body)
	}
	var receipt map[string]any
	del := common.HexToHash("0x62")
	if code := request(t, http.MethodPost, base+"/v1/propose-delete", a.deleteForm(t, del, written), &receipt); code != http.StatusAccepted {
		t.Fatalf("delete: %d %v", code, receipt)
	}
	waitCommitted(t, base, del)
	if getJSON(t, accountURL, &acc); acc.PendingDebt != "0.10" || acc.ExecutedDebt != "0.00" || acc.Deletes != 1 || acc.DeletedBytes == 0 {
		t.Fatalf("after a delete (at least 1 MB at 0.10): %+v", acc)
	}

	if code := operate(t, accountURL+"/execute-pending", "", &acc); code != http.StatusOK || acc.ExecutedDebt != "0.10" || acc.PendingDebt != "0.00" {
		t.Fatalf("execute-pending: %d %+v", code, acc)
	}
	if code := operate(t, accountURL+"/set-limit", `{"limit":"0.10"}`, &acc); code != http.StatusOK || !acc.WritesBlocked || acc.Limit != "0.10" {
		t.Fatalf("set-limit: %d %+v", code, acc)
	}
	var e apierror.Body
	blocked := common.HexToHash("0x63")
	if code := request(t, http.MethodPost, base+"/v1/propose-write", a.form(t, blocked, `{"title":"blocked"}`, a.key), &e); code != http.StatusPaymentRequired ||
		e.Error == nil || e.Error.Code != apierror.WriteBlockedGCDebt || e.Error.Details["executedDebt"] != "0.10" {
		t.Fatalf("a blocked write: %d %+v", code, e.Error)
	}
	var st apierror.Body
	if code := getJSON(t, base+api.StatusLink(blocked.Hex()), &st); code != http.StatusNotFound {
		t.Fatalf("a blocked write left a status: %d", code)
	}

	for _, tc := range []struct{ path, body, field string }{
		{"/pay", `{"amount":"0"}`, "amount"}, {"/pay", `{"amount":"-1"}`, "amount"}, {"/pay", "", "amount"},
		{"/pay", `{"amount":"1000000.000001"}`, "amount"}, {"/set-limit", `{"limit":"x"}`, "limit"},
		{"/set-limit", `{"limit":"1000001"}`, "limit"}, {"/set-limit", `{}`, "limit"},
		{"/set-limit?limit=0.10", `{"limit":"0.10"}`, "limit"}, // arguments in the query are refused
	} {
		var e apierror.Body
		if code := operate(t, accountURL+tc.path, tc.body, &e); code != http.StatusBadRequest || e.Error.Details["field"] != tc.field {
			t.Errorf("%s %s: %d %+v", tc.path, tc.body, code, e.Error)
		}
	}
	if code := getJSON(t, base+"/v1/gc/account/0x1234", &e); code != http.StatusBadRequest || e.Error.Details["field"] != "walletAddress" {
		t.Errorf("a bad wallet: %d %+v", code, e.Error)
	}

	if code := operate(t, accountURL+"/pay", `{"amount":"0.10"}`, &acc); code != http.StatusOK || acc.WritesBlocked || acc.ExecutedDebt != "0.00" || acc.Paid != "0.10" {
		t.Fatalf("pay: %d %+v", code, acc)
	}
	if code, body := post(t, base, a.form(t, blocked, `{"title":"blocked"}`, a.key)); code != http.StatusAccepted {
		t.Fatalf("a write after paying: %d %v", code, body)
	}
}

func TestWalletRoutes(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	wallet := strings.ToLower(a.wallet.Hex())
	for i, msg := range []string{`{"title":"one","body":{"text":"x"}}`, `{"title":"two"}`} {
		var id common.Hash
		id[0], id[31] = byte(0x70+i), 1 // the path takes the id's first hex digits
		if code, body := post(t, base, a.form(t, id, msg, a.key)); code != http.StatusAccepted {
			t.Fatalf("write %d: %d %v", i, code, body)
		}
		waitCommitted(t, base, id)
	}
	var st api.WalletStats
	if code := getJSON(t, base+"/v1/wallets/stats?wallet="+wallet, &st); code != http.StatusOK || st.ContentCount != 3 || st.TotalWrites != 2 ||
		st.LastWriteAt == nil || st.GC.Limit != "100.00" || st.WalletPath != proposal.WalletRoot("ledger", a.wallet) {
		t.Fatalf("wallet stats: %d %+v", code, st)
	}
	var page api.WalletContent
	if code := getJSON(t, base+"/v1/wallets/content?wallet="+wallet+"&page=0&pageSize=2", &page); code != http.StatusOK || len(page.Items) != 2 || !page.HasMore {
		t.Fatalf("page 0: %d %+v", code, page)
	}
	first := page.Items[0].Path
	if code := getJSON(t, base+"/v1/wallets/content?wallet="+wallet+"&page=1&pageSize=2", &page); code != http.StatusOK || len(page.Items) != 1 || page.HasMore ||
		page.Items[0].Path == first || page.Items[0].ProposalID == "" || page.Items[0].Revision != 1 {
		t.Fatalf("page 1: %d %+v", code, page)
	}
	var ex api.ExplorerWallet
	if code := getJSON(t, base+"/v1/explorer/wallets/"+wallet, &ex); code != http.StatusOK || ex.ContractVersion != api.ExplorerWalletVersion ||
		ex.ContentCount != 3 || len(ex.Content) != 3 || ex.HasMore {
		t.Fatalf("explorer wallet: %d %+v", code, ex)
	}
	// A wallet the ledger knows nothing of is 404 (the contract lists it
	// for the route); one whose only trace is a GC account the operator
	// set a limit on is known.
	stranger := strings.ToLower(newAuthor(t).wallet.Hex())
	var e apierror.Body
	if code := getJSON(t, base+"/v1/explorer/wallets/"+stranger, &e); code != http.StatusNotFound || e.Error == nil || e.Error.Code != apierror.NotFound {
		t.Fatalf("a wallet with nothing: %d %+v", code, e.Error)
	}
	var acc api.GcAccount
	if code := operate(t, base+"/v1/gc/account/"+stranger+"/set-limit", `{"limit":"5.00"}`, &acc); code != http.StatusOK || acc.Limit != "5.00" {
		t.Fatalf("set-limit: %d %+v", code, acc)
	}
	if code := getJSON(t, base+"/v1/explorer/wallets/"+stranger, &ex); code != http.StatusOK || ex.Wallet != stranger ||
		ex.ContentCount != 0 || len(ex.Content) != 0 || ex.GC.Limit != "5.00" {
		t.Fatalf("a wallet with a GC account only: %d %+v", code, ex)
	}
	for _, tc := range []struct{ path, field string }{
		{"/v1/wallets/content?wallet=0x12", "wallet"},
		{"/v1/wallets/content?wallet=" + wallet + "&page=-1", "page"},
		{"/v1/wallets/content?wallet=" + wallet + "&pageSize=0", "pageSize"},
		{"/v1/wallets/content?wallet=" + wallet + "&pageSize=201", "pageSize"},
		{"/v1/wallets/stats", "wallet"},
		{"/v1/explorer/wallets/nope", "walletAddress"},
	} {
		var e apierror.Body
		if code := getJSON(t, base+tc.path, &e); code != http.StatusBadRequest || e.Error == nil || e.Error.Details["field"] != tc.field {
			t.Errorf("%s: %d %+v", tc.path, code, e.Error)
		}
	}
}

func TestReleaseFlowAndEpochRoutes(t *testing.T) {
	base := startMock(t)
	var f api.ReleaseFlow
	if code := getJSON(t, base+"/v1/proposals/release-flow", &f); code != http.StatusOK || f.ContractVersion != api.ReleaseFlowVersion ||
		f.Governor.State != "open" || len(f.Tiers) != 3 || f.MaxPendingMessages != 256 {
		t.Fatalf("release flow: %d %+v", code, f)
	}
	if code := getJSON(t, base+"/v1/explorer/release-flow", &f); code != http.StatusOK || f.ContractVersion != api.ExplorerReleaseFlowVersion {
		t.Fatalf("explorer release flow: %d %+v", code, f)
	}
	var o api.EpochOverlay
	if code := getJSON(t, base+"/v1/proposals/epochs", &o); code != http.StatusOK || o.ContractVersion != api.EpochOverlayVersion ||
		o.CurrentEpoch != 1000 || o.NextEpoch != 1001 || o.FinalizedEpoch != 998 {
		t.Fatalf("epoch overlay: %d %+v", code, o)
	}
	resp, err := http.Get(base + "/v1/explorer/epochs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var dep map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&dep)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Deprecation") != "true" || dep["successor"] != "/v1/explorer/release-flow" ||
		!strings.Contains(resp.Header.Get("Link"), "/v1/explorer/release-flow") {
		t.Fatalf("deprecated explorer epochs: %d %v %v", resp.StatusCode, resp.Header, dep)
	}
}

func TestExplorerAndOperationRoutes(t *testing.T) {
	base := startMock(t)
	a := newAuthor(t)
	id := common.HexToHash("0x5e")
	if code, body := post(t, base, a.form(t, id, `{"title":"explored"}`, a.key)); code != http.StatusAccepted {
		t.Fatalf("write: %d %v", code, body)
	}
	waitCommitted(t, base, id)
	var ex api.ExplorerProposal
	if code := getJSON(t, base+"/v1/explorer/proposals/"+id.Hex(), &ex); code != http.StatusOK || ex.ContractVersion != api.ExplorerProposalVersion ||
		ex.Proposal.ProposalID != id.Hex() || ex.Proposal.Status != api.StatusCommitted {
		t.Fatalf("explorer proposal: %d %+v", code, ex)
	}
	var op api.Operation
	if code := getJSON(t, base+"/v1/ops/operations/"+id.Hex(), &op); code != http.StatusOK || !op.Done || op.Kind != "proposal.write" ||
		op.Status != api.StatusCommitted || op.OperationID != id.Hex() {
		t.Fatalf("operation: %d %+v", code, op)
	}
	var sum api.ExplorerSummary
	if code := getJSON(t, base+"/v1/explorer/summary", &sum); code != http.StatusOK || sum.Identity.Mode != "MOCK" || sum.Cluster.Leader != 1 ||
		sum.Cluster.Members != 1 || sum.Finality.CommittedUnfinalized != 1 {
		t.Fatalf("summary: %d %+v", code, sum)
	}
	// The software version the header shows, in /health too; the last
	// commit is the only one's.
	if sum.Identity.Version == "" || sum.Identity.Version != buildinfo.Version() {
		t.Fatalf("summary identity version %q, want %q", sum.Identity.Version, buildinfo.Version())
	}
	var health map[string]any
	if getJSON(t, base+"/health", &health); health["version"] != buildinfo.Version() {
		t.Fatalf("health version %v", health["version"])
	}
	if at := sum.Finality.LastCommitAt; at == nil || ex.Proposal.CommittedAt == nil || !at.Equal(*ex.Proposal.CommittedAt) {
		t.Fatalf("finality last commit at %v, the proposal committed at %v", at, ex.Proposal.CommittedAt)
	}
	var e apierror.Body
	if code := getJSON(t, base+"/v1/ops/operations/0x"+strings.Repeat("ab", 32), &e); code != http.StatusNotFound || e.Error.Code != apierror.NotFound {
		t.Fatalf("an unknown operation: %d %+v", code, e.Error)
	}
	if code := getJSON(t, base+"/v1/explorer/proposals/nope", &e); code != http.StatusBadRequest || e.Error.Details["field"] != "proposalId" {
		t.Fatalf("a bad id: %d %+v", code, e.Error)
	}
}
