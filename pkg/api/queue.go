package api

// Contract version markers of the proposal queue routes.
const (
	QueueStatsVersion   = "proposal.queue-stats.v1"
	PendingCountVersion = "proposal.pending-count.v1"
)

// QueueStats is the body of GET /v1/proposals/queue/stats: the contract's
// "Queue statistics fields", as the leader's pipeline sees them (a
// follower holds no queue and reports zeros).
type QueueStats struct {
	ContractVersion string `json:"contractVersion"`
	// BackpressureActive: decided proposals wait because the in-flight
	// count is at max_pending_messages.
	BackpressureActive bool `json:"backpressureActive"`
	// BackpressurePendingRawCount is the in-flight count: proposals
	// proposed to raft and not yet applied.
	BackpressurePendingRawCount int `json:"backpressurePendingRawCount"`
	MaxPendingMessages          int `json:"maxPendingMessages"`
	// BatchQueueSize is the batches the decided proposals waiting for the
	// sender make (QueuedProposals in batches of at most MaxBatch).
	BatchQueueSize  int `json:"batchQueueSize"`
	QueuedProposals int `json:"queuedProposals"`
	// ProposalsByEpoch and ProposalsByEpochAndTier count the proposals
	// not yet applied (accepted, being verified, queued or in flight),
	// by the epoch they were accepted in (decimal keys) and payment class.
	ProposalsByEpoch        map[string]int            `json:"proposalsByEpoch"`
	ProposalsByEpochAndTier map[string]map[string]int `json:"proposalsByEpochAndTier"`
	PendingEpochStats       []PendingEpoch            `json:"pendingEpochStats"`
	CurrentEpoch            uint64                    `json:"currentEpoch"`
	FinalizedEpoch          uint64                    `json:"finalizedEpoch"`
	EpochsUntilFinality     uint64                    `json:"epochsUntilFinality"`
	// Cumulative counters of this validator's pipeline since it started.
	VerifiedCount       uint64 `json:"verifiedCount"`
	TotalFinalizedCount uint64 `json:"totalFinalizedCount"`
	ProcessedCount      uint64 `json:"processedCount"` // decided proposals applied
	RejectedCount       uint64 `json:"rejectedCount"`
	BackpressureEvents  uint64 `json:"backpressureEvents"`
	// Rates over the last 10 s: proposals accepted at intake, and decided
	// proposals applied.
	IngressPerSec float64 `json:"ingressPerSec"`
	CommitPerSec  float64 `json:"commitPerSec"`
}

// PendingEpoch is one epoch's line in QueueStats.PendingEpochStats.
type PendingEpoch struct {
	Epoch   uint64 `json:"epoch"`
	Pending int    `json:"pending"`
	// OldestAgeMs is how long the oldest of them has waited since intake.
	OldestAgeMs int64 `json:"oldestAgeMs"`
	// Finalized: the epoch is final on chain (its proposals finalize once
	// committed).
	Finalized bool `json:"finalized"`
}

// PendingCount is the body of GET /v1/proposals/pending/count.
type PendingCount struct {
	ContractVersion string `json:"contractVersion"`
	Pending         int    `json:"pending"`
}

// MockEpochStatusVersion marks the body of the MOCK epoch routes.
const MockEpochStatusVersion = "mock.epoch-status.v1"

// MockEpochStatus is the body of /api/mock/epoch-status, and the answer of
// /api/mock/advance-epoch and /api/mock/set-epoch-offset (MOCK mode only):
// the leader's epoch clock, which stamps proposals and decides finality.
type MockEpochStatus struct {
	ContractVersion    string `json:"contractVersion"`
	NodeID             uint64 `json:"nodeId"`
	CurrentEpoch       uint64 `json:"currentEpoch"`
	FinalizedEpoch     uint64 `json:"finalizedEpoch"`
	Offset             int64  `json:"offset"`
	EpochLengthSeconds uint64 `json:"epochLengthSeconds"`
	NextEpochInMs      int64  `json:"nextEpochInMs"`
}
