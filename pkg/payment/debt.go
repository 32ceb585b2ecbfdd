package payment

import (
	"math"
	"math/big"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// DebtMicros converts wei paid with the contract's payDebt into GC debt
// micros (ADR 0011).
//
// The debt unit is one USDC, counted in its 6-decimal smallest unit (micros),
// as GC accounts already are. payDebt takes ETH only, so the wei convert at
// the contract's own ETH:USDC ratio, the one its class prices state: the
// Standard class costs Standard.Price(ETH) wei or Standard.Price(USDC)
// micros (0.001 ETH = 3.25 units). Every class has the same ratio (a test
// holds the price table to that), so the choice of Standard is no choice,
// and the ratio moves with the prices when a redeploy changes them.
//
//	micros = floor(wei × Standard.Price(USDC) / Standard.Price(ETH))
//
// The integer division rounds down: less than one micro (about 3×10⁸ wei)
// is not credited, so apply never sees a fraction. A result beyond
// MaxUint64 saturates there (from about 5.7×10²⁷ wei, more ETH than exists). A
// nil or non-positive amount is 0.
func DebtMicros(wei *big.Int) uint64 {
	if wei == nil || wei.Sign() <= 0 {
		return 0
	}
	m := new(big.Int).Mul(wei, Standard.Price(USDC))
	m.Quo(m, Standard.Price(ETH))
	if !m.IsUint64() {
		return math.MaxUint64
	}
	return m.Uint64()
}

// Micros is the debt the log pays, in micros: DebtMicros(d.Amount).
func (d DebtPaid) Micros() uint64 { return DebtMicros(d.Amount) }

// GcPay is the replicated op that pays the wallet's debt by this log. It
// names the log (transaction hash and log index), which apply spends once.
func (d DebtPaid) GcPay() *ledgerpb.GcPay {
	return &ledgerpb.GcPay{
		Wallet:       d.Wallet.Bytes(),
		AmountMicros: d.Micros(),
		TxHash:       d.TxHash.Bytes(),
		LogIndex:     uint32(d.LogIndex),
	}
}

// DebtExpectation is what a debt payment must match to pay a wallet's debt.
type DebtExpectation struct {
	ChainID  uint64
	Contract common.Address
	Wallet   common.Address
}

// CheckDebt applies the rule of ADR 0011 to an observed DebtPaid log
// and returns nil when it pays want.Wallet's debt, or why not: the log was
// retracted or comes from another chain or contract (payment_not_found), it
// pays another wallet's debt (payment_tx_mismatch), or it is worth less than
// one micro (payment_insufficient; apply would credit nothing). Whether it
// was spent already is a question for replicated state. The payer may
// differ from the wallet: anyone may pay a wallet's debt.
func CheckDebt(d DebtPaid, want DebtExpectation) *apierror.Error {
	switch {
	case d.Removed:
		return apierror.New(apierror.PaymentOrphaned, "the DebtPaid log was removed by a chain reorganization")
	case d.ChainID != want.ChainID || d.Contract != want.Contract:
		return apierror.New(apierror.PaymentNotFound, "the DebtPaid log is from chain %d contract %s, not chain %d contract %s",
			d.ChainID, d.Contract.Hex(), want.ChainID, want.Contract.Hex())
	case d.Wallet != want.Wallet:
		return apierror.New(apierror.PaymentTxMismatch, "transaction %s paid the debt of %s, not of %s",
			d.TxHash.Hex(), d.Wallet.Hex(), want.Wallet.Hex())
	case d.Micros() == 0:
		return apierror.New(apierror.PaymentInsufficient, "transaction %s paid %s ETH, less than one millionth of a debt unit",
			d.TxHash.Hex(), FormatAmount(d.Amount, ETH))
	}
	return nil
}
