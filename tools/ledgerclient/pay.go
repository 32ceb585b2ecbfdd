package ledgerclient

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
)

// Chain is what paying needs of an Ethereum endpoint; ethclient.Client
// satisfies it.
type Chain interface {
	bind.ContractBackend
	bind.DeployBackend
}

// ErrPaymentFailed is returned when the payment transaction reverted.
var ErrPaymentFailed = errors.New("payment transaction failed")

// Pay calls payForProposal on the payment contract at the class's exact ETH
// price and waits until the transaction is mined. It returns the receipt.
// The payment pays only for a proposal signed with the same key: its payer
// must be the proposal's wallet (ADR 0028).
func Pay(ctx context.Context, chain Chain, key *ecdsa.PrivateKey, chainID uint64, contract common.Address, id common.Hash, class payment.Class) (*types.Receipt, error) {
	opts := bind.NewKeyedTransactor(key, new(big.Int).SetUint64(chainID))
	opts.Context = ctx
	opts.Value = class.Price(payment.ETH)
	ledger := paycontract.NewPaymentLedger()
	tx, err := bind.Transact(ledger.Instance(chain, contract), opts, ledger.PackPayForProposal(id, uint8(class)))
	if err != nil {
		return nil, fmt.Errorf("paying for %s: %w", id.Hex(), err)
	}
	receipt, err := waitMined(ctx, chain, tx.Hash())
	if err != nil {
		return nil, err
	}
	if receipt.Status != types.ReceiptStatusSuccessful {
		return receipt, fmt.Errorf("%w: %s in block %d", ErrPaymentFailed, tx.Hash().Hex(), receipt.BlockNumber)
	}
	return receipt, nil
}

// PayDebt calls payDebt(wallet) on the payment contract with wei, paying
// towards wallet's GC debt (ADR 0011; anyone may pay a wallet's debt),
// and waits until the transaction is mined. It returns the receipt, whose
// transaction hash is what the validator's pay route takes.
func PayDebt(ctx context.Context, chain Chain, key *ecdsa.PrivateKey, chainID uint64, contract, wallet common.Address, wei *big.Int) (*types.Receipt, error) {
	opts := bind.NewKeyedTransactor(key, new(big.Int).SetUint64(chainID))
	opts.Context = ctx
	opts.Value = wei
	ledger := paycontract.NewPaymentLedger()
	tx, err := bind.Transact(ledger.Instance(chain, contract), opts, ledger.PackPayDebt(wallet))
	if err != nil {
		return nil, fmt.Errorf("paying the debt of %s: %w", wallet.Hex(), err)
	}
	receipt, err := waitMined(ctx, chain, tx.Hash())
	if err != nil {
		return nil, err
	}
	if receipt.Status != types.ReceiptStatusSuccessful {
		return receipt, fmt.Errorf("%w: %s in block %d", ErrPaymentFailed, tx.Hash().Hex(), receipt.BlockNumber)
	}
	return receipt, nil
}

func waitMined(ctx context.Context, chain bind.DeployBackend, tx common.Hash) (*types.Receipt, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := chain.TransactionReceipt(ctx, tx)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, ethereum.NotFound) {
			return nil, fmt.Errorf("receipt of %s: %w", tx.Hex(), err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s to be mined: %w", tx.Hex(), ctx.Err())
		}
	}
}
