package payment

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// ProposalPaid is one ProposalPaid log of the payment contract, with where
// the chain put it.
type ProposalPaid struct {
	ChainID            uint64
	Contract           common.Address
	ProposalID         common.Hash
	Payer              common.Address
	Amount             *big.Int
	Class              Class
	Token              Token
	PreferredValidator common.Address
	Timestamp          uint64 // the event's timestamp field, unix seconds
	TxHash             common.Hash
	BlockHash          common.Hash
	BlockNumber        uint64
	LogIndex           uint
	Removed            bool // a reorg took the log back
	Confirmations      uint64
}

// DebtPaid is one DebtPaid log of the payment contract: Amount wei paid
// towards Wallet's GC debt (ADR 0011), by Payer, who may be anyone.
type DebtPaid struct {
	ChainID       uint64
	Contract      common.Address
	Wallet        common.Address
	Payer         common.Address
	Amount        *big.Int // wei
	Timestamp     uint64   // the event's timestamp field, unix seconds
	TxHash        common.Hash
	BlockHash     common.Hash
	BlockNumber   uint64
	LogIndex      uint
	Removed       bool // a reorg took the log back
	Confirmations uint64
}

// MsgID is the NATS message id of the payment (ADR 0023):
// <chainId>:<blockHash>:<logIndex>. A retraction of the same log carries a
// ":removed" suffix so that it is not deduplicated against the original.
func (p ProposalPaid) MsgID() string { return msgID(p.ChainID, p.BlockHash, p.LogIndex, p.Removed) }

// MsgID is the NATS message id of the debt payment, by the same scheme as
// ProposalPaid.MsgID. Payments and debt payments share the stream and its
// duplicate window; a log index is unique within a block whatever the
// event, so the two never collide.
func (d DebtPaid) MsgID() string { return msgID(d.ChainID, d.BlockHash, d.LogIndex, d.Removed) }

func msgID(chainID uint64, block common.Hash, logIndex uint, removed bool) string {
	id := fmt.Sprintf("%d:%s:%d", chainID, block.Hex(), logIndex)
	if removed {
		id += ":removed"
	}
	return id
}

// Subject is the NATS subject of payments observed on a chain.
func Subject(chainID uint64) string { return fmt.Sprintf("chain.%d.payments", chainID) }

// DebtSubject is the NATS subject of debt payments (DebtPaid logs) observed
// on a chain.
func DebtSubject(chainID uint64) string { return fmt.Sprintf("chain.%d.debts", chainID) }

// EpochSubject is the NATS subject of epoch updates of a chain.
func EpochSubject(chainID uint64) string { return fmt.Sprintf("chain.%d.epochs", chainID) }

// Proto converts the payment to its wire form.
func (p ProposalPaid) Proto() *ledgerpb.Payment {
	return &ledgerpb.Payment{
		ChainId:            p.ChainID,
		Contract:           p.Contract.Bytes(),
		ProposalId:         p.ProposalID.Bytes(),
		Payer:              p.Payer.Bytes(),
		Amount:             amountBytes(p.Amount),
		Tier:               p.Class.Proto(),
		Token:              ledgerpb.PaymentToken(p.Token),
		PreferredValidator: p.PreferredValidator.Bytes(),
		PaidAt:             p.Timestamp,
		TxHash:             p.TxHash.Bytes(),
		BlockHash:          p.BlockHash.Bytes(),
		BlockNumber:        p.BlockNumber,
		LogIndex:           uint32(p.LogIndex),
		Removed:            p.Removed,
		Confirmations:      p.Confirmations,
	}
}

// ErrMalformedPayment is returned for a wire payment whose fields have the
// wrong lengths or values.
var ErrMalformedPayment = errors.New("malformed payment")

// wireField is a byte field of a wire payment and the length it must have.
type wireField struct {
	name string
	b    []byte
	size int
}

func address(name string, b []byte) wireField { return wireField{name, b, common.AddressLength} }
func hash(name string, b []byte) wireField    { return wireField{name, b, common.HashLength} }

// checkWire checks the lengths of a wire payment's fields, in order, and
// that its amount fits a uint256.
func checkWire(amount []byte, fields ...wireField) error {
	for _, f := range fields {
		if len(f.b) != f.size {
			return fmt.Errorf("%w: %s is %d bytes", ErrMalformedPayment, f.name, len(f.b))
		}
	}
	if len(amount) > 32 {
		return fmt.Errorf("%w: amount is %d bytes", ErrMalformedPayment, len(amount))
	}
	return nil
}

// amountBytes is a wire amount: big-endian, no leading zeros, empty for nil.
func amountBytes(a *big.Int) []byte {
	if a == nil {
		return []byte{}
	}
	return a.Bytes()
}

// FromProto converts a wire payment back, checking every field's length.
func FromProto(m *ledgerpb.Payment) (ProposalPaid, error) {
	if m == nil {
		return ProposalPaid{}, fmt.Errorf("%w: empty", ErrMalformedPayment)
	}
	if err := checkWire(m.Amount,
		address("contract", m.Contract), address("payer", m.Payer), address("preferredValidator", m.PreferredValidator),
		hash("proposalId", m.ProposalId), hash("txHash", m.TxHash), hash("blockHash", m.BlockHash)); err != nil {
		return ProposalPaid{}, err
	}
	class, token := ClassFromProto(m.Tier), Token(m.Token)
	if !class.Valid() || !token.Valid() {
		return ProposalPaid{}, fmt.Errorf("%w: tier %d or token %d unknown", ErrMalformedPayment, m.Tier, m.Token)
	}
	return ProposalPaid{
		ChainID:            m.ChainId,
		Contract:           common.BytesToAddress(m.Contract),
		ProposalID:         common.BytesToHash(m.ProposalId),
		Payer:              common.BytesToAddress(m.Payer),
		Amount:             new(big.Int).SetBytes(m.Amount),
		Class:              class,
		Token:              token,
		PreferredValidator: common.BytesToAddress(m.PreferredValidator),
		Timestamp:          m.PaidAt,
		TxHash:             common.BytesToHash(m.TxHash),
		BlockHash:          common.BytesToHash(m.BlockHash),
		BlockNumber:        m.BlockNumber,
		LogIndex:           uint(m.LogIndex),
		Removed:            m.Removed,
		Confirmations:      m.Confirmations,
	}, nil
}

// Proto converts the debt payment to its wire form.
func (d DebtPaid) Proto() *ledgerpb.DebtPayment {
	return &ledgerpb.DebtPayment{
		ChainId:       d.ChainID,
		Contract:      d.Contract.Bytes(),
		Wallet:        d.Wallet.Bytes(),
		Payer:         d.Payer.Bytes(),
		Amount:        amountBytes(d.Amount),
		PaidAt:        d.Timestamp,
		TxHash:        d.TxHash.Bytes(),
		BlockHash:     d.BlockHash.Bytes(),
		BlockNumber:   d.BlockNumber,
		LogIndex:      uint32(d.LogIndex),
		Removed:       d.Removed,
		Confirmations: d.Confirmations,
	}
}

// DebtPaidFromProto converts a wire debt payment back, checking every
// field's length as FromProto does; the error wraps ErrMalformedPayment.
func DebtPaidFromProto(m *ledgerpb.DebtPayment) (DebtPaid, error) {
	if m == nil {
		return DebtPaid{}, fmt.Errorf("%w: empty", ErrMalformedPayment)
	}
	if err := checkWire(m.Amount,
		address("contract", m.Contract), address("wallet", m.Wallet), address("payer", m.Payer),
		hash("txHash", m.TxHash), hash("blockHash", m.BlockHash)); err != nil {
		return DebtPaid{}, err
	}
	return DebtPaid{
		ChainID:       m.ChainId,
		Contract:      common.BytesToAddress(m.Contract),
		Wallet:        common.BytesToAddress(m.Wallet),
		Payer:         common.BytesToAddress(m.Payer),
		Amount:        new(big.Int).SetBytes(m.Amount),
		Timestamp:     m.PaidAt,
		TxHash:        common.BytesToHash(m.TxHash),
		BlockHash:     common.BytesToHash(m.BlockHash),
		BlockNumber:   m.BlockNumber,
		LogIndex:      uint(m.LogIndex),
		Removed:       m.Removed,
		Confirmations: m.Confirmations,
	}, nil
}
