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
