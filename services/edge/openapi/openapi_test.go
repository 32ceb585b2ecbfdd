package openapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
)

func contract(t testing.TB) (*Documents, *SourceContract) {
	t.Helper()
	docs, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	c, err := docs.SourceContract()
	if err != nil {
		t.Fatal(err)
	}
	return docs, c
}

func TestDocuments(t *testing.T) {
	docs, _ := contract(t)
	for name, d := range map[string]string{"edge": docs.Edge.OpenAPI, "source": docs.Source.OpenAPI} {
		if !strings.HasPrefix(d, "3.") {
			t.Errorf("%s document is OpenAPI %s", name, d)
		}
	}
	if docs.Edge.Info.Version != "1.0.0" {
		t.Errorf("edge contract version %s, the contract publishes 1.0.0", docs.Edge.Info.Version)
	}
}

// TestMarkers: every source route fixes its contractVersion, the one the
// validators write (pkg/api), but /health, which has none.
func TestMarkers(t *testing.T) {
	_, c := contract(t)
	want := map[string]string{
		"/health":                                   "",
		"/health/cluster":                           api.ClusterHealthVersion,
		"/v1/chain/status":                          api.ChainStatusVersion,
		"/v1/consensus/leader":                      api.ConsensusLeaderVersion,
		"/v1/consensus/status":                      api.ConsensusStatusVersion,
		"/v1/consensus/state-hash":                  api.StateHashVersion,
		"/v1/peers":                                 api.PeersVersion,
		"/v1/msgbus/raft-metrics":                   api.RaftMetricsVersion,
		"/v1/msgbus/replication-lag":                api.ReplicationLagVersion,
		"/v1/msgbus/cluster-state":                  api.ClusterStateVersion,
		"/v1/proposals/queue/stats":                 api.QueueStatsVersion,
		"/v1/proposals/release-flow":                api.ReleaseFlowVersion,
		"/v1/proposals/epochs":                      api.EpochOverlayVersion,
		"/v1/proposals/counts":                      api.ProposalCountsVersion,
		"/v1/explorer/summary":                      api.ExplorerSummaryVersion,
		"/v1/explorer/release-flow":                 api.ExplorerReleaseFlowVersion,
		"/v1/explorer/proposals/{proposalId}":       api.ExplorerProposalVersion,
		"/v1/explorer/wallets/{walletAddress}":      api.ExplorerWalletVersion,
		"/v1/finality":                              api.FinalityVersion,
		"/v1/blockchain/config":                     "blockchain.config.v1", // written by the validator's app, no constant
		"/v1/gc/status":                             api.GcStatusVersion,
		"/v1/gc/estimate":                           api.GcEstimateVersion,
		"/v1/compaction/proposals":                  api.CompactionProposalsVersion,
		"/v1/gc/vote":                               api.GcVotesVersion,
		"/v1/fragmentation/metrics":                 api.FragmentationMetricsVersion,
		"/v1/fragmentation/metrics/{walletAddress}": api.FragmentationWalletVersion,
		"/v1/fragmentation/top":                     api.FragmentationTopVersion,
		"/v1/ops/snapshots/storage":                 api.StorageSnapshotVersion,
		"/v1/ops/snapshots/runtime":                 api.RuntimeSnapshotVersion,
		"/v1/ops/snapshots/health":                  api.HealthSnapshotVersion,
		"/v1/ops/snapshots/cluster":                 api.ClusterSnapshotVersion,
		"/v1/ops/snapshots/replication":             api.ReplicationSnapshotVersion,
		"/v1/ops/snapshots/queue":                   api.QueueSnapshotVersion,
		"/v1/config/osgi":                           api.ConfigValuesVersion,
		"/v1/config/osgi/schema":                    api.ConfigSchemaVersion,
		"/v1/config/osgi/sources":                   api.ConfigSourcesVersion,
		"/v1/config/osgi/coverage":                  api.ConfigCoverageVersion,
		"/v1/config/osgi/delta":                     api.ConfigDeltaVersion,
		"/v1/events/recent":                         api.OpsEventsRecentVersion,
		"/v1/events/stats":                          api.OpsEventStatsVersion,
		"/v1/transactions/summary":                  api.TransactionSummaryVersion,
		"/v1/transactions/{transactionId}":          api.TransactionVersion,
	}
	routes := c.Routes()
	if len(routes) != len(want) {
		t.Errorf("source document has %d routes, want %d: %v", len(routes), len(want), routes)
	}
	for _, r := range routes {
		m, ok := want[r]
		if !ok {
			t.Errorf("%s: not expected", r)
			continue
		}
		if got := c.Marker(r); got != m {
			t.Errorf("%s: marker %q, pkg/api writes %q", r, got, m)
		}
	}
	if m := c.Marker("/v1/explorer/release-flow"); m != "explorer.release-flow.v1" {
		t.Errorf("marker through allOf: %q", m)
	}
}

func TestCheck(t *testing.T) {
	_, c := contract(t)
	finality := api.Finality{ContractVersion: api.FinalityVersion, CurrentEpoch: 3}
	good, _ := json.Marshal(finality)
	if err := c.Check("/v1/finality", 200, good); err != nil {
		t.Fatalf("a validator's body refused: %v", err)
	}
	finality.ContractVersion = "finality.v2"
	wrong, _ := json.Marshal(finality)
	for name, tc := range map[string]struct {
		route  string
		status int
		body   string
		want   string
	}{
		"wrong marker":   {"/v1/finality", 200, string(wrong), `contractVersion "finality.v2", the edge reads "finality.v1"`},
		"no marker":      {"/v1/finality", 200, `{"currentEpoch":3}`, `contractVersion ""`},
		"missing field":  {"/v1/finality", 200, `{"contractVersion":"finality.v1"}`, "outside its contract"},
		"wrong type":     {"/v1/finality", 200, strings.Replace(string(good), `"currentEpoch":3`, `"currentEpoch":"3"`, 1), "/currentEpoch"},
		"not JSON":       {"/v1/finality", 200, "<html>", "not JSON"},
		"not an object":  {"/v1/finality", 200, `[1]`, "contractVersion"},
		"bad date":       {"/v1/explorer/proposals/{proposalId}", 200, `{"contractVersion":"explorer.proposal.v1","proposal":{"proposalId":"0x1","status":"PENDING","action":"write","wallet":"0x","path":"/","tier":"standard","epoch":1,"acceptedAt":"yesterday"}}`, "acceptedAt"},
		"unknown status": {"/v1/explorer/proposals/{proposalId}", 200, `{"contractVersion":"explorer.proposal.v1","proposal":{"proposalId":"0x1","status":"LOST","action":"write","wallet":"0x","path":"/","tier":"standard","epoch":1,"acceptedAt":"2026-01-01T00:00:00Z"}}`, "status"},
		"unknown route":  {"/v1/nothing", 200, `{}`, "not a route"},
	} {
		err := c.Check(tc.route, tc.status, []byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", name, err, tc.want)
		}
	}
	if err := c.Check("/v1/finality", 503, []byte(`{}`)); !errors.Is(err, ErrUndocumented) {
		t.Errorf("an unlisted status: %v", err)
	}
	if err := c.Check("/v1/explorer/proposals/{proposalId}", 404, []byte(`{"error":{"code":"not_found","message":"no","retryable":false}}`)); err != nil {
		t.Errorf("a listed 404: %v", err)
	}
	if err := c.Check("/health", 503, []byte(`{"status":"unavailable","checks":{"storage":{"status":"failing","detail":"x"}}}`)); err != nil {
		t.Errorf("/health's 503: %v", err)
	}
}

// TestTransactionAnswers: the transaction routes take what the validator
// writes, a payment whose proposal it holds no record of included, and
// refuse a state ADR 0007 does not name or a summary missing a state.
func TestTransactionAnswers(t *testing.T) {
	_, c := contract(t)
	const route = "/v1/transactions/{transactionId}"
	tx := api.Transaction{ContractVersion: api.TransactionVersion, NodeID: 1, TxHash: "0x" + strings.Repeat("ab", 32), State: api.TxConfirmed,
		Payments: []api.TransactionPayment{{ProposalID: "0x" + strings.Repeat("11", 32), LogIndex: 0, BlockNumber: 5,
			BlockHash: "0x" + strings.Repeat("05", 32), Confirmations: 2, Payer: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
			Amount: "1000000000000000", Token: "ETH", Class: "STANDARD", State: api.TxConfirmed,
			History: []api.TransactionStateChange{{State: api.TxObserved, AtMs: 1}, {State: api.TxConfirmed, AtMs: 2}}}},
		Gaps: []api.Gap{}}
	good, _ := json.Marshal(tx)
	if err := c.Check(route, 200, good); err != nil {
		t.Fatalf("a validator's transaction refused: %v", err)
	}
	tx.Payments[0].State = "LOST"
	if bad, _ := json.Marshal(tx); c.Check(route, 200, bad) == nil {
		t.Error("a payment state ADR 0007 does not name was taken")
	}
	if err := c.Check(route, 404, []byte(`{"error":{"code":"not_found","message":"no","retryable":false}}`)); err != nil {
		t.Errorf("a listed 404: %v", err)
	}

	summary := api.TransactionSummary{ContractVersion: api.TransactionSummaryVersion, NodeID: 1, ByState: map[string]int{},
		AppliedIndex: 7, ComputedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Gaps: []api.Gap{{Field: "total", Reason: "MOCK mode"}}}
	for _, st := range api.TransactionStates() {
		summary.ByState[st] = 0
	}
	good, _ = json.Marshal(summary)
	if err := c.Check("/v1/transactions/summary", 200, good); err != nil {
		t.Fatalf("a validator's summary refused: %v", err)
	}
	delete(summary.ByState, api.TxMatched)
	if bad, _ := json.Marshal(summary); c.Check("/v1/transactions/summary", 200, bad) == nil {
		t.Error("a summary without MATCHED was taken")
	}
}

// TestBlobstoreAnswers: the runtime snapshot's blob store takes what the
// validator writes with and without an IPFS gateway, and from validators
// before the gateway check (no check member); a check of the wrong shape
// is refused.
func TestBlobstoreAnswers(t *testing.T) {
	_, c := contract(t)
	const route = "/v1/ops/snapshots/runtime"
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rt := api.RuntimeSnapshot{ContractVersion: api.RuntimeSnapshotVersion, NodeID: 1, At: at, StartedAt: at, NATS: []api.NATSConnection{},
		Blobstore: api.Blobstore{CidMappings: 1, AppliedIndex: 7, ComputedAt: at},
		Gaps:      []api.Gap{{Field: "blobstore.gatewayUrl", Reason: "none configured"}, {Field: "blobstore.lastCheck", Reason: "none checked"}}}
	none, _ := json.Marshal(rt)
	gateway, status := "https://ipfs.example", 200
	rt.Blobstore.GatewayURL, rt.Blobstore.LastCheck, rt.Gaps = &gateway, &at, []api.Gap{}
	rt.Blobstore.Check = &api.GatewayCheck{OK: true, StatusCode: &status, LatencyMs: 12.5}
	ok, _ := json.Marshal(rt)
	rt.Blobstore.Check = &api.GatewayCheck{LatencyMs: 10000, Error: "no answer within 10s"}
	failed, _ := json.Marshal(rt)
	for name, body := range map[string]string{
		"no gateway": string(none), "checked": string(ok), "failed": string(failed),
		"before the check member": strings.Replace(string(none), `,"check":null`, "", 1),
	} {
		if err := c.Check(route, 200, []byte(body)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, body := range map[string]string{
		"ok not a boolean":   strings.Replace(string(ok), `"ok":true`, `"ok":"yes"`, 1),
		"status not integer": strings.Replace(string(ok), `"statusCode":200`, `"statusCode":"200"`, 1),
		"no latency":         strings.Replace(string(ok), `,"latencyMs":12.5`, "", 1),
	} {
		if err := c.Check(route, 200, []byte(body)); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
}

// TestHealthSnapshotAnswers: the health snapshot takes both views the
// validator writes, the full one and the statuses a caller the ops-read
// lane does not admit gets (nodeId 0), with 200 and 503; a check without
// its status is refused.
func TestHealthSnapshotAnswers(t *testing.T) {
	_, c := contract(t)
	const route = "/v1/ops/snapshots/health"
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	header := api.SnapshotHeader{ContractVersion: api.HealthSnapshotVersion, NodeID: 2, At: at}
	full := api.HealthSnapshot{SnapshotHeader: header, Status: "ok", Health: map[string]any{"status": "ok", "nodeId": 2, "role": "LEADER",
		"checks": map[string]any{"storage": map[string]any{"status": "ok", "detail": "/data"}}}}
	reduced := api.HealthSnapshot{SnapshotHeader: api.SnapshotHeader{ContractVersion: api.HealthSnapshotVersion, At: at}, Status: "unavailable",
		Health: map[string]any{"status": "unavailable", "checks": map[string]any{"raft": map[string]any{"status": "failing"}}}}
	for name, tc := range map[string]struct {
		status int
		body   api.HealthSnapshot
	}{"full": {200, full}, "reduced": {200, reduced}, "unavailable": {503, reduced}} {
		b, _ := json.Marshal(tc.body)
		if err := c.Check(route, tc.status, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	reduced.Health["checks"] = map[string]any{"raft": map[string]any{"detail": "no status"}}
	if b, _ := json.Marshal(reduced); c.Check(route, 200, b) == nil {
		t.Error("a check without its status was taken")
	}
}

// BenchmarkCheck measures the check every source answer goes through: a
// small answer, the queue statistics, and the largest the edge reads (a
// wallet with 50 content items).
func BenchmarkCheck(b *testing.B) {
	_, c := contract(b)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	leader, _ := json.Marshal(api.LeaderInfo{ContractVersion: api.ConsensusLeaderVersion, Known: true, LeaderID: 1, LeaderURL: "http://a", Term: 3})
	queue, _ := json.Marshal(api.QueueStats{ContractVersion: api.QueueStatsVersion, ProposalsByEpoch: map[string]int{"1000": 8, "1001": 3},
		ProposalsByEpochAndTier: map[string]map[string]int{"1000": {"standard": 5, "express": 3}, "1001": {"standard": 3}},
		PendingEpochStats:       []api.PendingEpoch{{Epoch: 1000, Pending: 8}, {Epoch: 1001, Pending: 3}},
		RejectedByReason:        map[string]uint64{"payment_not_found": 2}})
	w := api.ExplorerWallet{WalletStats: api.WalletStats{ContractVersion: api.ExplorerWalletVersion, Wallet: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
		LastWriteAt: &at, GC: api.GcAccount{ContractVersion: api.GcAccountVersion, PendingDebt: "0.00", ExecutedDebt: "0.00", Limit: "100.00", Paid: "0.00"}}}
	for i := range api.MaxExplorerContent {
		w.Content = append(w.Content, api.WalletItem{Path: "/ledger/70/99/79/0x70997970c51812dc3a010c7d01b50e0d17dc79c8/default/page/" + strings.Repeat("a", i%16),
			PrimaryType: "cq:Page", Organization: "default", ContentType: "page", ProposalID: "0x" + strings.Repeat("1", 64), Revision: 1, CommitIndex: uint64(i), UpdatedAt: &at})
	}
	wallet, _ := json.Marshal(w)
	for _, bc := range []struct {
		name, route string
		body        []byte
	}{
		{"leader", "/v1/consensus/leader", leader},
		{"queue-stats", "/v1/proposals/queue/stats", queue},
		{"wallet-50-items", "/v1/explorer/wallets/{walletAddress}", wallet},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Check(bc.route, 200, bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The decode alone, which the edge does anyway, for scale.
	b.Run("wallet-50-items-decode-only", func(b *testing.B) {
		b.SetBytes(int64(len(wallet)))
		b.ReportAllocs()
		for b.Loop() {
			var v map[string]any
			if err := json.Unmarshal(wallet, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
