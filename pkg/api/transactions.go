package api

import "time"

// Markers of the transaction source routes.
const (
	TransactionSummaryVersion = "transactions.summary.v1"
	TransactionVersion        = "transactions.detail.v1"
)

// Transaction states (ADR 0007): a payment transaction is OBSERVED in a
// block, CONFIRMED once it has the configured confirmations (the
// chain-watcher publishes it then), MATCHED when a committed proposal spent
// it, FINALIZED when that proposal is final, and ORPHANED when a reorg took
// it back and nothing re-mined it.
const (
	TxObserved  = "OBSERVED"
	TxConfirmed = "CONFIRMED"
	TxMatched   = "MATCHED"
	TxFinalized = "FINALIZED"
	TxOrphaned  = "ORPHANED"
)

// TransactionStates returns the states in their order.
func TransactionStates() []string {
	return []string{TxObserved, TxConfirmed, TxMatched, TxFinalized, TxOrphaned}
}

// TransactionSummary is GET /v1/transactions/summary: the payment
// transactions this validator has observed, counted by state.
type TransactionSummary struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	// Total counts transactions; ByState has every state, zeros included.
	Total   int            `json:"total"`
	ByState map[string]int `json:"byState"`
	// AppliedIndex is the state the MATCHED and FINALIZED counts are of.
	AppliedIndex uint64    `json:"appliedIndex"`
	ComputedAt   time.Time `json:"computedAt"`
	Gaps         []Gap     `json:"gaps"`
}

// Transaction is GET /v1/transactions/{txHash}: one payment transaction and
// the proposal payments it carries.
type Transaction struct {
	ContractVersion string `json:"contractVersion"`
	NodeID          uint64 `json:"nodeId"`
	TxHash          string `json:"txHash"`
	// State is the state of its payments: the most advanced one that is
	// not ORPHANED, or ORPHANED when all are.
	State    string               `json:"state"`
	Payments []TransactionPayment `json:"payments"`
	Gaps     []Gap                `json:"gaps"`
}

// TransactionPayment is one ProposalPaid log of a transaction.
type TransactionPayment struct {
	ProposalID  string `json:"proposalId"`
	LogIndex    uint   `json:"logIndex"`
	BlockNumber uint64 `json:"blockNumber"`
	BlockHash   string `json:"blockHash"`
	// Confirmations is what the payment had when the chain-watcher
	// published it.
	Confirmations uint64 `json:"confirmations"`
	Payer         string `json:"payer"`
	Amount        string `json:"amount"` // in the token's smallest unit
	Token         string `json:"token"`
	Class         string `json:"class"`
	State         string `json:"state"`
	// ProposalStatus is the status of the proposal it paid for, when this
	// validator holds its record.
	ProposalStatus *string `json:"proposalStatus"`
	// History is each state the payment reached, with when (unix ms):
	// OBSERVED at its block's time, CONFIRMED when this validator received
	// it, MATCHED and FINALIZED from the proposal record, ORPHANED when the
	// retraction arrived.
	History []TransactionStateChange `json:"history"`
}

// TransactionStateChange is one step of a payment's history.
type TransactionStateChange struct {
	State string `json:"state"`
	AtMs  int64  `json:"atMs"`
}
