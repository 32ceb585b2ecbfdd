package routes

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/services/edge/internal/auth"
)

func TestLimitIsCheckedFirst(t *testing.T) {
	fc := newCluster(t, 1)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	for _, c := range []struct {
		route string
		good  []string
		bad   []string
	}{
		{"/ops/v1/events/recent", []string{"", "?limit=1", "?limit=50", "?limit=07", "?other=x"},
			[]string{"?limit=0", "?limit=51", "?limit=-1", "?limit=abc", "?limit=1.5", "?limit=", "?limit=1e1", "?limit=5&limit=6",
				"?limit=99999999999999999999"}},
		{"/ops/v1/fragmentation/top", []string{"", "?limit=1", "?limit=07", "?limit=100000"},
			[]string{"?limit=0", "?limit=-3", "?limit=x", "?limit=", "?limit=2.0", "?limit=1&limit=2"}},
	} {
		before := fc.hits()
		for _, q := range c.bad {
			status, body := get(t, srv.URL+c.route+q, "")
			if e := assertError(t, status, http.StatusBadRequest, body, CodeInvalidParameter, false); e["parameter"] != "limit" ||
				!strings.Contains(e["message"].(string), "limit") {
				t.Errorf("%s%s: the error does not name limit: %v", c.route, q, e)
			}
		}
		if n := fc.hits() - before; n != 0 {
			t.Errorf("%s: parameter checks asked the validators %d times", c.route, n)
		}
		for _, q := range c.good {
			status, body := get(t, srv.URL+c.route+q, "")
			if c.route == "/ops/v1/events/recent" {
				want := map[string]float64{"": 20, "?limit=1": 1, "?limit=50": 50, "?limit=07": 7, "?other=x": 20}[q]
				if data := assertEnvelope(t, status, body); data["limit"] != want || float64(len(data["events"].([]any))) != min(want, fakeEvents) {
					t.Errorf("%s%s: limit %v and %d events, want %v", c.route, q, data["limit"], len(data["events"].([]any)), want)
				}
				continue
			}
			// The limit reaches the validator, written canonically.
			want := map[string]float64{"": 10, "?limit=1": 1, "?limit=07": 7, "?limit=100000": 100000}[q]
			if data := assertEnvelope(t, status, body); data["limit"] != want {
				t.Errorf("%s%s: limit %v, want %v", c.route, q, data["limit"], want)
			}
		}
	}
}

func TestPathParametersAreCheckedFirst(t *testing.T) {
	fc := newCluster(t, 1)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	for _, path := range []string{
		"/ops/v1/explorer/proposal/0x12", "/ops/v1/explorer/proposal/" + knownID[2:], "/ops/v1/explorer/proposal/" + knownID + "0",
		"/ops/v1/explorer/proposal/0X" + knownID[2:], "/ops/v1/explorer/proposal/0x" + strings.Repeat("g", 64),
		"/ops/v1/explorer/wallets/0x12", "/ops/v1/explorer/wallets/" + knownID, "/ops/v1/explorer/wallets/%2e%2e",
		"/ops/v1/transactions/0x12", "/ops/v1/transactions/" + knownWallet,
		"/ops/v1/fragmentation/metrics/0x12", "/ops/v1/fragmentation/metrics/" + knownID,
	} {
		status, body := get(t, srv.URL+path, "")
		assertError(t, status, http.StatusNotFound, body, CodeNotFound, false)
	}
	if fc.hits() != 0 {
		t.Errorf("malformed parameters reached the validators %d times", fc.hits())
	}
	// Well formed, an id that names nothing reaches the source, whose 404
	// is the edge's.
	status, body := get(t, srv.URL+"/ops/v1/transactions/"+unknownID, "")
	if e := assertError(t, status, http.StatusNotFound, body, CodeNotFound, false); !strings.Contains(e["message"].(string), unknownID) {
		t.Errorf("the error does not name the transaction: %v", e)
	}
	if fc.hits() == 0 {
		t.Error("a well-formed transaction id did not reach the validators")
	}
}

func TestProposalDetail(t *testing.T) {
	fc := newCluster(t, 1)
	srv := edge(t, auth.Lanes{}, deadURL(t), fc.urls()[0])
	data := getData(t, srv.URL+"/ops/v1/explorer/proposal/"+knownID)
	if data["proposal"].(map[string]any)["status"] != api.StatusCommitted || data["transaction"].(map[string]any)["txHash"] != knownTx ||
		data["contractVersion"] != api.ExplorerProposalVersion {
		t.Fatalf("data %v", data)
	}
	sources := data["sources"].([]any)
	if len(sources) != 2 || sources[0].(map[string]any)["ok"] != false || sources[1].(map[string]any)["ok"] != true {
		t.Fatalf("sources do not show the failover: %v", sources)
	}
	status, body := get(t, srv.URL+"/ops/v1/explorer/proposal/"+unknownID, "")
	assertError(t, status, http.StatusNotFound, body, CodeNotFound, false)
}

// TestTransactions: the transaction views are the leader's answers as they
// are, with the sources; an unknown transaction is 404; a leader down is
// passed over; an answer of another contract version is never served.
func TestTransactions(t *testing.T) {
	fc := newCluster(t, 3)
	leader, follower := fc.nodes[0], fc.nodes[1]
	// A follower first: the leader answers all the same.
	srv := edge(t, auth.Lanes{}, follower.srv.URL, leader.srv.URL)
	data := getData(t, srv.URL+"/ops/v1/transactions/summary")
	byState := data["byState"].(map[string]any)
	if data["contractVersion"] != api.TransactionSummaryVersion || data["nodeId"] != float64(1) || data["total"] != float64(3) ||
		len(byState) != 5 || byState[api.TxMatched] != float64(1) || byState[api.TxOrphaned] != float64(1) ||
		len(data["gaps"].([]any)) != 1 {
		t.Fatalf("summary %v", data)
	}
	if by := answeredBy(t, data, srcTxSummary); by != leader.srv.URL {
		t.Errorf("summary answered by %q, want the leader %s: %v", by, leader.srv.URL, data["sources"])
	}

	// Any case of the hash; the validator is asked in lowercase.
	data = getData(t, srv.URL+"/ops/v1/transactions/0x"+strings.ToUpper(knownTx[2:]))
	payments := data["payments"].([]any)
	if data["contractVersion"] != api.TransactionVersion || data["txHash"] != knownTx || data["state"] != api.TxMatched ||
		data["nodeId"] != float64(1) || len(payments) != 1 {
		t.Fatalf("transaction %v", data)
	}
	p := payments[0].(map[string]any)
	history := p["history"].([]any)
	if p["proposalId"] != knownID || p["blockNumber"] != float64(5) || p["confirmations"] != float64(2) ||
		p["proposalStatus"] != api.StatusCommitted || len(history) != 3 || history[2].(map[string]any)["state"] != api.TxMatched {
		t.Fatalf("payment %v", p)
	}
	if by := answeredBy(t, data, "/v1/transactions/"+knownTx); by != leader.srv.URL {
		t.Errorf("transaction answered by %q, want the leader: %v", by, data["sources"])
	}

	status, body := get(t, srv.URL+"/ops/v1/transactions/"+unknownID, "")
	assertError(t, status, http.StatusNotFound, body, CodeNotFound, false)

	// The leader down: the follower answers, and the sources say so.
	leader.srv.Close()
	for path, route := range map[string]string{"/ops/v1/transactions/summary": srcTxSummary,
		"/ops/v1/transactions/" + knownTx: "/v1/transactions/" + knownTx} {
		data := getData(t, srv.URL+path)
		if data["nodeId"] != float64(2) || answeredBy(t, data, route) != follower.srv.URL {
			t.Fatalf("%s: not the follower's answer: %v", path, data)
		}
		failed := false
		for _, s := range data["sources"].([]any) {
			s := s.(map[string]any)
			failed = failed || s["nodeId"] == leader.srv.URL && s["route"] == route && s["ok"] == false
		}
		if !failed {
			t.Errorf("%s: the failed read from the leader is not in the sources: %v", path, data["sources"])
		}
	}
	status, body = get(t, srv.URL+"/ops/v1/transactions/"+unknownID, "")
	assertError(t, status, http.StatusNotFound, body, CodeNotFound, false)

	// Another contract version: 502, naming the route and the marker.
	follower.set(wrongVersion)
	for _, c := range []struct{ path, source, marker string }{
		{"/ops/v1/transactions/summary", srcTxSummary, `"transactions.summary.v2"`},
		{"/ops/v1/transactions/" + knownTx, srcTransaction, `"transactions.detail.v2"`},
	} {
		status, body := get(t, srv.URL+c.path, "")
		e := assertError(t, status, http.StatusBadGateway, body, CodeSourceInvalid, false)
		named := false
		for _, s := range e["sources"].([]any) {
			reason, _ := s.(map[string]any)["error"].(string)
			named = named || strings.Contains(reason, c.marker)
		}
		if e["sourceRoute"] != c.source || !named {
			t.Errorf("%s: the error does not name %s and %s: %v", c.path, c.source, c.marker, e)
		}
	}
}

// answeredBy is the validator whose answer to route data is, from its
// sources.
func answeredBy(t *testing.T, data map[string]any, route string) string {
	t.Helper()
	by := ""
	for _, s := range data["sources"].([]any) {
		if s := s.(map[string]any); s["ok"] == true && s["route"] == route {
			by = s["nodeId"].(string)
		}
	}
	return by
}

// TestWalletIsAskedInLowercase: the wallet route asks the validators in
// lowercase, and their 404 for a wallet they know nothing of is the edge's.
func TestWalletIsAskedInLowercase(t *testing.T) {
	fc := newCluster(t, 1)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	data := getData(t, srv.URL+"/ops/v1/explorer/wallets/0x"+strings.ToUpper(knownWallet[2:]))
	if data["wallet"] != knownWallet || data["contentCount"] != float64(5) || data["gc"].(map[string]any)["writesBlocked"] != false {
		t.Fatalf("wallet %v", data)
	}
	// A wallet the validators know nothing of: their 404 is the edge's,
	// in the ops error envelope, naming the wallet.
	unknown := "0x" + strings.Repeat("3", 40)
	status, body := get(t, srv.URL+"/ops/v1/explorer/wallets/"+unknown, "")
	if e := assertError(t, status, http.StatusNotFound, body, CodeNotFound, false); !strings.Contains(e["message"].(string), unknown) {
		t.Errorf("the error does not name the wallet: %v", e)
	}
}

// TestSourceFaults: a validator down is passed over; one answering
// garbage or another contract version is passed over too; when no
// validator gives an answer within the contract the edge answers 502,
// never 200 with wrong data.
func TestSourceFaults(t *testing.T) {
	fc := newCluster(t, 3)
	bad, good := fc.nodes[0], fc.nodes[1]
	fc.nodes[2].set(failing)
	composed := []string{}
	for _, r := range table(t) {
		if strings.HasPrefix(r.path, opsPrefix) {
			composed = append(composed, r.path)
		}
	}
	for _, f := range []fault{garbage, wrongVersion, failing} {
		bad.set(f)
		srv := edge(t, auth.Lanes{}, deadURL(t), bad.srv.URL, good.srv.URL, fc.nodes[2].srv.URL)
		for _, path := range composed {
			status, body := get(t, srv.URL+example(path), "")
			data := assertEnvelope(t, status, body)
			raw, _ := json.Marshal(data)
			if strings.Contains(string(raw), `.v2"`) {
				t.Errorf("fault %d, %s: served another contract version's data: %s", f, path, raw)
			}
		}
	}

	// No validator within the contract.
	for _, f := range []fault{garbage, wrongVersion} {
		bad.set(f)
		for _, urls := range [][]string{{bad.srv.URL}, {deadURL(t), bad.srv.URL}} {
			srv := edge(t, auth.Lanes{}, urls...)
			for _, path := range composed {
				status, body := get(t, srv.URL+example(path), "")
				if path == "/ops/v1/health" {
					// /health carries no marker: only garbage is refused.
					if d := assertEnvelope(t, status, body); f == garbage && (d["status"] != "critical" || d["reachable"] != float64(0)) {
						t.Errorf("garbage: health %v", d)
					}
					continue
				}
				e := assertError(t, status, http.StatusBadGateway, body, CodeSourceInvalid, false)
				if e["sourceRoute"] == nil || len(e["sources"].([]any)) == 0 {
					t.Errorf("%s: the error names no source: %v", path, e)
				}
			}
		}
	}
	// No validator at all.
	srv := edge(t, auth.Lanes{}, deadURL(t), fc.nodes[2].srv.URL)
	for _, path := range composed {
		status, body := get(t, srv.URL+example(path), "")
		if path == "/ops/v1/health" {
			assertEnvelope(t, status, body) // it says that none is healthy
		} else {
			assertError(t, status, http.StatusBadGateway, body, CodeSourceUnavailable, true)
		}
	}
}

func TestWrongVersionNamesTheMarker(t *testing.T) {
	fc := newCluster(t, 1)
	fc.nodes[0].set(wrongVersion)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	status, body := get(t, srv.URL+"/ops/v1/proposals/epochs", "")
	e := assertError(t, status, http.StatusBadGateway, body, CodeSourceInvalid, false)
	sources := e["sources"].([]any)
	last := sources[len(sources)-1].(map[string]any)
	if !strings.Contains(last["error"].(string), `"proposal.epoch-overlay.v2"`) || e["sourceRoute"] != srcEpochs {
		t.Fatalf("error %v", e)
	}
}

func TestAMissingFieldIsRefused(t *testing.T) {
	fc := newCluster(t, 1)
	fc.nodes[0].answer(srcFinality, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"contractVersion":"finality.v1","currentEpoch":3}`))
	})
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	status, body := get(t, srv.URL+"/ops/v1/finality", "")
	assertError(t, status, http.StatusBadGateway, body, CodeSourceInvalid, false)
}

func TestHealth(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	data := getData(t, srv.URL+"/ops/v1/health")
	if data["status"] != "healthy" {
		t.Fatalf("three healthy validators: %v", data)
	}
	checks := data["checks"].(map[string]any)
	for _, name := range []string{"cluster", "storage", "chain", "nats", "api"} {
		if checks[name].(map[string]any)["status"] != "ok" {
			t.Fatalf("check %s: %v", name, checks)
		}
	}

	srv = edge(t, auth.Lanes{}, fc.nodes[0].srv.URL, fc.nodes[1].srv.URL, deadURL(t))
	if data := getData(t, srv.URL+"/ops/v1/health"); data["status"] != "degraded" || data["reachable"] != float64(2) {
		t.Fatalf("one validator down: %v", data)
	}
	// A validator with a failing check answers 503 with its body.
	fc.nodes[1].answer(srcHealth, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"unavailable","checks":{"storage":{"status":"failing","detail":"disk full"}}}`))
	})
	data = getData(t, srv.URL+"/ops/v1/health")
	if data["status"] != "critical" || data["reachable"] != float64(2) ||
		data["checks"].(map[string]any)["storage"].(map[string]any)["detail"] != "disk full" {
		t.Fatalf("quorum not healthy: %v", data)
	}
}

func TestCluster(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.nodes[0].srv.URL, fc.nodes[1].srv.URL, deadURL(t))
	data := getData(t, srv.URL+"/ops/v1/cluster")
	if data["leaderNodeId"] != "validator-1" || data["reachable"] != float64(2) || data["quorum"] != float64(2) ||
		data["stateHashAgreement"] != true || data["comparedAt"] != float64(12) {
		t.Fatalf("cluster %v", data)
	}
	nodes := data["nodes"].([]any)
	if len(nodes) != 3 || nodes[2].(map[string]any)["reachable"] != false || nodes[0].(map[string]any)["comparedHash"] != "0xaa" {
		t.Fatalf("nodes %v", nodes)
	}
	fc.hashAt = func(id uint64) string { return "0x" + strings.Repeat("b", int(id)) }
	if data := getData(t, srv.URL+"/ops/v1/cluster"); data["stateHashAgreement"] != false {
		t.Fatalf("diverged hashes not flagged: %v", data)
	}
}

func TestLeaderViews(t *testing.T) {
	fc := newCluster(t, 3)
	// The edge asks a follower first; the leader answers.
	srv := edge(t, auth.Lanes{}, fc.nodes[1].srv.URL, fc.nodes[0].srv.URL)
	if data := getData(t, srv.URL+"/ops/v1/raft"); data["role"] != api.RoleLeader || data["nodeId"] != "validator-1" {
		t.Fatalf("raft view not from the leader: %v", data)
	}
	data := getData(t, srv.URL+"/ops/v1/replication")
	if data["maxLagEntries"] != float64(3) || data["fromLeader"] != true || len(data["nodes"].([]any)) != 2 {
		t.Fatalf("replication %v", data)
	}
	// Each follower's head report and its agreement (docs/adr/0038).
	if head, _ := data["nodes"].([]any)[0].(map[string]any)["head"].(map[string]any); head["agreement"] != api.HeadAgrees || head["segmentIndex"] != float64(8) {
		t.Fatalf("replication node without its head: %v", data["nodes"])
	}
	data = getData(t, srv.URL+"/ops/v1/queue")
	if data["pending"] != float64(8) || data["inFlight"] != float64(2) || data["oldestPendingAgeMs"] != float64(1500) ||
		data["commitPerSec"] != float64(11) || data["contractVersion"] != api.QueueStatsVersion {
		t.Fatalf("queue %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/proposals")
	states := data["states"].(map[string]any)
	if states["pending"] != float64(3) || states["verified"] != float64(5) || states["committed"] != float64(6) ||
		states["finalized"] != float64(4) || data["rejectionsByReason"].(map[string]any)["payment_not_found"] != float64(2) {
		t.Fatalf("rollup %v", data)
	}
	for route, check := range map[string]func(map[string]any) bool{
		"/ops/v1/proposals/release-flow": func(d map[string]any) bool { return d["governor"].(map[string]any)["state"] == "open" },
		"/ops/v1/explorer/release-flow":  func(d map[string]any) bool { return d["governor"].(map[string]any)["state"] == "holding" },
		"/ops/v1/proposals/epochs":       func(d map[string]any) bool { return d["contractVersion"] == api.EpochOverlayVersion },
		"/ops/v1/finality":               func(d map[string]any) bool { return d["committedUnfinalized"] == float64(5) },
		"/ops/v1/explorer/summary":       func(d map[string]any) bool { return d["queue"].(map[string]any)["pending"] == float64(8) },
		"/ops/v1/blockchain/config":      func(d map[string]any) bool { return d["prices"].(map[string]any)["standard"] != nil },
	} {
		if data := getData(t, srv.URL+route); !check(data) || data["sources"] == nil {
			t.Errorf("%s: %v", route, data)
		}
	}
}

func TestOverviewAndSignals(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	data := getData(t, srv.URL+"/ops/v1/overview")
	queue := data["queue"].(map[string]any)
	if data["status"] != "healthy" || data["leader"].(map[string]any)["nodeId"] != "validator-1" ||
		data["leader"].(map[string]any)["since"] == nil || data["cluster"].(map[string]any)["nodeCount"] != float64(3) ||
		queue["pending"] != float64(3) || queue["verified"] != float64(3) || queue["inFlight"] != float64(2) ||
		data["replication"].(map[string]any)["maxLagMs"] != float64(600) || data["stateHashAgreement"] != true {
		t.Fatalf("overview %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/signals")
	if data["status"] != "ok" || len(data["gaps"].([]any)) != 0 {
		t.Fatalf("signals %v", data)
	}
	signals := map[string]map[string]any{}
	for _, s := range data["signals"].([]any) {
		s := s.(map[string]any)
		if unknown := s["value"] == nil; unknown != (s["severity"] == "unknown") {
			t.Errorf("signal %v", s)
		}
		signals[s["id"].(string)] = s
	}
	// The disk of the fullest validator; the wallets GC debt blocks.
	if d := signals["diskUse"]; d["value"] != 0.53 || d["severity"] != "ok" || d["source"] != srcStorage {
		t.Errorf("disk use %v", d)
	}
	if g := signals["gcDebtBlocks"]; g["value"] != float64(0) || g["severity"] != "ok" || g["source"] != srcGcStatus {
		t.Errorf("GC debt blocks %v", g)
	}
	if o := signals["paymentOrphaned"]; o["value"] != float64(0) || o["severity"] != "ok" || o["source"] != srcCounts {
		t.Errorf("orphaned payments %v", o)
	}

	// A blocked wallet warns, a disk past 90 % is critical; a validator
	// without the storage routes leaves those signals unknown, and only
	// them.
	fc.nodes[1].answer(srcGcStatus, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.GcStatus{ContractVersion: api.GcStatusVersion, Debt: api.GcDebt{WalletsBlocked: 2}})
	})
	one := edge(t, auth.Lanes{}, fc.nodes[1].srv.URL)
	if d := getData(t, one.URL+"/ops/v1/signals"); d["status"] != "warn" {
		t.Fatalf("a blocked wallet: %v", d)
	}
	fc.nodes[1].answer(srcStorage, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.StorageSnapshot{ContractVersion: api.StorageSnapshotVersion, Disk: &api.DiskUsage{UsedRatio: 0.95},
			Tars: api.TarSummary{TargetBytes: 256 << 20}})
	})
	if d := getData(t, one.URL+"/ops/v1/overview"); d["status"] != "critical" {
		t.Fatalf("a full disk: %v", d)
	}
	for _, route := range []string{srcGcStatus, srcStorage} {
		fc.nodes[1].answer(route, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
	}
	// (An edge of one validator has no GC run hashes to compare either.)
	d := getData(t, one.URL+"/ops/v1/signals")
	if d["status"] != "ok" || len(d["gaps"].([]any)) != 3 {
		t.Fatalf("no storage routes: %v", d)
	}
	for _, s := range d["signals"].([]any) {
		s := s.(map[string]any)
		if id := s["id"]; (id == "diskUse" || id == "gcDebtBlocks" || id == "gcHashDisagreement") != (s["severity"] == "unknown") {
			t.Errorf("no storage routes: signal %v", s)
		}
	}

	// A committed proposal whose payment a reorg took back is critical.
	fc.nodes[2].answer(srcCounts, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.ProposalCounts{ContractVersion: api.ProposalCountsVersion, Committed: 10, PaymentOrphaned: 1,
			RejectedByReason: map[string]uint64{}})
	})
	if d := getData(t, edge(t, auth.Lanes{}, fc.nodes[2].srv.URL).URL+"/ops/v1/overview"); d["status"] != "critical" {
		t.Fatalf("an orphaned payment: %v", d)
	}

	// Backpressure warns, a disagreement is critical, and the overview
	// says what the signals say.
	fc.nodes[0].answer(srcQueueStats, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.QueueStats{ContractVersion: api.QueueStatsVersion, BackpressureActive: true})
	})
	if d := getData(t, srv.URL+"/ops/v1/overview"); d["status"] != "degraded" {
		t.Fatalf("backpressure: %v", d)
	}
	fc.nodes[0].answer(srcClusterHealth, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.ClusterHealth{ContractVersion: api.ClusterHealthVersion, Status: "unavailable", Quorum: 2,
			Reachable: 3, Leader: 1, Nodes: make([]api.NodeHealth, 3)})
	})
	srv = edge(t, auth.Lanes{}, fc.nodes[0].srv.URL)
	data = getData(t, srv.URL+"/ops/v1/signals")
	if data["status"] != "critical" {
		t.Fatalf("state hashes disagree: %v", data)
	}
	if d := getData(t, srv.URL+"/ops/v1/overview"); d["status"] != "critical" || d["stateHashAgreement"] != false {
		t.Fatalf("overview: %v", d)
	}
}

func TestGapsAreSaid(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	for route, nulls := range map[string][]string{
		"/ops/v1/runtime/blobstore":    {"gatewayUrl", "lastCheck"},
		"/ops/v1/runtime/storage":      {},
		"/ops/v1/tarmk":                {"packingEfficiency"},
		"/ops/v1/gc/status":            {"lastRun"},
		"/ops/v1/compaction/proposals": {},
	} {
		data := getData(t, srv.URL+route)
		for _, k := range nulls {
			if v, ok := data[k]; !ok || v != nil {
				t.Errorf("%s: %s is %v, want null", route, k, v)
			}
		}
		if len(data["gaps"].([]any)) == 0 {
			t.Errorf("%s: no gaps said: %v", route, data)
		}
	}
	// The figures the validators publish leave no gap.
	for _, route := range []string{"/ops/v1/header", "/ops/v1/durability", "/ops/v1/runtime/msgbus", "/ops/v1/runtime/media-driver"} {
		if gaps := getData(t, srv.URL+route)["gaps"].([]any); len(gaps) != 0 {
			t.Errorf("%s: gaps %v", route, gaps)
		}
	}
	data := getData(t, srv.URL+"/ops/v1/header")
	if data["mode"] != "TESTNET" || data["network"].(map[string]any)["name"] != "sepolia" || data["leader"] != "validator-1" ||
		data["version"] != fakeVersion {
		t.Errorf("header %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/durability")
	if data["lastCommitAt"] != "2026-03-01T12:01:00Z" {
		t.Errorf("durability %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/network")
	if data["nats"].(map[string]any)["connected"] != true || len(data["peers"].([]any)) != 3 || data["measuredFrom"] == "" {
		t.Errorf("network %v", data)
	}
	// 3 validators, 2 links each, 3 timeouts a link.
	data = getData(t, srv.URL+"/ops/v1/runtime/media-driver")
	if totals := data["totals"].(map[string]any); totals["reconnects"] != float64(12) || totals["timeouts"] != float64(18) {
		t.Errorf("media driver %v", data)
	}
	link := data["validators"].([]any)[0].(map[string]any)["peers"].([]any)[0].(map[string]any)
	if link["timeouts"] != float64(3) {
		t.Errorf("media driver link %v", link)
	}
	data = getData(t, srv.URL+"/ops/v1/runtime/msgbus")
	vs := data["validators"].([]any)
	if len(vs) != 3 || len(vs[0].(map[string]any)["peers"].([]any)) != 2 || data["membership"].(map[string]any)["quorum"] != float64(2) {
		t.Errorf("msgbus %v", data)
	}
	nats := data["nats"].(map[string]any)
	natsVs := nats["validators"].([]any)
	if nats["connected"] != true || len(natsVs) != 3 {
		t.Fatalf("msgbus nats %v", nats)
	}
	v := natsVs[1].(map[string]any)
	conns := v["connections"].([]any)
	if v["nodeId"] != "validator-2" || v["reachable"] != true || len(conns) != 1 {
		t.Fatalf("msgbus nats of validator-2 %v", v)
	}
	if c := conns[0].(map[string]any); c["connected"] != true || c["inMsgs"] != float64(200) || c["serverUrl"] != "nats://127.0.0.1:4222" ||
		len(c["uses"].([]any)) != 4 {
		t.Errorf("msgbus nats connection %v", c)
	}
}

// TestGapsOfValidatorsBeforeTheFigures: validators that answer without
// the software version, the last commit's time, their NATS connections or
// their transport timeouts (a version from before them) leave those
// figures null, and the views say why.
func TestGapsOfValidatorsBeforeTheFigures(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	for _, f := range fc.nodes {
		without(f, "/v1/explorer/summary", "identity", "version")
		without(f, "/v1/finality", "lastCommitAt")
		without(f, "/v1/ops/snapshots/runtime", "nats")
		f.answer("/v1/peers", func(w http.ResponseWriter, r *http.Request) {
			_, body := f.body(r)
			peers := body.(api.Peers)
			for i := range peers.Peers {
				if tr := peers.Peers[i].Transport; tr != nil {
					tr.Timeouts = nil
				}
			}
			_ = json.NewEncoder(w).Encode(peers)
		})
	}
	for route, field := range map[string]string{
		"/ops/v1/header":               "version",
		"/ops/v1/durability":           "lastCommitAt",
		"/ops/v1/runtime/msgbus":       "nats.validators[].connections",
		"/ops/v1/runtime/media-driver": "totals.timeouts",
	} {
		data := getData(t, srv.URL+route)
		gaps := data["gaps"].([]any)
		if len(gaps) != 1 || gaps[0].(map[string]any)["field"] != field || gaps[0].(map[string]any)["sourceRoute"] == "" {
			t.Errorf("%s: gaps %v, want one of %s", route, gaps, field)
		}
	}
	if v := getData(t, srv.URL+"/ops/v1/header")["version"]; v != nil {
		t.Errorf("header version %v", v)
	}
	if v := getData(t, srv.URL+"/ops/v1/durability")["lastCommitAt"]; v != nil {
		t.Errorf("durability lastCommitAt %v", v)
	}
	if nats := getData(t, srv.URL+"/ops/v1/runtime/msgbus")["nats"].(map[string]any); nats["connected"] != nil ||
		nats["validators"].([]any)[0].(map[string]any)["connections"] != nil {
		t.Errorf("msgbus nats %v", nats)
	}
	if totals := getData(t, srv.URL+"/ops/v1/runtime/media-driver")["totals"].(map[string]any); totals["timeouts"] != nil {
		t.Errorf("media driver totals %v", totals)
	}
}

// TestMsgbusNATS: one validator's connection down makes nats.connected
// false; validators using no NATS (MOCK) leave it null; no validator
// answering the runtime snapshot leaves nats null, and the raft transport
// is still served.
func TestMsgbusNATS(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.urls()...)
	runtime := func(f *fake, edit func(*api.RuntimeSnapshot)) {
		f.answer("/v1/ops/snapshots/runtime", func(w http.ResponseWriter, r *http.Request) {
			_, body := f.body(r)
			rt := body.(api.RuntimeSnapshot)
			edit(&rt)
			_ = json.NewEncoder(w).Encode(rt)
		})
	}
	runtime(fc.nodes[2], func(rt *api.RuntimeSnapshot) {
		rt.NATS[0].Connected, rt.NATS[0].Status, rt.NATS[0].ServerURL, rt.NATS[0].LastError = false, "RECONNECTING", "", "nats: timeout"
	})
	if nats := getData(t, srv.URL+"/ops/v1/runtime/msgbus")["nats"].(map[string]any); nats["connected"] != false {
		t.Errorf("one connection down: %v", nats)
	}

	mock := newCluster(t, 3)
	for _, f := range mock.nodes {
		runtime(f, func(rt *api.RuntimeSnapshot) { rt.NATS = []api.NATSConnection{} })
	}
	data := getData(t, edge(t, auth.Lanes{}, mock.urls()...).URL+"/ops/v1/runtime/msgbus")
	if nats := data["nats"].(map[string]any); nats["connected"] != nil || len(data["gaps"].([]any)) != 0 {
		t.Errorf("no NATS used: %v", data)
	}

	silent := newCluster(t, 3)
	for _, f := range silent.nodes {
		f.answer("/v1/ops/snapshots/runtime", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	}
	data = getData(t, edge(t, auth.Lanes{}, silent.urls()...).URL+"/ops/v1/runtime/msgbus")
	gaps := data["gaps"].([]any)
	if data["nats"] != nil || len(data["validators"].([]any)) != 3 || len(gaps) != 1 || gaps[0].(map[string]any)["field"] != "nats" {
		t.Errorf("no runtime snapshot: %v", data)
	}
}

// without answers path as the fake does, less the member at keys (a path
// into the JSON body).
func without(f *fake, path string, keys ...string) {
	f.answer(path, func(w http.ResponseWriter, r *http.Request) {
		_, body := f.body(r)
		raw, _ := json.Marshal(body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		at := m
		for _, k := range keys[:len(keys)-1] {
			at = at[k].(map[string]any)
		}
		delete(at, keys[len(keys)-1])
		_ = json.NewEncoder(w).Encode(m)
	})
}

// TestLivenessNamesTheVersion: the edge's /health names its own version,
// and asks no validator for it.
func TestLivenessNamesTheVersion(t *testing.T) {
	srv := edge(t, auth.Lanes{APIToken: "general"}, deadURL(t))
	status, body := get(t, srv.URL+"/health", "")
	if status != http.StatusOK || body["status"] != "ok" || body["version"] != fakeEdgeVersion {
		t.Fatalf("/health: %d %v", status, body)
	}
}

func TestDocumentsAreServed(t *testing.T) {
	srv := edge(t, auth.Lanes{}, deadURL(t))
	docs, _ := documents(t)
	for path, want := range map[string][]byte{"/openapi.yaml": docs.EdgeYAML, "/openapi-validator-source.yaml": docs.SourceYAML} {
		status, header, raw := fetch(t, http.MethodGet, srv.URL+path, "")
		if status != http.StatusOK || string(raw) != string(want) || header.Get("Content-Type") != "application/yaml" {
			t.Errorf("%s: %d %s", path, status, header.Get("Content-Type"))
		}
	}
}

// TestStorageViews: the storage, GC, fragmentation and runtime views, from
// the source routes of the same name.
func TestStorageViews(t *testing.T) {
	fc := newCluster(t, 3)
	srv := edge(t, auth.Lanes{}, fc.nodes[1].srv.URL, fc.nodes[0].srv.URL, deadURL(t))

	data := getData(t, srv.URL+"/ops/v1/runtime/storage")
	vs := data["validators"].([]any)
	if len(vs) != 3 || vs[2].(map[string]any)["reachable"] != false || vs[2].(map[string]any)["error"] == "" {
		t.Fatalf("storage validators %v", vs)
	}
	v := vs[1].(map[string]any)
	if v["nodeId"] != "validator-1" || v["diskUse"] != 0.51 || v["l0Files"] != float64(2) || v["writeStalls"] != nil ||
		v["segmentCount"] != float64(4) || v["generationCount"] != float64(1) || v["pebble"].(map[string]any)["fsync"] == nil {
		t.Fatalf("storage of validator-1: %v", v)
	}
	if gaps := data["gaps"].([]any); len(gaps) != 2 || gaps[0].(map[string]any)["field"] != "validators[].pebble.writeStalls" {
		t.Fatalf("storage gaps said once per field: %v", gaps)
	}

	data = getData(t, srv.URL+"/ops/v1/runtime/metrics")
	vs = data["validators"].([]any)
	if v := vs[0].(map[string]any); len(vs) != 3 || v["nodeId"] != "validator-2" || v["goroutines"] != float64(80) ||
		v["process"].(map[string]any)["rssBytes"] != float64(50<<20) || len(data["gaps"].([]any)) != 0 {
		t.Fatalf("runtime metrics %v", data)
	}

	// The leader's views, although a follower is asked first.
	data = getData(t, srv.URL+"/ops/v1/runtime/blobstore")
	if data["nodeId"] != "validator-1" || data["cidMappings"] != float64(2) || data["gatewayUrl"] != nil || len(data["gaps"].([]any)) != 2 {
		t.Fatalf("blobstore %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/tarmk")
	if data["nodeId"] != "validator-1" || data["tarFiles"] != float64(1) || data["segments"] != float64(4) || data["packingEfficiency"] != nil ||
		data["chainVerified"] != true || data["newest"] != "data00000a.tar" {
		t.Fatalf("tarmk %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/tar-chain")
	if tars := data["tars"].([]any); len(tars) != 1 || tars[0].(map[string]any)["headHash"] != data["headHash"] || data["chainVerified"] != true {
		t.Fatalf("tar chain %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/gc/status")
	if data["contractVersion"] != api.GcStatusVersion || data["nodeId"] != float64(1) || data["lastRun"] != nil ||
		data["debt"].(map[string]any)["pendingDebt"] != "0.10" {
		t.Fatalf("gc status %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/gc/estimate")
	if data["contractVersion"] != api.GcEstimateVersion || data["reclaimableBytes"] != float64(500) || len(data["byTar"].([]any)) != 1 {
		t.Fatalf("gc estimate %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/compaction/proposals")
	if data["contractVersion"] != api.CompactionProposalsVersion || len(data["proposals"].([]any)) != 0 || len(data["gaps"].([]any)) != 1 {
		t.Fatalf("compaction proposals %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/fragmentation/metrics")
	if data["totals"].(map[string]any)["deadBytes"] != float64(200) || len(data["wallets"].([]any)) != 1 || data["nodeId"] != float64(1) {
		t.Fatalf("fragmentation %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/fragmentation/metrics/0x"+strings.ToUpper(knownWallet[2:]))
	if data["wallet"] != knownWallet || data["deadBytes"] != float64(200) || data["contractVersion"] != api.FragmentationWalletVersion {
		t.Fatalf("one wallet %v", data)
	}
	status, body := get(t, srv.URL+"/ops/v1/fragmentation/metrics/0x"+strings.Repeat("3", 40), "")
	assertError(t, status, http.StatusNotFound, body, CodeNotFound, false)

	// The leader's fsync figures fill the durability view, with the last
	// commit's time: nothing is left unknown.
	data = getData(t, srv.URL+"/ops/v1/durability")
	if f := data["fsync"].(map[string]any); f["p50Ms"] != 0.5 || f["p99Ms"] != 2.0 || f["nodeId"] != "validator-1" || len(data["gaps"].([]any)) != 0 ||
		data["lastCommitAt"] == nil {
		t.Fatalf("durability %v", data)
	}
}

// TestBlobstoreGateway: the blob-store view carries the leader's IPFS
// gateway and its last check; a gateway not checked yet leaves only the
// check unknown, and a failed check is a figure, not a gap. Each answer is
// held to the document.
func TestBlobstoreGateway(t *testing.T) {
	docs, _ := documents(t)
	codes := map[string]bool{}
	for _, c := range errorCodes(t, docs.Edge) {
		codes[c.Code] = true
	}
	fc := newCluster(t, 3)
	leader := fc.nodes[0]
	gatewayURL := "https://user:xxxxx@ipfs.example"
	checkedAt := time.Date(2026, 3, 1, 11, 59, 30, 0, time.UTC)
	status := http.StatusOK
	for name, tc := range map[string]struct {
		lastCheck *time.Time
		check     *api.GatewayCheck
		gaps      []api.Gap
		want      map[string]any // of data["check"]; nil: null
	}{
		"not checked yet": {gaps: []api.Gap{{Field: "blobstore.lastCheck", Reason: "the first check has not ended yet"}}},
		"answers": {lastCheck: &checkedAt, check: &api.GatewayCheck{OK: true, StatusCode: &status, LatencyMs: 42.5},
			want: map[string]any{"ok": true, "statusCode": float64(200), "latencyMs": 42.5}},
		"unreachable": {lastCheck: &checkedAt, check: &api.GatewayCheck{LatencyMs: 1.25, Error: "connection refused"},
			want: map[string]any{"ok": false, "statusCode": nil, "latencyMs": 1.25, "error": "connection refused"}},
	} {
		leader.answer(srcRuntime, func(w http.ResponseWriter, r *http.Request) {
			_, body := leader.body(r)
			rt := body.(api.RuntimeSnapshot)
			rt.Blobstore.GatewayURL, rt.Blobstore.LastCheck, rt.Blobstore.Check, rt.Gaps = &gatewayURL, tc.lastCheck, tc.check, tc.gaps
			_ = json.NewEncoder(w).Encode(rt)
		})
		u := edge(t, auth.Lanes{}, fc.urls()...).URL + "/ops/v1/runtime/blobstore"
		code, header, raw := fetch(t, http.MethodGet, u, "")
		validate(t, docs.Edge, "/ops/v1/runtime/blobstore", code, header, raw, codes)
		data := getData(t, u)
		if data["gatewayUrl"] != gatewayURL || data["cidMappings"] != float64(2) || len(data["gaps"].([]any)) != len(tc.gaps) {
			t.Errorf("%s: blobstore %v", name, data)
		}
		if tc.want == nil {
			if data["lastCheck"] != nil || data["check"] != nil {
				t.Errorf("%s: lastCheck %v, check %v; want null", name, data["lastCheck"], data["check"])
			}
			continue
		}
		if data["lastCheck"] != "2026-03-01T11:59:30Z" || !reflect.DeepEqual(data["check"], tc.want) {
			t.Errorf("%s: lastCheck %v, check %v; want %v", name, data["lastCheck"], data["check"], tc.want)
		}
	}
}

// TestConfigViews: values, sources and delta side by side for every
// validator (settings differ by validator); schema and coverage from the
// leader.
func TestConfigViews(t *testing.T) {
	fc := newCluster(t, 2)
	srv := edge(t, auth.Lanes{}, fc.nodes[1].srv.URL, fc.nodes[0].srv.URL, deadURL(t))
	data := getData(t, srv.URL+"/ops/v1/config/osgi")
	vs := data["validators"].([]any)
	if len(vs) != 3 || vs[2].(map[string]any)["reachable"] != false {
		t.Fatalf("validators %v", vs)
	}
	v := vs[0].(map[string]any)
	if v["nodeId"] != "validator-2" || v["reloadMode"] != "restart" ||
		v["components"].(map[string]any)["node"].(map[string]any)["SVC_VALIDATOR_NODE_ID"] != float64(2) {
		t.Fatalf("values of validator-2: %v", v)
	}
	data = getData(t, srv.URL+"/ops/v1/config/osgi/delta")
	vs = data["validators"].([]any)
	if len(vs[0].(map[string]any)["changed"].([]any)) != 1 || len(vs[1].(map[string]any)["changed"].([]any)) != 0 {
		t.Fatalf("delta %v", vs)
	}
	data = getData(t, srv.URL+"/ops/v1/config/osgi/sources")
	if gaps := data["gaps"].([]any); len(gaps) != 1 || gaps[0].(map[string]any)["field"] != "validators[].file" ||
		len(data["validators"].([]any)[1].(map[string]any)["sources"].([]any)) != 2 {
		t.Fatalf("sources %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/config/osgi/schema")
	if data["nodeId"] != float64(1) || len(data["entries"].([]any)) != 2 || data["contractVersion"] != api.ConfigSchemaVersion {
		t.Fatalf("schema %v", data)
	}
	data = getData(t, srv.URL+"/ops/v1/config/osgi/coverage")
	if data["nodeId"] != float64(1) || data["notImplemented"] != float64(1) || len(data["gaps"].([]any)) != 1 {
		t.Fatalf("coverage %v", data)
	}
}
