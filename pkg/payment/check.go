package payment

import (
	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/apierror"
)

// Expectation is what a proposal says about its payment.
type Expectation struct {
	ChainID    uint64
	Contract   common.Address
	ProposalID common.Hash
	TxHash     common.Hash
	Class      Class
	// Wallet is the proposal's signer: the only wallet whose payment pays
	// for it (ADR 0028).
	Wallet common.Address
}

// Check applies the rules of ADR 0007 to an observed payment and returns
// nil when it pays for the proposal, or the REJECTED reason. Confirmations
// are the watcher's to wait for; whether the payment was spent already is a
// question for replicated state, not for this function. The payer must be
// the proposal's wallet (ADR 0028): the proposal id is public once paid, and
// nothing else ties the payment to the proposal its payer meant.
func Check(p ProposalPaid, want Expectation) *apierror.Error {
	switch {
	case p.Removed:
		return apierror.New(apierror.PaymentOrphaned, "the payment log was removed by a chain reorganization")
	case p.ChainID != want.ChainID || p.Contract != want.Contract:
		return apierror.New(apierror.PaymentNotFound, "payment is from chain %d contract %s, not chain %d contract %s",
			p.ChainID, p.Contract.Hex(), want.ChainID, want.Contract.Hex())
	case p.ProposalID != want.ProposalID:
		return apierror.New(apierror.PaymentNotFound, "payment is for proposal %s", p.ProposalID.Hex())
	case p.TxHash != want.TxHash:
		return apierror.New(apierror.PaymentTxMismatch, "proposal %s was paid in transaction %s, not %s",
			want.ProposalID.Hex(), p.TxHash.Hex(), want.TxHash.Hex())
	case p.Payer != want.Wallet:
		return apierror.New(apierror.PaymentPayerMismatch, "proposal %s was paid by %s; a payment pays only for a proposal its payer signed, not one of %s",
			want.ProposalID.Hex(), p.Payer.Hex(), want.Wallet.Hex())
	case p.Class != want.Class:
		return apierror.New(apierror.PaymentTierMismatch, "payment is for class %s, the proposal names %s", p.Class, want.Class)
	}
	price := p.Class.Price(p.Token)
	if price == nil || p.Amount == nil || p.Amount.Cmp(price) < 0 {
		return apierror.New(apierror.PaymentInsufficient, "paid %s %s, class %s costs %s %s",
			FormatAmount(p.Amount, p.Token), p.Token, p.Class, FormatAmount(price, p.Token), p.Token)
	}
	return nil
}
