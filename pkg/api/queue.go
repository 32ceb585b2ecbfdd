package api

import (
	"fmt"
	"strconv"
	"strings"
)

// Contract version markers of the proposal queue routes.
const (
	QueueStatsVersion   = "proposal.queue-stats.v1"
	PendingCountVersion = "proposal.pending-count.v1"
)

// QueueStats is the body of GET /v1/proposals/queue/stats: the contract's
// "Queue statistics fields", as the leader's pipeline sees them (a
// follower holds no queue and reports zeros for it; its cumulative
// counters are the replicated ones, like the leader's).
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
	// The packing buffer holding QueuedProposals: PackingBuckets (epoch,
	// payment class) buckets, and in them MicroBatches runs of one wallet
	// and organization released together.
	PackingBuckets int `json:"packingBuckets"`
	MicroBatches   int `json:"microBatches"`
	// ProposalsByEpoch and ProposalsByEpochAndTier count the proposals
	// not yet applied (accepted, being verified, queued or in flight),
	// by the epoch they were accepted in (decimal keys) and payment class.
	ProposalsByEpoch        map[string]int            `json:"proposalsByEpoch"`
	ProposalsByEpochAndTier map[string]map[string]int `json:"proposalsByEpochAndTier"`
	PendingEpochStats       []PendingEpoch            `json:"pendingEpochStats"`
	CurrentEpoch            uint64                    `json:"currentEpoch"`
	FinalizedEpoch          uint64                    `json:"finalizedEpoch"`
	EpochsUntilFinality     uint64                    `json:"epochsUntilFinality"`
	// The cumulative counters are derived from the replicated proposal
	// counts of the applied state, not from a process's memory: every
	// validator holds the same at one applied index, and they survive
	// restarts and leader changes without falling back. A decision
	// counts once applied:
	//   - VerifiedCount: proposals that passed verification and
	//     committed (COMMITTED or FINALIZED). A decision still on its way
	//     through raft counts once applied (see QueuedProposals and
	//     BackpressurePendingRawCount); one the verifiers passed but apply
	//     rejected (GC debt, an invalid field) counts in RejectedCount.
	//   - TotalFinalizedCount: committed proposals whose epoch is final.
	//   - ProcessedCount: decided proposals applied, VerifiedCount +
	//     RejectedCount. An id a rejected proposal left free and a later
	//     proposal committed under (ADR 0028) counts both decisions.
	//   - RejectedCount: proposals rejected, RejectedByReason by reason
	//     code.
	VerifiedCount       uint64            `json:"verifiedCount"`
	TotalFinalizedCount uint64            `json:"totalFinalizedCount"`
	ProcessedCount      uint64            `json:"processedCount"`
	RejectedCount       uint64            `json:"rejectedCount"`
	RejectedByReason    map[string]uint64 `json:"rejectedByReason"`
	// AwaitingPayment counts accepted proposals whose payment the
	// verifiers have not seen yet; Verifiers is the size of their pool.
	AwaitingPayment    int    `json:"awaitingPayment"`
	Verifiers          int    `json:"verifiers"`
	BackpressureEvents uint64 `json:"backpressureEvents"`
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

// GcAccountVersion marks the body of GET /v1/gc/account/{walletAddress}.
const GcAccountVersion = "gc.account.v1"

// GcAccount is a wallet's GC debt account (ADR 0011). Debts are
// decimal strings with two or more decimals ("100.00"); the *Micros fields
// carry the exact integers (millionths of a unit).
type GcAccount struct {
	ContractVersion    string `json:"contractVersion"`
	Wallet             string `json:"wallet"`
	PendingDebt        string `json:"pendingDebt"`
	ExecutedDebt       string `json:"executedDebt"`
	Limit              string `json:"limit"`
	WritesBlocked      bool   `json:"writesBlocked"`
	PendingDebtMicros  uint64 `json:"pendingDebtMicros"`
	ExecutedDebtMicros uint64 `json:"executedDebtMicros"`
	LimitMicros        uint64 `json:"limitMicros"`
	Paid               string `json:"paid"`
	PaidMicros         uint64 `json:"paidMicros"` // everything paid, also beyond the debt of the day
	Deletes            uint64 `json:"deletes"`
	DeletedBytes       uint64 `json:"deletedBytes"`
}

// MaxDebtAmount is the largest amount an operator may give as a wallet's
// GC debt limit or pay by hand, in millionths: 1,000,000.00. It keeps an
// operator's typing error from lifting a limit out of sight.
const MaxDebtAmount = 1_000_000 * 1_000_000

// DebtString formats micros as a decimal amount: two decimals, more only
// when they are not zero (1_500_000 is "1.50", 1_234_567 is "1.234567").
func DebtString(micros uint64) string {
	whole, frac := micros/1_000_000, micros%1_000_000
	s := strconv.FormatUint(whole, 10) + "." + fmt.Sprintf("%06d", frac)
	for len(s) > len(strconv.FormatUint(whole, 10))+3 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	return s
}

// ParseDebt parses a decimal amount of at most six decimals into micros.
func ParseDebt(s string) (uint64, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 6 || strings.ContainsAny(whole+frac, "+-") {
		return 0, false
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > (1<<63)/1_000_000 {
		return 0, false
	}
	f := uint64(0)
	if frac != "" {
		v, err := strconv.ParseUint(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil {
			return 0, false
		}
		f = v
	}
	return w*1_000_000 + f, true
}

// Contract version markers of the release-flow and epoch routes.
const (
	ReleaseFlowVersion         = "proposal.release-flow.v1"
	ExplorerReleaseFlowVersion = "explorer.release-flow.v1"
	EpochOverlayVersion        = "proposal.epoch-overlay.v1"
	ExplorerEpochsVersion      = "explorer.epochs.v1"
)

// ReleaseFlow is the body of /v1/proposals/release-flow (and, with its own
// marker, /v1/explorer/release-flow): what holds proposals back, and where
// they are.
type ReleaseFlow struct {
	ContractVersion    string              `json:"contractVersion"`
	Governor           Governor            `json:"governor"`
	Stages             ReleaseStages       `json:"stages"`
	MaxPendingMessages int                 `json:"maxPendingMessages"`
	MaxPending         int                 `json:"maxPending"`
	MaxBatch           int                 `json:"maxBatch"`
	Tiers              map[string]TierFlow `json:"tiers"`
}

// Governor says whether the sender releases, holds or sheds, and why.
type Governor struct {
	State   string   `json:"state"`  // open, holding (backpressure), shedding (intake full)
	Action  string   `json:"action"` // release, hold, shed
	Reasons []string `json:"reasons"`
}

// ReleaseStages counts proposals not yet applied by stage. Verified
// proposals go straight into the packing queue, so Verified is what is
// decided and not yet queued.
type ReleaseStages struct {
	Unverified   int `json:"unverified"` // accepted, waiting for their payment
	Verified     int `json:"verified"`
	Packing      int `json:"packing"`      // decided, queued for a batch
	ReadyBuckets int `json:"readyBuckets"` // (epoch, class) buckets holding packed proposals
	MicroBatches int `json:"microBatches"` // micro-batches of one wallet and organization in them
	Batches      int `json:"batches"`      // proposed and not yet applied
	InFlight     int `json:"inFlight"`     // proposals in those batches
	// OldestQueuedAgeMs is how long the oldest queued proposal has waited.
	OldestQueuedAgeMs int64 `json:"oldestQueuedAgeMs"`
}

// TierFlow is one payment class in ReleaseFlow.
type TierFlow struct {
	Pending  int    `json:"pending"`
	Released uint64 `json:"released"` // sealed into batches since this validator started
}

// EpochOverlay is the body of /v1/proposals/epochs: the proposals not yet
// applied by the epoch they were accepted in, with the epochs' place.
type EpochOverlay struct {
	ContractVersion string           `json:"contractVersion"`
	CurrentEpoch    uint64           `json:"currentEpoch"`
	NextEpoch       uint64           `json:"nextEpoch"`
	FinalizedEpoch  uint64           `json:"finalizedEpoch"`
	Epochs          []EpochProposals `json:"epochs"`
}

// EpochProposals is one epoch in EpochOverlay.
type EpochProposals struct {
	Epoch     uint64         `json:"epoch"`
	Current   bool           `json:"current"`
	Finalized bool           `json:"finalized"`
	ByStatus  map[string]int `json:"byStatus"`
	ByTier    map[string]int `json:"byTier"`
}
