// Package api holds the JSON bodies of the validator routes that clients,
// the edge and ledgerctl read: the proposal receipt and status record
// (ADR 0005), the blockchain configuration and the node view of
// /api/explore. Error bodies are in package apierror.
package api

import (
	"encoding/json"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// Status names of a proposal (ADR 0005).
const (
	StatusPending   = "PENDING"
	StatusVerified  = "VERIFIED"
	StatusCommitted = "COMMITTED"
	StatusFinalized = "FINALIZED"
	StatusRejected  = "REJECTED"
)

// Terminal reports whether a proposal in this status changes no more, short
// of finality.
func Terminal(status string) bool {
	return status == StatusCommitted || status == StatusFinalized || status == StatusRejected
}

// Committed reports whether a proposal in status was committed: COMMITTED,
// or FINALIZED since (its epoch became final).
func Committed(status string) bool {
	return status == StatusCommitted || status == StatusFinalized
}

// StatusName returns the name of a wire status (ADR 0005).
func StatusName(s ledgerpb.Status) string {
	switch s {
	case ledgerpb.Status_STATUS_PENDING:
		return StatusPending
	case ledgerpb.Status_STATUS_VERIFIED:
		return StatusVerified
	case ledgerpb.Status_STATUS_COMMITTED:
		return StatusCommitted
	case ledgerpb.Status_STATUS_FINALIZED:
		return StatusFinalized
	case ledgerpb.Status_STATUS_REJECTED:
		return StatusRejected
	}
	return "UNKNOWN"
}

// Links are the related routes of a proposal.
type Links struct {
	Status string `json:"status"`
}

// Receipt is the 202 body of POST /v1/propose-write and /v1/propose-delete.
type Receipt struct {
	ProposalID string `json:"proposalId"`
	Status     string `json:"status"`
	Path       string `json:"path"`
	Links      Links  `json:"links"`
}

// StatusLink is the status route of a proposal.
func StatusLink(proposalID string) string { return "/v1/proposals/" + proposalID + "/status" }

// ProposalStatus is the body of GET /v1/proposals/{id}/status.
type ProposalStatus struct {
	ProposalID     string     `json:"proposalId"`
	Status         string     `json:"status"`
	Reason         string     `json:"reason,omitempty"`
	Action         string     `json:"action"`
	Wallet         string     `json:"wallet"`
	Path           string     `json:"path"`
	Tier           string     `json:"tier"`
	EthereumTxHash string     `json:"ethereumTxHash,omitempty"`
	Epoch          uint64     `json:"epoch"`
	CommitIndex    uint64     `json:"commitIndex,omitempty"`
	AcceptedAt     time.Time  `json:"acceptedAt"`
	CommittedAt    *time.Time `json:"committedAt,omitempty"`
	FinalizedAt    *time.Time `json:"finalizedAt,omitempty"`
	Payment        *Payment   `json:"payment,omitempty"`
	// PaymentOrphaned is set while a chain reorganization has taken back
	// the payment log the proposal holds (COMMITTED or FINALIZED: it was
	// committed on a payment the chain no longer has, a signal for an
	// operator) or may be decided with (PENDING: such a decision is
	// rejected payment_orphaned). It goes when the same transaction is
	// mined again, and Payment then names the new block.
	PaymentOrphaned *OrphanedPayment `json:"paymentOrphaned,omitempty"`
}

// OrphanedPayment is the payment log a reorg took back: the block it was
// in, and when the validators recorded the retraction.
type OrphanedPayment struct {
	TxHash      string    `json:"txHash"`
	BlockNumber uint64    `json:"blockNumber"`
	BlockHash   string    `json:"blockHash"`
	LogIndex    uint32    `json:"logIndex"`
	RecordedAt  time.Time `json:"recordedAt"`
}

// Payment is the payment a committed proposal spent.
type Payment struct {
	TxHash      string `json:"txHash"`
	BlockNumber uint64 `json:"blockNumber"`
	BlockHash   string `json:"blockHash"`
	LogIndex    uint32 `json:"logIndex"`
	Payer       string `json:"payer"`
	Amount      string `json:"amount"` // smallest unit, decimal
	Token       string `json:"token"`
	Tier        string `json:"tier"`
}

// StatusFromRecord renders a replicated or pending proposal record.
func StatusFromRecord(r *ledgerpb.ProposalRecord) ProposalStatus {
	p := r.GetProposal()
	s := ProposalStatus{
		ProposalID:  common.BytesToHash(p.GetId()).Hex(),
		Status:      StatusName(r.GetStatus()),
		Reason:      r.GetReason(),
		Action:      actionName(p.GetAction()),
		Wallet:      lowerAddress(p.GetWallet()),
		Path:        p.GetPath(),
		Tier:        payment.ClassFromProto(p.GetTier()).Name(),
		Epoch:       p.GetEpoch(),
		CommitIndex: r.GetCommitIndex(),
		AcceptedAt:  time.UnixMilli(p.GetAcceptedAtMs()).UTC(),
	}
	if tx := p.GetEthereumTxHash(); len(tx) > 0 {
		s.EthereumTxHash = common.BytesToHash(tx).Hex()
	}
	if ms := r.GetCommittedAtMs(); ms > 0 {
		t := time.UnixMilli(ms).UTC()
		s.CommittedAt = &t
	}
	if ms := r.GetFinalizedAtMs(); ms > 0 {
		t := time.UnixMilli(ms).UTC()
		s.FinalizedAt = &t
	}
	if m := r.GetPaymentOrphaned(); m != nil {
		s.PaymentOrphaned = &OrphanedPayment{TxHash: common.BytesToHash(m.GetTxHash()).Hex(), BlockNumber: m.GetBlockNumber(),
			BlockHash: common.BytesToHash(m.GetBlockHash()).Hex(), LogIndex: m.GetLogIndex(), RecordedAt: time.UnixMilli(m.GetAtMs()).UTC()}
	}
	if pay, err := payment.FromProto(r.GetPayment()); err == nil {
		s.Payment = &Payment{
			TxHash:      pay.TxHash.Hex(),
			BlockNumber: pay.BlockNumber,
			BlockHash:   pay.BlockHash.Hex(),
			LogIndex:    uint32(pay.LogIndex),
			Payer:       lowerAddress(pay.Payer.Bytes()),
			Amount:      pay.Amount.String(),
			Token:       pay.Token.String(),
			Tier:        pay.Class.Name(),
		}
	}
	return s
}

func actionName(a ledgerpb.Action) string {
	switch a {
	case ledgerpb.Action_ACTION_WRITE:
		return "write"
	case ledgerpb.Action_ACTION_DELETE:
		return "delete"
	}
	return ""
}

// lowerAddress renders a 20-byte address as lowercase 0x hex, the form of
// content paths and events.
func lowerAddress(b []byte) string {
	const hex = "0123456789abcdef"
	a := common.BytesToAddress(b)
	out := make([]byte, 2+2*len(a))
	out[0], out[1] = '0', 'x'
	for i, c := range a {
		out[2+2*i], out[3+2*i] = hex[c>>4], hex[c&0xf]
	}
	return string(out)
}

// Price is a class's price in both columns of the contract page.
type Price struct {
	Wei  string `json:"wei"`
	ETH  string `json:"eth"`
	USDC string `json:"usdc"` // whole units, e.g. "3.25"
	// USDCUnits is the price in the token's 6-decimal unit.
	USDCUnits string `json:"usdcUnits"`
	// TierIndex is the contract's Tier enum value.
	TierIndex uint8 `json:"tierIndex"`
}

// BlockchainConfig is the body of GET /v1/blockchain/config: everything a
// client needs to build the EIP-712 domain and pay for a proposal.
type BlockchainConfig struct {
	ContractVersion       string           `json:"contractVersion"`
	Mode                  string           `json:"mode"`
	ChainID               uint64           `json:"chainId"`
	ContractAddress       string           `json:"contractAddress"`
	PaymentsVerified      bool             `json:"paymentsVerified"`
	RequiredConfirmations uint64           `json:"requiredConfirmations"`
	Prices                map[string]Price `json:"prices"` // by lowercase class name
	Tokens                map[string]Token `json:"tokens"`
	EIP712                EIP712Domain     `json:"eip712Domain"`
	EpochLengthSeconds    uint64           `json:"epochLengthSeconds"`
	ContentRoot           string           `json:"contentRoot"`
	MaxMessageBytes       int              `json:"maxMessageBytes"`
}

// Token describes a payment token of the contract.
type Token struct {
	Index    uint8  `json:"index"` // the contract's PaymentToken enum value
	Decimals int    `json:"decimals"`
	Address  string `json:"address,omitempty"`
}

// EIP712Domain is the signing domain of proposals (ADR 0002).
type EIP712Domain struct {
	Name              string `json:"name"`
	Version           string `json:"version"`
	ChainID           uint64 `json:"chainId"`
	VerifyingContract string `json:"verifyingContract"`
}

// Prices returns the price table of the contract.
func Prices() map[string]Price {
	out := make(map[string]Price, len(payment.Classes))
	for _, c := range payment.Classes {
		out[c.Name()] = Price{
			Wei:       c.Price(payment.ETH).String(),
			ETH:       payment.FormatAmount(c.Price(payment.ETH), payment.ETH),
			USDC:      payment.FormatAmount(c.Price(payment.USDC), payment.USDC),
			USDCUnits: c.Price(payment.USDC).String(),
			TierIndex: uint8(c),
		}
	}
	return out
}

// FolderType is the primary type of a virtual node: a path with content
// below it but no node of its own, such as a wallet's root.
const FolderType = "ledger:folder"

// Node is the body of GET /api/explore: one node with its properties and the
// names of its direct children.
type Node struct {
	Path        string                     `json:"path"`
	PrimaryType string                     `json:"primaryType"`
	Virtual     bool                       `json:"virtual,omitempty"`
	Properties  map[string]json.RawMessage `json:"properties"`
	Children    []string                   `json:"children"`
	// The members below are absent on virtual nodes.
	Wallet       string     `json:"wallet,omitempty"`
	Organization string     `json:"organization,omitempty"`
	ContentType  string     `json:"contentType,omitempty"`
	ProposalID   string     `json:"proposalId,omitempty"`
	Revision     uint64     `json:"revision,omitempty"`
	CommitIndex  uint64     `json:"commitIndex,omitempty"`
	UpdatedAt    *time.Time `json:"updatedAt,omitempty"`
}

// VirtualNode renders a path that has children but no node.
func VirtualNode(path string, children []string) Node {
	return Node{Path: path, PrimaryType: FolderType, Virtual: true, Properties: map[string]json.RawMessage{}, Children: children}
}

// NodeFromRecord renders a stored node and its children's names.
func NodeFromRecord(n *ledgerpb.Node, children []string) Node {
	props := make(map[string]json.RawMessage, len(n.GetProperties()))
	for _, p := range n.GetProperties() {
		props[p.GetName()] = json.RawMessage(p.GetValueJson())
	}
	if children == nil {
		children = []string{}
	}
	updated := time.UnixMilli(n.GetUpdatedAtMs()).UTC()
	return Node{
		Path:         n.GetPath(),
		PrimaryType:  n.GetPrimaryType(),
		Properties:   props,
		Children:     children,
		Wallet:       lowerAddress(n.GetWallet()),
		Organization: n.GetOrganization(),
		ContentType:  n.GetContentType(),
		ProposalID:   common.BytesToHash(n.GetProposalId()).Hex(),
		Revision:     n.GetRevision(),
		CommitIndex:  n.GetCommitIndex(),
		UpdatedAt:    &updated,
	}
}

// Route layers of the contract's taxonomy, as /v1/index names them.
const (
	LayerSource          = "source"
	LayerLocalUI         = "local-ui"
	LayerLocalDiagnostic = "local-diagnostic"
	LayerInternal        = "internal"
	// LayerUnclassified is a route the validator serves without a layer:
	// a defect.
	LayerUnclassified = "unclassified"
)

// RouteIndex is the body of GET /v1/index: the routes this validator
// serves now, and every route of the contract's validator tables.
// MissingSourceRoutes are the contract's source routes it does not serve;
// MissingRoutes, the paths of the contract's routes of any layer that its
// route table does not have (the software does not implement them).
type RouteIndex struct {
	NodeID              uint64          `json:"nodeId"`
	Version             string          `json:"version"`
	Routes              []RouteEntry    `json:"routes"`
	MissingSourceRoutes []string        `json:"missingSourceRoutes"`
	ContractRoutes      []ContractRoute `json:"contractRoutes"`
	MissingRoutes       []string        `json:"missingRoutes"`
}

// ContractRoute is one route of the contract's validator tables (source,
// local-ui, local-diagnostic, internal), as the contract writes it: Method
// is "" where the contract names none, Path has {name} parameters (and
// "*" for /segments/*), Layer is the contract's. Served is whether this
// validator answers it now: a route of the route table may go unserved in
// a mode (the /api/mock/* routes outside MOCK mode), and one the table
// does not have is in MissingRoutes.
type ContractRoute struct {
	Method string `json:"method,omitempty"`
	Path   string `json:"path"`
	Layer  string `json:"layer"`
	Served bool   `json:"served"`
}

// RouteEntry is one route. Path is written as the contract writes it
// ({name} parameters); Contract says whether the contract names the route
// (false: the project's own); Lane is the access lane the route belongs to
// ("public": none); Auth is "token" when a token guards that lane now,
// "none" otherwise.
type RouteEntry struct {
	Method   string `json:"method"`
	Path     string `json:"path"`
	Layer    string `json:"layer"`
	Contract bool   `json:"contract"`
	Lane     string `json:"lane"`
	Auth     string `json:"auth"`
}
