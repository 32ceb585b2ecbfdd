package api

import "time"

// Contract version markers of the wallet routes.
const (
	WalletContentVersion  = "wallet.content.v1"
	WalletStatsVersion    = "wallet.stats.v1"
	ExplorerWalletVersion = "explorer.wallet.v1"
)

// WalletItem is one node in a wallet's content listing.
type WalletItem struct {
	Path         string     `json:"path"`
	PrimaryType  string     `json:"primaryType"`
	Organization string     `json:"organization"`
	ContentType  string     `json:"contentType,omitempty"`
	ProposalID   string     `json:"proposalId"`
	Revision     uint64     `json:"revision"`
	CommitIndex  uint64     `json:"commitIndex"`
	UpdatedAt    *time.Time `json:"updatedAt,omitempty"`
}

// WalletContent is the body of GET /v1/wallets/content: a page of the
// wallet's nodes in path order (a parent before its children), pages
// counted from 0.
type WalletContent struct {
	ContractVersion string       `json:"contractVersion"`
	Wallet          string       `json:"wallet"`
	WalletPath      string       `json:"walletPath"`
	Page            int          `json:"page"`
	PageSize        int          `json:"pageSize"`
	Items           []WalletItem `json:"items"`
	HasMore         bool         `json:"hasMore"`
}

// WalletStats is the body of GET /v1/wallets/stats.
type WalletStats struct {
	ContractVersion string     `json:"contractVersion"`
	Wallet          string     `json:"wallet"`
	WalletPath      string     `json:"walletPath"`
	ContentCount    uint64     `json:"contentCount"` // live nodes
	TotalWrites     uint64     `json:"totalWrites"`
	TotalDeletes    uint64     `json:"totalDeletes"`
	LastWriteAt     *time.Time `json:"lastWriteAt,omitempty"`
	LastWritePath   string     `json:"lastWritePath,omitempty"`
	GC              GcAccount  `json:"gc"`
}

// ExplorerWallet is the body of GET /v1/explorer/wallets/{walletAddress}:
// the wallet's figures, its GC account, and the first page of its content.
type ExplorerWallet struct {
	WalletStats
	Content []WalletItem `json:"content"` // the first MaxExplorerContent items in path order
	HasMore bool         `json:"hasMoreContent"`
}

// MaxExplorerContent bounds ExplorerWallet.Content.
const MaxExplorerContent = 50

// Contract version markers of the explorer and operation routes.
const (
	ExplorerProposalVersion = "explorer.proposal.v1"
	OperationVersion        = "ops.operation.v1"
	ExplorerSummaryVersion  = "explorer.summary.v1"
	FinalityVersion         = "finality.v1"
)

// ExplorerProposal is the body of /v1/explorer/proposals/{proposalId}: the
// status record (ADR 0005) and the payment transaction it spent.
type ExplorerProposal struct {
	ContractVersion string         `json:"contractVersion"`
	Proposal        ProposalStatus `json:"proposal"`
	Transaction     *Payment       `json:"transaction,omitempty"`
}

// Operation is the body of /v1/ops/operations/{operationId}. Every write
// and delete is an operation whose id is its proposal id; Done is true once
// its status no longer changes short of finality.
type Operation struct {
	ContractVersion string         `json:"contractVersion"`
	OperationID     string         `json:"operationId"`
	Kind            string         `json:"kind"` // proposal.write, proposal.delete
	Done            bool           `json:"done"`
	Status          string         `json:"status"`
	Error           string         `json:"error,omitempty"` // the rejection reason
	Result          ProposalStatus `json:"result"`
}

// Finality is the body of /v1/finality: how far finality has come, and
// what waits for it.
type Finality struct {
	ContractVersion     string `json:"contractVersion"`
	CurrentEpoch        uint64 `json:"currentEpoch"`
	FinalizedEpoch      uint64 `json:"finalizedEpoch"` // as applied state holds it
	EpochsUntilFinality uint64 `json:"epochsUntilFinality"`
	// CommittedUnfinalized counts committed proposals whose epoch is not
	// final yet; OldestUnfinalizedAgeMs is how long the oldest of them has
	// been committed.
	CommittedUnfinalized   uint64 `json:"committedUnfinalized"`
	OldestUnfinalizedEpoch uint64 `json:"oldestUnfinalizedEpoch,omitempty"`
	OldestUnfinalizedAgeMs int64  `json:"oldestUnfinalizedAgeMs"`
	// LastCommitAt is when the last committed proposal's batch was sealed,
	// as applied state holds it (the same on every validator at the same
	// index); null before the first commit.
	LastCommitAt *time.Time `json:"lastCommitAt"`
}

// ExplorerSummary is the body of /v1/explorer/summary: the cluster, queue
// and identity at a glance.
type ExplorerSummary struct {
	ContractVersion string `json:"contractVersion"`
	Identity        struct {
		NodeID          uint64 `json:"nodeId"`
		ClusterID       string `json:"clusterId"`
		Mode            string `json:"mode"`
		ChainID         uint64 `json:"chainId"`
		ContractAddress string `json:"contractAddress"`
		// Version is the validator's software version (pkg/buildinfo).
		Version string `json:"version,omitempty"`
	} `json:"identity"`
	Cluster struct {
		Leader       uint64 `json:"leader"`
		Term         uint64 `json:"term"`
		Members      int    `json:"members"`
		AppliedIndex uint64 `json:"appliedIndex"`
		StateHash    string `json:"stateHash"`
	} `json:"cluster"`
	Queue struct {
		Pending            int  `json:"pending"`
		InFlight           int  `json:"inFlight"`
		BackpressureActive bool `json:"backpressureActive"`
	} `json:"queue"`
	Finality Finality `json:"finality"`
}

// ProposalCountsVersion marks the body of /v1/proposals/counts.
const ProposalCountsVersion = "proposal.counts.v1"

// ProposalCounts is the body of /v1/proposals/counts: decided proposals by
// outcome since the cluster began, as applied state holds them at
// AppliedIndex (identical on every validator at that index).
type ProposalCounts struct {
	ContractVersion  string            `json:"contractVersion"`
	AppliedIndex     uint64            `json:"appliedIndex"`
	Committed        uint64            `json:"committed"` // finalized since included
	Finalized        uint64            `json:"finalized"`
	Rejected         uint64            `json:"rejected"`
	Writes           uint64            `json:"writes"`
	Deletes          uint64            `json:"deletes"`
	RejectedByReason map[string]uint64 `json:"rejectedByReason"`
	// PaymentOrphaned counts the committed proposals whose payment a chain
	// reorganization took back and that no re-mined log pays now: a gauge,
	// not a running total (ProposalStatus.PaymentOrphaned).
	PaymentOrphaned uint64 `json:"paymentOrphaned"`
}
