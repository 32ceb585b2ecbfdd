package routes

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/services/edge/internal/auth"
	"github.com/contentledger/contentledger/services/edge/internal/upstream"
	"github.com/contentledger/contentledger/services/edge/openapi"
)

// The tests run the edge against fake validators whose bodies are built
// from pkg/api, the types the validators answer with, so that a change
// there shows here; the end-to-end tests in tests/ run real validators.

const (
	knownID     = "0x1111111111111111111111111111111111111111111111111111111111111111"
	unknownID   = "0x2222222222222222222222222222222222222222222222222222222222222222"
	knownWallet = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"
	knownTx     = "0xabababababababababababababababababababababababababababababababab"
)

// fault is how a fake validator misbehaves.
type fault int

const (
	healthy      fault = iota
	garbage            // answers HTML with 200
	wrongVersion       // answers every marker with .v2 for .v1
	failing            // answers 500
)

// fake is one validator. Node 1 leads.
type fake struct {
	srv     *httptest.Server
	id      uint64
	cluster *fakeCluster
	fault   atomic.Int32
	hits    atomic.Int64
	// override answers a path (without query) in place of the default.
	mu       sync.Mutex
	override map[string]http.HandlerFunc
}

type fakeCluster struct {
	nodes []*fake
	// hashAt is each node's state hash at any index; agreement by default.
	hashAt func(id uint64) string
	// runHash is each node's state hash after GC run 1, which every node
	// applied; agreement by default.
	runHash func(id uint64) string
}

// newCluster starts n fake validators.
func newCluster(t testing.TB, n int) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{hashAt: func(uint64) string { return "0xaa" }, runHash: func(uint64) string { return "0xbb" }}
	for i := range n {
		f := &fake{id: uint64(i + 1), cluster: fc, override: map[string]http.HandlerFunc{}}
		f.srv = httptest.NewServer(f)
		t.Cleanup(f.srv.Close)
		fc.nodes = append(fc.nodes, f)
	}
	return fc
}

func (fc *fakeCluster) urls() []string {
	out := make([]string, len(fc.nodes))
	for i, f := range fc.nodes {
		out[i] = f.srv.URL
	}
	return out
}

func (fc *fakeCluster) hits() int64 {
	var n int64
	for _, f := range fc.nodes {
		n += f.hits.Load()
	}
	return n
}

func (f *fake) set(x fault) { f.fault.Store(int32(x)) }

func (f *fake) answer(path string, h http.HandlerFunc) {
	f.mu.Lock()
	f.override[path] = h
	f.mu.Unlock()
}

// deadURL is a validator that refuses connections.
func deadURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	switch fault(f.fault.Load()) {
	case garbage:
		_, _ = w.Write([]byte("<html>not a validator</html>"))
		return
	case failing:
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	f.mu.Lock()
	h := f.override[r.URL.Path]
	f.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	status, body := f.body(r)
	raw, _ := json.Marshal(body)
	if fault(f.fault.Load()) == wrongVersion {
		raw = []byte(strings.ReplaceAll(string(raw), `.v1"`, `.v2"`))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

func (f *fake) name() string { return api.NodeName(f.id) }

// body is the validator's answer to r, as the validator builds it.
func (f *fake) body(r *http.Request) (int, any) {
	fc, n := f.cluster, len(f.cluster.nodes)
	epoch := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	members := make([]api.Member, n)
	for i, o := range fc.nodes {
		members[i] = api.Member{ID: o.id, Name: o.name(), PeerAddr: "127.0.0.1:" + strconv.Itoa(7090+i), APIURL: o.srv.URL}
	}
	role := api.RoleFollower
	if f.id == 1 {
		role = api.RoleLeader
	}
	status := api.ConsensusStatus{ContractVersion: api.ConsensusStatusVersion, ClusterID: "test", NodeID: f.id, Name: f.name(),
		Role: role, Term: 3, Leader: 1, Peers: []string{}, Epoch: 1000, CommitIndex: 12, AppliedIndex: 12, StateHash: "0xnow"}
	queue := api.QueueStats{ContractVersion: api.QueueStatsVersion, BackpressureActive: false, BackpressurePendingRawCount: 2,
		MaxPendingMessages: 64, BatchQueueSize: 1, QueuedProposals: 3, ProposalsByEpoch: map[string]int{"1000": 8},
		ProposalsByEpochAndTier: map[string]map[string]int{"1000": {"standard": 8}},
		PendingEpochStats:       []api.PendingEpoch{{Epoch: 1000, Pending: 8, OldestAgeMs: 1500}},
		CurrentEpoch:            1000, FinalizedEpoch: 998, EpochsUntilFinality: 2, VerifiedCount: 30, TotalFinalizedCount: 4,
		ProcessedCount: 20, RejectedCount: 2, RejectedByReason: map[string]uint64{"payment_not_found": 2}, Verifiers: 4,
		IngressPerSec: 12.5, CommitPerSec: 11}
	flow := api.ReleaseFlow{ContractVersion: api.ReleaseFlowVersion, Governor: api.Governor{State: "open", Action: "release", Reasons: []string{}},
		Stages: api.ReleaseStages{Unverified: 3, Packing: 3, ReadyBuckets: 1, Batches: 1, InFlight: 2}, MaxPendingMessages: 64,
		MaxPending: 10000, MaxBatch: 256, Tiers: map[string]api.TierFlow{"standard": {Pending: 8, Released: 20}}}
	committed := epoch.Add(time.Minute)
	finality := api.Finality{ContractVersion: api.FinalityVersion, CurrentEpoch: 1000, FinalizedEpoch: 998, EpochsUntilFinality: 2,
		CommittedUnfinalized: 5, OldestUnfinalizedEpoch: 999, OldestUnfinalizedAgeMs: 4000, LastCommitAt: &committed}
	gc := api.GcAccount{ContractVersion: api.GcAccountVersion, Wallet: knownWallet, PendingDebt: "0.00", ExecutedDebt: "0.00",
		Limit: "100.00", LimitMicros: 100_000_000, Paid: "0.00"}
	computed := api.FragmentationComputed{NodeID: f.id, AppliedIndex: 12, ComputedAt: epoch}
	frag := api.WalletFragmentation{Wallet: knownWallet, BytesWritten: 600, LiveBytes: 400, DeadBytes: 200, FragmentationScore: 1.0 / 3,
		LiveNodes: 2, NodeWrites: 3, NodeDeletes: 1, TarFilesTouched: 1}

	switch p := r.URL.Path; {
	case p == "/health":
		checks := map[string]any{}
		for _, c := range []string{"storage", "raft", "nats", "chain"} {
			checks[c] = map[string]any{"status": "ok", "detail": c + " fine"}
		}
		return http.StatusOK, map[string]any{"status": "ok", "nodeId": f.id, "clusterId": "test", "mode": "MOCK", "version": fakeVersion, "role": role,
			"term": 3, "leader": 1, "commitIndex": 12, "appliedIndex": 12, "stateHash": "0xnow", "checks": checks}
	case p == "/health/cluster":
		h := api.ClusterHealth{ContractVersion: api.ClusterHealthVersion, Status: "ok", Quorum: n/2 + 1, Reachable: n, Leader: 1,
			StateHashAgreement: true, ComparedAt: 12}
		for _, m := range members {
			h.Nodes = append(h.Nodes, api.NodeHealth{ID: m.ID, Name: m.Name, APIURL: m.APIURL, Reachable: true, Role: api.RoleFollower,
				Term: 3, AppliedIndex: 12, CommitIndex: 12, StateHash: "0xnow", ComparedHash: "0xaa", LatencyMs: 1})
		}
		return http.StatusOK, h
	case p == "/v1/consensus/leader":
		return http.StatusOK, api.LeaderInfo{ContractVersion: api.ConsensusLeaderVersion, Known: true, LeaderID: 1,
			LeaderName: api.NodeName(1), LeaderURL: members[0].APIURL, Term: 3, Self: f.id == 1}
	case p == "/v1/consensus/status":
		return http.StatusOK, status
	case p == "/v1/consensus/state-hash":
		index, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
		return http.StatusOK, api.StateHashAt{ContractVersion: api.StateHashVersion, NodeID: f.id, Index: index, StateHash: fc.hashAt(f.id)}
	case p == "/v1/peers":
		out := api.Peers{ContractVersion: api.PeersVersion, Self: f.id}
		for _, m := range members {
			v := api.PeerView{Member: m, Self: m.ID == f.id, IsLeader: m.ID == 1}
			if !v.Self {
				v.Transport = &api.PeerTransport{Connected: true, InboundConnected: true, MsgsSent: 10, MsgsRecv: 9, BytesSent: 1000,
					BytesRecv: 900, QueueDepth: 1, Reconnects: 2, SnapshotsSent: 1, Timeouts: new(uint64(3))}
			}
			out.Peers = append(out.Peers, v)
		}
		return http.StatusOK, out
	case p == "/v1/msgbus/raft-metrics":
		last := epoch
		return http.StatusOK, api.RaftMetrics{ContractVersion: api.RaftMetricsVersion, NodeID: f.id, Role: role, Term: 3, Leader: 1,
			CommitIndex: 12, AppliedIndex: 12, FirstLogIndex: 1, LastLogIndex: 12, AppendRatePerSec: 5,
			Elections: api.Elections{Count: 1, Count24h: 1, LastAt: &last}}
	case p == "/v1/msgbus/replication-lag":
		lag := api.ReplicationLag{ContractVersion: api.ReplicationLagVersion, NodeID: f.id, IsLeader: f.id == 1, Leader: 1, LastIndex: 12}
		if f.id == 1 {
			lag.MaxLagEntries = 3
			for _, m := range members[1:] {
				lag.Nodes = append(lag.Nodes, api.ReplicationNode{NodeID: m.ID, Name: m.Name, MatchIndex: 9, NextIndex: 10, LagEntries: 3,
					LagMs: 600, State: "replicate", RecentActive: true,
					Head: &api.FollowerHead{AppliedIndex: 9, SegmentIndex: 8, SegmentHash: "0x" + strings.Repeat("ab", 32), Agreement: api.HeadAgrees}})
			}
		}
		return http.StatusOK, lag
	case p == "/v1/msgbus/cluster-state":
		return http.StatusOK, api.ClusterState{ContractVersion: api.ClusterStateVersion, Leader: 1, Term: 3, Voters: []uint64{1, 2, 3}[:n],
			Learners: []uint64{}, Quorum: n/2 + 1, Members: members}
	case p == "/v1/proposals/queue/stats":
		return http.StatusOK, queue
	case p == "/v1/proposals/release-flow":
		return http.StatusOK, flow
	case p == "/v1/explorer/release-flow":
		flow.ContractVersion = api.ExplorerReleaseFlowVersion
		flow.Governor = api.Governor{State: "holding", Action: "hold", Reasons: []string{"2 in flight"}}
		return http.StatusOK, flow
	case p == "/v1/proposals/epochs":
		return http.StatusOK, api.EpochOverlay{ContractVersion: api.EpochOverlayVersion, CurrentEpoch: 1000, NextEpoch: 1001,
			FinalizedEpoch: 998, Epochs: []api.EpochProposals{{Epoch: 1000, Current: true, ByStatus: map[string]int{"PENDING": 8},
				ByTier: map[string]int{"standard": 8}}}}
	case p == "/v1/proposals/counts":
		return http.StatusOK, api.ProposalCounts{ContractVersion: api.ProposalCountsVersion, AppliedIndex: 12, Committed: 10,
			Finalized: 4, Rejected: 2, Writes: 9, Deletes: 1, RejectedByReason: map[string]uint64{"payment_not_found": 2}}
	case p == "/v1/explorer/summary":
		var s api.ExplorerSummary
		s.ContractVersion = api.ExplorerSummaryVersion
		s.Identity.NodeID, s.Identity.ClusterID, s.Identity.Mode = 1, "test", "TESTNET"
		s.Identity.ChainID, s.Identity.ContractAddress, s.Identity.Version = 11155111, "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512", fakeVersion
		s.Cluster.Leader, s.Cluster.Term, s.Cluster.Members, s.Cluster.AppliedIndex, s.Cluster.StateHash = 1, 3, n, 12, "0xnow"
		s.Queue.Pending, s.Queue.InFlight = 8, 2
		s.Finality = finality
		return http.StatusOK, s
	case strings.HasPrefix(p, "/v1/explorer/proposals/"):
		if strings.TrimPrefix(p, "/v1/explorer/proposals/") != knownID {
			return http.StatusNotFound, apierror.Body{Error: apierror.New(apierror.NotFound, "no proposal")}
		}
		pay := &api.Payment{TxHash: knownTx, BlockNumber: 5, BlockHash: "0x05", Payer: knownWallet, Amount: "2000000000000000",
			Token: "ETH", Tier: "express"}
		return http.StatusOK, api.ExplorerProposal{ContractVersion: api.ExplorerProposalVersion, Transaction: pay,
			Proposal: api.ProposalStatus{ProposalID: knownID, Status: api.StatusCommitted, Action: "write", Wallet: knownWallet,
				Path: "/ledger/70/99/79/" + knownWallet + "/default/page/1111", Tier: "express", EthereumTxHash: knownTx, Epoch: 1000,
				CommitIndex: 7, AcceptedAt: epoch, CommittedAt: &committed, Payment: pay}}
	case strings.HasPrefix(p, "/v1/explorer/wallets/"):
		w := strings.TrimPrefix(p, "/v1/explorer/wallets/")
		if w != knownWallet {
			return http.StatusNotFound, apierror.Body{Error: apierror.New(apierror.NotFound, "no content and no GC account")}
		}
		return http.StatusOK, api.ExplorerWallet{WalletStats: api.WalletStats{ContractVersion: api.ExplorerWalletVersion, Wallet: w,
			WalletPath: "/ledger/70/99/79/" + w, ContentCount: 5, TotalWrites: 6, TotalDeletes: 1, LastWriteAt: &committed,
			LastWritePath: "/ledger/70/99/79/" + w + "/default/page/1111", GC: gc},
			Content: []api.WalletItem{{Path: "/ledger/70/99/79/" + w + "/default", PrimaryType: api.FolderType, Organization: "default",
				ProposalID: knownID, Revision: 1, CommitIndex: 7, UpdatedAt: &committed}}}
	case p == "/v1/finality":
		return http.StatusOK, finality
	case p == "/v1/gc/status":
		return http.StatusOK, api.GcStatus{ContractVersion: api.GcStatusVersion, NodeID: f.id, AppliedIndex: 12,
			Debt: api.GcDebt{Accounts: 2, PendingDebt: "0.10", ExecutedDebt: "0.20", Paid: "0.00", PendingDebtMicros: 100_000,
				ExecutedDebtMicros: 200_000, Deletes: 3, DeletedBytes: 3000, BlockedWallets: []string{},
				DefaultLimit: "100.00", DefaultLimitMicros: 100_000_000, LastJobEpoch: 999},
			Generations: api.GcGenerations{Current: 0, Retained: 2, Present: []uint32{0}},
			Gaps:        []api.Gap{{Field: "lastRun", Reason: "no GC run applied"}}}
	case p == "/v1/gc/estimate":
		return http.StatusOK, api.GcEstimate{ContractVersion: api.GcEstimateVersion, NodeID: f.id, AppliedIndex: 12, ComputedAt: epoch,
			SegmentBytes: 900, WrittenBytes: 600, LiveBytes: 400, ReclaimableBytes: 500,
			ByTar: []api.TarEstimate{{Name: "data00000a.tar", Segments: 4, Bytes: 900, WrittenBytes: 600, LiveBytes: 400, ReclaimableBytes: 500}}}
	case p == "/v1/compaction/proposals":
		return http.StatusOK, api.CompactionProposals{ContractVersion: api.CompactionProposalsVersion, NodeID: f.id, AppliedIndex: 12,
			Proposals: []api.CompactionProposal{}, Gaps: []api.Gap{{Field: "proposals", Reason: "no GC proposal lifecycle"}}}
	case p == "/v1/gc/vote":
		return http.StatusOK, api.GcVotes{ContractVersion: api.GcVotesVersion, NodeID: f.id, AppliedIndex: 12,
			Votes: []api.GcVote{{Run: 1, Epoch: 5, CommitIndex: 9, StateHash: f.cluster.runHash(f.id)}}}
	case p == "/v1/fragmentation/metrics":
		return http.StatusOK, api.FragmentationMetrics{ContractVersion: api.FragmentationMetricsVersion, FragmentationComputed: computed,
			Totals:  api.FragmentationTotals{Wallets: 1, BytesWritten: 600, LiveBytes: 400, DeadBytes: 200, FragmentationScore: 1.0 / 3, TarFiles: 1},
			Wallets: []api.WalletFragmentation{frag}}
	case strings.HasPrefix(p, "/v1/fragmentation/metrics/"):
		if strings.TrimPrefix(p, "/v1/fragmentation/metrics/") != knownWallet {
			return http.StatusNotFound, apierror.Body{Error: apierror.New(apierror.NotFound, "wrote nothing")}
		}
		return http.StatusOK, api.FragmentationWallet{ContractVersion: api.FragmentationWalletVersion, FragmentationComputed: computed,
			WalletFragmentation: frag}
	case p == "/v1/fragmentation/top":
		limit := api.DefaultFragmentationTop
		if l := r.URL.Query().Get("limit"); l != "" {
			limit, _ = strconv.Atoi(l)
		}
		return http.StatusOK, api.FragmentationTop{ContractVersion: api.FragmentationTopVersion, FragmentationComputed: computed,
			Limit: limit, Wallets: []api.WalletFragmentation{frag}[:min(limit, 1)]}
	case p == "/v1/ops/snapshots/storage":
		sn := api.StorageSnapshot{ContractVersion: api.StorageSnapshotVersion, NodeID: f.id, AppliedIndex: 12, At: epoch,
			Disk: &api.DiskUsage{Path: "/data", TotalBytes: 1000, FreeBytes: 500, UsedBytes: 500, UsedRatio: float64(50+f.id) / 100},
			Pebble: api.PebbleMetrics{DiskSpaceUsageBytes: 4096, L0Files: 2, ReadAmp: 2,
				Levels: []api.PebbleLevel{{Level: 0, Tables: 2, Bytes: 2048}}},
			Raft: api.RaftStorage{FirstIndex: 1, LastIndex: 12},
			Segments: api.SegmentSummary{Count: 4, Bytes: 900, FirstIndex: 3, LastIndex: 12, NodeWrites: 5, NodeDeletes: 1, HeadHash: "0xbb",
				ChainVerified: true, Generations: []uint32{0}},
			Tars: api.TarSummary{Count: 1, Bytes: 900, TargetBytes: 256 << 20, Newest: "data00000a.tar"},
			Gaps: []api.Gap{{Field: "pebble.writeStalls", Reason: "not reported"}, {Field: "tars.packingEfficiency", Reason: "none closed"}}}
		p50, p99 := 0.5, 2.0
		sn.Pebble.Fsync.Count, sn.Pebble.Fsync.P50Ms, sn.Pebble.Fsync.P99Ms = 40, &p50, &p99
		if r.URL.Query().Get("detail") == "tars" {
			sn.TarFiles = []api.TarFile{{Name: "data00000a.tar", FirstIndex: 3, LastIndex: 12, Segments: 4, Bytes: 900, Fill: 900.0 / (256 << 20),
				PrevHash: "0x00", HeadHash: "0xbb", ChainOK: true}}
		}
		return http.StatusOK, sn
	case p == "/v1/config/osgi":
		return http.StatusOK, api.ConfigValues{ContractVersion: api.ConfigValuesVersion, NodeID: f.id, ReloadMode: "restart",
			Components: map[string]map[string]any{"node": {"SVC_VALIDATOR_NODE_ID": f.id, "SVC_VALIDATOR_MODE": "TESTNET"},
				"api": {"SVC_VALIDATOR_AUTH_TOKEN": "<redacted>"}}}
	case p == "/v1/config/osgi/schema":
		return http.StatusOK, api.ConfigSchema{ContractVersion: api.ConfigSchemaVersion, NodeID: f.id, Entries: []api.ConfigEntry{
			{Key: "SVC_VALIDATOR_MODE", Component: "node", Type: "string", Enum: []string{"MOCK", "TESTNET", "MAINNET"}, ReloadMode: "restart",
				Risk: "high", Description: "MOCK, TESTNET or MAINNET; required"},
			{Key: "SVC_VALIDATOR_MAX_BATCH", Component: "pipeline", Type: "integer", Default: "512", ReloadMode: "restart", Risk: "medium",
				Description: "proposals per raft entry"}}}
	case p == "/v1/config/osgi/sources":
		return http.StatusOK, api.ConfigSources{ContractVersion: api.ConfigSourcesVersion, NodeID: f.id,
			Sources: []api.ConfigSource{{Key: "SVC_VALIDATOR_MODE", Source: "env", EnvSet: true}, {Key: "SVC_VALIDATOR_MAX_BATCH", Source: "default"}},
			Gaps:    []api.Gap{{Field: "file", Reason: "no configuration file"}}}
	case p == "/v1/config/osgi/coverage":
		return http.StatusOK, api.ConfigCoverage{ContractVersion: api.ConfigCoverageVersion, NodeID: f.id, Settings: 2, Configurable: 1,
			NotImplemented: 1, Tunables: []api.Tunable{{Name: "max_pending_messages", Origin: "contract", Status: "configurable",
				Key: "SVC_VALIDATOR_MAX_PENDING_MESSAGES"}, {Name: "retryCount", Origin: "contract", Status: "not_implemented", Note: "no GC"}},
			Gaps: []api.Gap{{Field: "tunables.retryCount", Reason: "no GC"}}}
	case p == "/v1/config/osgi/delta":
		return http.StatusOK, api.ConfigDelta{ContractVersion: api.ConfigDeltaVersion, NodeID: f.id, Changed: []api.ConfigChange{
			{Key: "SVC_VALIDATOR_NODE_ID", Component: "node", Current: f.id, Default: uint64(1), Source: "env"}}[:min(int(f.id)-1, 1)]}
	case p == "/v1/ops/snapshots/runtime":
		rss, fds, cpu := uint64(50<<20), 12, 1.5
		rt := api.RuntimeSnapshot{ContractVersion: api.RuntimeSnapshotVersion, NodeID: f.id, At: epoch, StartedAt: epoch.Add(-time.Hour),
			UptimeMs: 3_600_000, Process: api.Process{PID: 100 + int(f.id), RSSBytes: &rss, OpenFDs: &fds, CPUSeconds: &cpu},
			Blobstore: api.Blobstore{CidMappings: 2, AppliedIndex: 12, ComputedAt: epoch},
			Gaps:      []api.Gap{{Field: "blobstore.gatewayUrl", Reason: "no gateway"}, {Field: "blobstore.lastCheck", Reason: "never checked"}}}
		rt.Go.Version, rt.Go.GOMAXPROCS, rt.Go.NumCPU, rt.Go.Goroutines = "go1.26", 2, 2, 80
		rt.Go.Heap.ObjectsBytes, rt.Go.GC.Cycles = 8<<20, 10
		rt.NATS = []api.NATSConnection{{Name: f.name(), Uses: []string{"payments", "chainStatus", "events", "streams"}, Connected: true,
			Status: "CONNECTED", ServerURL: "nats://127.0.0.1:4222", InMsgs: 100 * f.id, OutMsgs: 10 * f.id, InBytes: 4096, OutBytes: 512}}
		return http.StatusOK, rt
	case p == "/v1/events/recent":
		limit := api.DefaultOpsEventsLimit
		if l := r.URL.Query().Get("limit"); l != "" {
			limit, _ = strconv.Atoi(l)
		}
		events := f.events(epoch)
		return http.StatusOK, api.OpsEventsRecent{ContractVersion: api.OpsEventsRecentVersion, NodeID: f.id, Limit: limit, Capacity: 1000,
			Recorded: uint64(len(events)), Events: events[:min(limit, len(events))]}
	case p == "/v1/events/stats":
		last := epoch.Add(time.Duration(10*fakeEvents+int(f.id)) * time.Second)
		byType := map[string]api.OpsEventTypeStats{
			"leader.changed":  {Total: 1, Last24h: 1, LastAt: &epoch, ByReason: map[string]uint64{}},
			"intake.refused":  {Total: 10 * f.id, Last24h: f.id, LastAt: &last, ByReason: map[string]uint64{"invalid_signature": 10 * f.id}},
			"snapshot.sent":   {Total: 0, Last24h: 0, ByReason: map[string]uint64{}},
			"backpressure.on": {Total: 0, Last24h: 0, ByReason: map[string]uint64{}},
		}
		return http.StatusOK, api.OpsEventStats{ContractVersion: api.OpsEventStatsVersion, NodeID: f.id, Since: epoch.Add(-time.Hour), At: epoch,
			Total: 1 + 10*f.id, Last24h: 1 + f.id, BySeverity: map[string]uint64{"info": 10 * f.id, "warn": 1, "critical": 0},
			BySeverity24h: map[string]uint64{"info": f.id, "warn": 1, "critical": 0}, ByType: byType,
			Capacity: 1000, Retained: int(1 + 10*f.id), Recorded: 1 + 10*f.id, Folded: 0}
	case p == "/v1/transactions/summary":
		return http.StatusOK, api.TransactionSummary{ContractVersion: api.TransactionSummaryVersion, NodeID: f.id, Total: 3,
			ByState:      map[string]int{api.TxObserved: 0, api.TxConfirmed: 1, api.TxMatched: 1, api.TxFinalized: 0, api.TxOrphaned: 1},
			AppliedIndex: 12, ComputedAt: epoch,
			Gaps: []api.Gap{{Field: "byState.OBSERVED", Reason: "the chain-watcher publishes a payment once it has its confirmations"}}}
	case strings.HasPrefix(p, "/v1/transactions/"):
		if strings.TrimPrefix(p, "/v1/transactions/") != knownTx {
			return http.StatusNotFound, apierror.Body{Error: apierror.New(apierror.NotFound, "no payment of this transaction is observed")}
		}
		spentBy := api.StatusCommitted
		mined := epoch.Add(-30 * time.Second)
		return http.StatusOK, api.Transaction{ContractVersion: api.TransactionVersion, NodeID: f.id, TxHash: knownTx, State: api.TxMatched,
			Payments: []api.TransactionPayment{{ProposalID: knownID, LogIndex: 1, BlockNumber: 5, BlockHash: "0x" + strings.Repeat("05", 32),
				Confirmations: 2, Payer: knownWallet, Amount: "2000000000000000", Token: "ETH", Class: "EXPRESS", State: api.TxMatched,
				ProposalStatus: &spentBy, History: []api.TransactionStateChange{{State: api.TxObserved, AtMs: mined.UnixMilli()},
					{State: api.TxConfirmed, AtMs: epoch.UnixMilli()}, {State: api.TxMatched, AtMs: committed.UnixMilli()}}}},
			Gaps: []api.Gap{{Field: "payments[].confirmations", Reason: "as published by the chain-watcher"}}}
	case p == "/v1/chain/status":
		return http.StatusOK, fakeChainStatus(f.id, epoch, 1)
	case p == "/v1/blockchain/config":
		return http.StatusOK, api.BlockchainConfig{ContractVersion: "blockchain.config.v1", Mode: "TESTNET", ChainID: 11155111,
			ContractAddress: "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512", PaymentsVerified: true, RequiredConfirmations: 2,
			Prices: api.Prices(), Tokens: map[string]api.Token{"ETH": {Index: 0, Decimals: 18}},
			EIP712:             api.EIP712Domain{Name: "ContentLedger", Version: "1", ChainID: 11155111, VerifyingContract: "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512"},
			EpochLengthSeconds: 384, ContentRoot: "ledger", MaxMessageBytes: 1 << 20}
	}
	return http.StatusNotFound, apierror.Body{Error: apierror.New(apierror.NotFound, "no such route")}
}

// fakeVersion is the software version the fake validators name, and
// fakeEdgeVersion the edge's own in the tests.
const (
	fakeVersion     = "v1.2.3"
	fakeEdgeVersion = "v1.2.4"
)

// fakeEvents is how many events each fake validator keeps.
const fakeEvents = 30

// events are the fake validator's events, newest first: every validator
// saw the first at the same time (a tie), and then one every 10 s, each
// validator a second after the one before it.
func (f *fake) events(epoch time.Time) []api.OpsEvent {
	out := make([]api.OpsEvent, 0, fakeEvents)
	for id := uint64(fakeEvents); id >= 1; id-- {
		e := api.OpsEvent{ID: id, At: epoch.Add(time.Duration(10*int(id-1)+int(f.id)) * time.Second), Type: "intake.refused",
			Severity: api.SeverityInfo, Message: "a proposal was refused at intake: invalid_signature", Count: 1,
			Attributes: api.OpsEventAttributes{Reason: "invalid_signature", Wallet: knownWallet, ProposalID: knownID}}
		if id == 1 {
			term, leader := uint64(3), uint64(1)
			e = api.OpsEvent{ID: 1, At: epoch, Type: "leader.changed", Severity: api.SeverityInfo, Message: "validator-1 leads term 3", Count: 1,
				Attributes: api.OpsEventAttributes{Term: &term, Leader: &leader, Role: "FOLLOWER"}}
		}
		out = append(out, e)
	}
	return out
}

// edge runs the edge against the validators at urls.
func edge(t *testing.T, lanes auth.Lanes, urls ...string) *httptest.Server {
	t.Helper()
	pool, err := upstream.NewPool(upstream.Config{URLs: urls, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	docs, contract := documents(t)
	srv := httptest.NewServer(New(Config{ClusterID: "test", Lanes: lanes, EdgeDocument: docs.EdgeYAML, SourceDocument: docs.SourceYAML,
		Version: fakeEdgeVersion}, pool, contract, zap.NewNop()))
	t.Cleanup(srv.Close)
	return srv
}

func documents(t testing.TB) (*openapi.Documents, *openapi.SourceContract) {
	t.Helper()
	docs, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	contract, err := docs.SourceContract()
	if err != nil {
		t.Fatal(err)
	}
	return docs, contract
}

// get asks the edge; the body must be JSON.
func get(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	status, _, body := do(t, http.MethodGet, url, token)
	return status, body
}

func do(t *testing.T, method, url, token string) (int, http.Header, map[string]any) {
	t.Helper()
	status, header, raw := fetch(t, method, url, token)
	var body map[string]any
	if method != http.MethodHead {
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v", method, url, err)
		}
	}
	return status, header, body
}

func fetch(t *testing.T, method, url, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
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
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

// assertEnvelope checks the envelope's members and returns data.
func assertEnvelope(t *testing.T, status int, body map[string]any) map[string]any {
	t.Helper()
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, body)
	}
	if len(body) != 4 || body["version"] != "v1" || body["clusterId"] != "test" || body["generatedAt"] == nil {
		t.Fatalf("not an ops envelope: %v", body)
	}
	return body["data"].(map[string]any)
}

// getData asks the edge for url without a token and returns the data of
// its envelope.
func getData(t *testing.T, url string) map[string]any {
	t.Helper()
	status, body := get(t, url, "")
	return assertEnvelope(t, status, body)
}

// assertError checks the error envelope and returns its error member.
func assertError(t *testing.T, status, wantStatus int, body map[string]any, code string, retryable bool) map[string]any {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d: %v", status, wantStatus, body)
	}
	if len(body) != 3 || body["version"] != "v1" || body["generatedAt"] == nil {
		t.Fatalf("not an ops error envelope: %v", body)
	}
	e := body["error"].(map[string]any)
	if e["code"] != code || e["retryable"] != retryable || e["message"] == "" {
		t.Fatalf("error %v, want code %s retryable %v", e, code, retryable)
	}
	return e
}

// fakeChainStatus is a validator's chain status: head 1000 at epoch, the
// watcher lag blocks behind the safe block, the status half a second old.
func fakeChainStatus(id uint64, epoch time.Time, lag uint64) api.ChainStatus {
	fin, cursor, cursorHash := uint64(960), 998-lag, "0x"+strings.Repeat("c0", 32)
	headLag := 1000 - cursor
	return api.ChainStatus{ContractVersion: api.ChainStatusVersion, NodeID: id, Mode: "TESTNET", ChainID: 11155111,
		Watcher: &api.WatcherStatus{Head: 1000, HeadHash: "0x" + strings.Repeat("aa", 32), HeadTime: epoch, HeadAgeMs: 4000,
			FinalizedBlock: &fin, SafeBlock: 998, Confirmations: 2, CursorBlock: &cursor, CursorHash: &cursorHash, LagBlocks: &lag,
			HeadLagBlocks: &headLag, PendingPayments: 1, ObservedAt: epoch.Add(3500 * time.Millisecond),
			ReceivedAt: epoch.Add(3600 * time.Millisecond), AgeMs: 500},
		Streams: []api.StreamState{
			{Name: "CHAIN_EVENTS", Messages: 40, Bytes: 12_000, FirstSeq: 1, LastSeq: 40, Consumers: 3, ReadAt: epoch},
			{Name: "LEDGER_EVENTS", Messages: 7, Bytes: 2_100, FirstSeq: 1, LastSeq: 7, Consumers: 0, ReadAt: epoch},
		},
		Gaps: []api.Gap{}}
}
