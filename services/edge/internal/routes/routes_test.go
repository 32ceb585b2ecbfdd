package routes

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/services/edge/internal/auth"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
)

const knownID = "0x1111111111111111111111111111111111111111111111111111111111111111"

// validator stands in for a validator's HTTP routes; the end-to-end test in
// tests/ runs the edge against real validators.
func validator(t *testing.T, healthy bool) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		status := "ok"
		if !healthy {
			status = "unavailable"
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "checks": map[string]any{"storage": map[string]any{"status": "ok", "detail": "pebble"}}})
	})
	mux.HandleFunc("/v1/proposals/{id}/status", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != knownID {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no","retryable":false}}`))
			return
		}
		_, _ = w.Write([]byte(`{"proposalId":"` + knownID + `","status":"COMMITTED","payment":{"txHash":"0xab"}}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func deadURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

func serve(t *testing.T, lanes auth.Lanes, urls ...string) *httptest.Server {
	pool, err := upstream.NewPool(urls, time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Config{ClusterID: "test", Lanes: lanes}, pool, zap.NewNop()))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: body is not JSON: %v", url, err)
	}
	return resp.StatusCode, body
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func assertEnvelope(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	got := keys(body)
	if len(got) != 4 || got[0] != "clusterId" || got[1] != "data" || got[2] != "generatedAt" || got[3] != "version" || body["version"] != "v1" {
		t.Fatalf("not an ops envelope: %v", body)
	}
	if _, err := time.Parse(time.RFC3339, body["generatedAt"].(string)); err != nil {
		t.Fatalf("generatedAt: %v", err)
	}
	return body["data"].(map[string]any)
}

func assertError(t *testing.T, status, wantStatus int, body map[string]any, code string, retryable bool) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d: %v", status, wantStatus, body)
	}
	got := keys(body)
	if len(got) != 3 || got[0] != "error" || got[1] != "generatedAt" || got[2] != "version" {
		t.Fatalf("not an ops error envelope: %v", body)
	}
	e := body["error"].(map[string]any)
	if e["code"] != code || e["retryable"] != retryable || e["message"] == "" {
		t.Fatalf("error %v, want code %s retryable %v", e, code, retryable)
	}
}

func TestProposalDetail(t *testing.T) {
	srv := serve(t, auth.Lanes{}, deadURL(t), validator(t, true).URL)

	status, body := get(t, srv.URL+"/ops/v1/explorer/proposal/"+knownID, "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, body)
	}
	data := assertEnvelope(t, body)
	if data["proposal"].(map[string]any)["status"] != "COMMITTED" || data["transaction"].(map[string]any)["txHash"] != "0xab" {
		t.Fatalf("data %v", data)
	}
	sources := data["sources"].([]any)
	if len(sources) != 2 || sources[0].(map[string]any)["ok"] != false || sources[1].(map[string]any)["ok"] != true {
		t.Fatalf("sources do not show the failover: %v", sources)
	}

	status, body = get(t, srv.URL+"/ops/v1/explorer/proposal/0x"+knownID[4:]+"22", "")
	assertError(t, status, http.StatusNotFound, body, CodeNotFound, false)
	status, body = get(t, srv.URL+"/ops/v1/explorer/proposal/nothex", "")
	assertError(t, status, http.StatusNotFound, body, CodeNotFound, false)
	status, body = get(t, srv.URL+"/ops/v1/no-such-route", "")
	assertError(t, status, http.StatusNotFound, body, CodeRouteNotFound, false)
}

func TestSourceUnavailable(t *testing.T) {
	srv := serve(t, auth.Lanes{}, deadURL(t))
	status, body := get(t, srv.URL+"/ops/v1/explorer/proposal/"+knownID, "")
	assertError(t, status, http.StatusBadGateway, body, CodeSourceUnavailable, true)

	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>")) }))
	defer garbage.Close()
	srv = serve(t, auth.Lanes{}, garbage.URL)
	status, body = get(t, srv.URL+"/ops/v1/explorer/proposal/"+knownID, "")
	assertError(t, status, http.StatusBadGateway, body, CodeSourceInvalid, false)
}

func TestHealth(t *testing.T) {
	srv := serve(t, auth.Lanes{}, validator(t, true).URL, validator(t, true).URL, validator(t, true).URL)
	_, body := get(t, srv.URL+"/ops/v1/health", "")
	data := assertEnvelope(t, body)
	if data["status"] != "healthy" {
		t.Fatalf("three healthy validators: %v", data)
	}
	checks := data["checks"].(map[string]any)
	for _, name := range []string{"cluster", "storage", "chain", "nats", "api"} {
		if _, ok := checks[name].(map[string]any)["status"]; !ok {
			t.Fatalf("check %s missing: %v", name, checks)
		}
	}

	srv = serve(t, auth.Lanes{}, validator(t, true).URL, validator(t, true).URL, deadURL(t))
	_, body = get(t, srv.URL+"/ops/v1/health", "")
	if data := assertEnvelope(t, body); data["status"] != "degraded" || data["reachable"] != float64(2) {
		t.Fatalf("one validator down: %v", data)
	}
	srv = serve(t, auth.Lanes{}, validator(t, true).URL, validator(t, false).URL, deadURL(t))
	_, body = get(t, srv.URL+"/ops/v1/health", "")
	if data := assertEnvelope(t, body); data["status"] != "critical" {
		t.Fatalf("quorum not healthy: %v", data)
	}
}

func TestAuthLanes(t *testing.T) {
	srv := serve(t, auth.Lanes{APIToken: "general", RuntimeToken: "runtime"}, validator(t, true).URL)
	status, body := get(t, srv.URL+"/ops/v1/health", "")
	assertError(t, status, http.StatusUnauthorized, body, CodeUnauthorized, false)
	status, body = get(t, srv.URL+"/ops/v1/health", "wrong")
	assertError(t, status, http.StatusForbidden, body, CodeForbidden, false)
	if status, body = get(t, srv.URL+"/ops/v1/health", "general"); status != http.StatusOK {
		t.Fatalf("general token refused: %d %v", status, body)
	}
}

func TestCluster(t *testing.T) {
	// status is a validator at appliedIndex whose state hash at index 9 was
	// hashAt9.
	status := func(id uint64, role string, appliedIndex uint64, hashAt9 string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/consensus/state-hash":
				if r.URL.Query().Get("index") != "9" {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "consensus.state-hash.v1", "nodeId": id, "index": 9, "stateHash": hashAt9})
			default:
				_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "consensus.status.v1", "nodeId": id,
					"name": "validator-" + string(rune('0'+id)), "role": role, "term": 3, "appliedIndex": appliedIndex,
					"commitIndex": appliedIndex, "stateHash": fmt.Sprintf("0xnow%d", id)})
			}
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	srv := serve(t, auth.Lanes{}, status(1, "LEADER", 12, "0xaa").URL, status(2, "FOLLOWER", 9, "0xaa").URL, deadURL(t))
	_, body := get(t, srv.URL+"/ops/v1/cluster", "")
	data := assertEnvelope(t, body)
	if data["leaderNodeId"] != "validator-1" || data["reachable"] != float64(2) || data["quorum"] != float64(2) ||
		data["stateHashAgreement"] != true || data["comparedAt"] != float64(9) {
		t.Fatalf("cluster %v", data)
	}
	nodes := data["nodes"].([]any)
	if len(nodes) != 3 || nodes[2].(map[string]any)["reachable"] != false || nodes[0].(map[string]any)["comparedHash"] != "0xaa" {
		t.Fatalf("nodes %v", nodes)
	}

	// Different indexes, and different hashes at the lower one.
	srv = serve(t, auth.Lanes{}, status(1, "LEADER", 12, "0xaa").URL, status(2, "FOLLOWER", 9, "0xbb").URL)
	_, body = get(t, srv.URL+"/ops/v1/cluster", "")
	if data := assertEnvelope(t, body); data["stateHashAgreement"] != false {
		t.Fatalf("diverged hashes at index 9 not flagged: %v", data)
	}
}

func TestRaftAndReplicationFromLeader(t *testing.T) {
	var leaderURL string
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/consensus/leader":
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "consensus.leader.v1", "known": true, "leaderId": 2, "leaderUrl": leaderURL})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "msgbus.raft-metrics.v1", "nodeId": 1, "role": "FOLLOWER"})
		}
	}))
	defer follower.Close()
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/msgbus/raft-metrics":
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "msgbus.raft-metrics.v1", "nodeId": 2, "role": "LEADER", "term": 4, "commitIndex": 10})
		case "/v1/msgbus/replication-lag":
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "msgbus.replication-lag.v1", "nodeId": 2, "isLeader": true, "leader": 2,
				"maxLagEntries": 3, "nodes": []any{map[string]any{"nodeId": 1, "name": "validator-1", "matchIndex": 7, "lagEntries": 3, "state": "replicate"}}})
		}
	}))
	defer leader.Close()
	leaderURL = leader.URL

	srv := serve(t, auth.Lanes{}, follower.URL, leader.URL)
	_, body := get(t, srv.URL+"/ops/v1/raft", "")
	if data := assertEnvelope(t, body); data["role"] != "LEADER" || data["term"] != float64(4) || data["nodeId"] != "validator-2" {
		t.Fatalf("raft view not from the leader: %v", data)
	}
	_, body = get(t, srv.URL+"/ops/v1/replication", "")
	data := assertEnvelope(t, body)
	if data["maxLagEntries"] != float64(3) || data["fromLeader"] != true || len(data["nodes"].([]any)) != 1 {
		t.Fatalf("replication %v", data)
	}

	wrong := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "msgbus.raft-metrics.v0"})
	}))
	defer wrong.Close()
	srv = serve(t, auth.Lanes{}, wrong.URL)
	status, body := get(t, srv.URL+"/ops/v1/raft", "")
	assertError(t, status, http.StatusBadGateway, body, CodeSourceInvalid, false)
}

func TestQueueFromLeader(t *testing.T) {
	stats := map[string]any{
		"contractVersion": "proposal.queue-stats.v1", "backpressureActive": true, "backpressurePendingRawCount": 4,
		"maxPendingMessages": 4, "batchQueueSize": 3, "queuedProposals": 6,
		"proposalsByEpoch":        map[string]any{"7": 10},
		"proposalsByEpochAndTier": map[string]any{"7": map[string]any{"standard": 10}},
		"pendingEpochStats":       []any{map[string]any{"epoch": 7, "pending": 10, "oldestAgeMs": 1500}},
		"currentEpoch":            7, "finalizedEpoch": 5, "epochsUntilFinality": 2, "verifiedCount": 3,
		"totalFinalizedCount": 0, "processedCount": 20, "ingressPerSec": 12.5, "commitPerSec": 11,
	}
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/consensus/leader":
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "consensus.leader.v1", "known": true, "leaderId": 1, "leaderUrl": "http://" + r.Host})
		case "/v1/proposals/queue/stats":
			_ = json.NewEncoder(w).Encode(stats)
		}
	}))
	defer leader.Close()
	srv := serve(t, auth.Lanes{}, leader.URL)
	_, body := get(t, srv.URL+"/ops/v1/proposals/queue/stats", "")
	data := assertEnvelope(t, body)
	for _, k := range []string{"backpressureActive", "backpressurePendingRawCount", "batchQueueSize", "proposalsByEpoch",
		"proposalsByEpochAndTier", "pendingEpochStats", "currentEpoch", "finalizedEpoch", "epochsUntilFinality",
		"verifiedCount", "totalFinalizedCount", "processedCount", "maxPendingMessages", "ingressPerSec", "commitPerSec", "sources"} {
		if _, ok := data[k]; !ok {
			t.Errorf("queue stats without %s: %v", k, data)
		}
	}
	_, body = get(t, srv.URL+"/ops/v1/queue", "")
	data = assertEnvelope(t, body)
	if data["pending"] != float64(10) || data["inFlight"] != float64(4) || data["oldestPendingAgeMs"] != float64(1500) ||
		data["backpressureActive"] != true || data["commitPerSec"] != float64(11) {
		t.Fatalf("queue summary %v", data)
	}

	wrong := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "proposal.queue-stats.v0"})
	}))
	defer wrong.Close()
	srv = serve(t, auth.Lanes{}, wrong.URL)
	status, body := get(t, srv.URL+"/ops/v1/queue", "")
	assertError(t, status, http.StatusBadGateway, body, CodeSourceInvalid, false)
}

func TestPassThroughFromLeader(t *testing.T) {
	answers := map[string]map[string]any{
		"/v1/proposals/release-flow": {"contractVersion": "proposal.release-flow.v1", "governor": map[string]any{"state": "open"}},
		"/v1/explorer/release-flow":  {"contractVersion": "explorer.release-flow.v1", "governor": map[string]any{"state": "holding"}},
		"/v1/proposals/epochs":       {"contractVersion": "proposal.epoch-overlay.v1", "currentEpoch": 1000},
		"/v1/finality":               {"contractVersion": "finality.v1", "committedUnfinalized": 3},
		"/v1/explorer/summary":       {"contractVersion": "explorer.summary.v1", "queue": map[string]any{"pending": 2}},
		"/v1/explorer/wallets/0x00000000000000000000000000000000000000aa": {"contractVersion": "explorer.wallet.v1", "contentCount": 5},
	}
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/consensus/leader" {
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "consensus.leader.v1", "known": true, "leaderId": 1, "leaderUrl": "http://" + r.Host})
			return
		}
		_ = json.NewEncoder(w).Encode(answers[r.URL.Path])
	}))
	defer leader.Close()
	srv := serve(t, auth.Lanes{}, leader.URL)
	for route, check := range map[string]func(map[string]any) bool{
		"/ops/v1/proposals/release-flow": func(d map[string]any) bool { return d["governor"].(map[string]any)["state"] == "open" },
		"/ops/v1/explorer/release-flow":  func(d map[string]any) bool { return d["governor"].(map[string]any)["state"] == "holding" },
		"/ops/v1/proposals/epochs":       func(d map[string]any) bool { return d["currentEpoch"] == float64(1000) },
		"/ops/v1/finality":               func(d map[string]any) bool { return d["committedUnfinalized"] == float64(3) },
		"/ops/v1/explorer/summary":       func(d map[string]any) bool { return d["queue"].(map[string]any)["pending"] == float64(2) },
		"/ops/v1/explorer/wallets/0x00000000000000000000000000000000000000AA": func(d map[string]any) bool {
			return d["contentCount"] == float64(5)
		},
	} {
		_, body := get(t, srv.URL+route, "")
		if data := assertEnvelope(t, body); !check(data) || data["contractVersion"] == nil || data["sources"] == nil {
			t.Errorf("%s: %v", route, data)
		}
	}
	status, body := get(t, srv.URL+"/ops/v1/explorer/wallets/0x12", "")
	assertError(t, status, http.StatusNotFound, body, CodeNotFound, false)
	answers["/v1/proposals/epochs"]["contractVersion"] = "proposal.epoch-overlay.v0"
	status, body = get(t, srv.URL+"/ops/v1/proposals/epochs", "")
	assertError(t, status, http.StatusBadGateway, body, CodeSourceInvalid, false)
}

func TestProposalsRollup(t *testing.T) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/consensus/leader":
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "consensus.leader.v1", "known": true, "leaderId": 1, "leaderUrl": "http://" + r.Host})
		case "/v1/proposals/counts":
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "proposal.counts.v1", "committed": 10, "finalized": 4,
				"rejected": 2, "writes": 9, "deletes": 1, "rejectedByReason": map[string]any{"payment_not_found": 2}})
		case "/v1/proposals/queue/stats":
			_ = json.NewEncoder(w).Encode(map[string]any{"contractVersion": "proposal.queue-stats.v1", "queuedProposals": 3,
				"backpressurePendingRawCount": 2, "proposalsByEpoch": map[string]any{"1000": 8}, "currentEpoch": 1000, "finalizedEpoch": 998})
		}
	}))
	defer leader.Close()
	srv := serve(t, auth.Lanes{}, leader.URL)
	_, body := get(t, srv.URL+"/ops/v1/proposals", "")
	data := assertEnvelope(t, body)
	states := data["states"].(map[string]any)
	if states["pending"] != float64(3) || states["verified"] != float64(5) || states["committed"] != float64(6) ||
		states["finalized"] != float64(4) || states["rejected"] != float64(2) ||
		data["types"].(map[string]any)["delete"] != float64(1) || data["rejectionsByReason"].(map[string]any)["payment_not_found"] != float64(2) ||
		data["epochs"].(map[string]any)["current"] != float64(1000) {
		t.Fatalf("rollup %v", data)
	}
}
