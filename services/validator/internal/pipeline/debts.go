package pipeline

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// GC debt paid on chain (docs/adr/0011-gc-debt-payments.md).
//
// A wallet's debt is paid with the contract's payDebt. The chain-watcher
// publishes the DebtPaid log once it has its confirmations, and every
// validator's payment index observes it. The leader then pays the debt by
// itself: it proposes a GcPay of the wallet the log names, for the log's
// wei converted to micros (payment.DebtMicros), so nobody has to call the
// pay route for a debt paid on chain to count. The route
// (POST /v1/gc/account/{wallet}/pay?txHash=) proposes the same entry for one
// transaction and waits for it. Apply spends a log (transaction hash and log
// index) once, so whichever GcPay comes first pays and every repeat, from
// this loop, the route or a new leader, changes nothing.

// debtLog names one DebtPaid log: a transaction may carry several.
type debtLog struct {
	tx  common.Hash
	log uint
}

// debtPayer is payDebts' memory; it belongs to its goroutine.
type debtPayer struct {
	// settled are logs that need nothing more: spent in applied state
	// (state never unspends one), or paying nothing (another chain or
	// contract, less than one micro). They are not looked up again.
	settled map[debtLog]bool
}

// payDebts runs on every validator; while it leads, every FinalizeInterval
// it hands the sender a GcPay for each observed DebtPaid log that applied
// state has not spent. The sender proposes it until the log is spent (the
// log is its key: it is not handed over again meanwhile), and gives it up
// if this node stops leading. Only logs in the payment index are used: the
// watcher publishes a log once it has the configured confirmations, and a
// retracted log leaves the index (the sender then stops proposing it). Without payment verification (MOCK mode) no chain is
// followed, and debt is paid through the API.
func (p *Pipeline) payDebts(ctx context.Context) {
	if !p.cfg.VerifyPayments || p.payments == nil {
		return
	}
	tick := time.NewTicker(p.cfg.FinalizeInterval)
	defer tick.Stop()
	d := debtPayer{settled: map[debtLog]bool{}}
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		if p.raft.IsLeader() {
			p.proposeDebts(ctx, &d)
		}
	}
}

// proposeDebts makes one pass over the observed debt payments.
func (p *Pipeline) proposeDebts(ctx context.Context, d *debtPayer) {
	now := p.cfg.Now()
	for _, paid := range p.payments.Debts() {
		key := debtLog{paid.TxHash, paid.LogIndex}
		if d.settled[key] {
			continue
		}
		if bad := payment.CheckDebt(paid, payment.DebtExpectation{ChainID: p.cfg.ChainID, Contract: p.cfg.Contract, Wallet: paid.Wallet}); bad != nil {
			p.log.Warn("a debt payment pays no debt; ignored", zap.String("tx", paid.TxHash.Hex()),
				zap.Uint("log_index", paid.LogIndex), zap.String("reason", string(bad.Code)), zap.String("detail", bad.Message))
			d.settled[key] = true
			continue
		}
		spent, err := p.records.DebtTxSpent(paid.TxHash, uint32(paid.LogIndex))
		if err != nil {
			p.log.Error("reading whether a debt payment is spent", zap.String("tx", paid.TxHash.Hex()), zap.Error(err))
			return // the next pass looks again
		}
		if spent {
			d.settled[key] = true
			continue
		}
		pay := paid.GcPay()
		pay.AtMs = now.UnixMilli()
		// Done once the log is spent, or no longer observed (a reorg took
		// it back): only logs in the index are paid.
		applied := func() (bool, error) {
			if !p.debtObserved(key) {
				return true, nil
			}
			return p.records.DebtTxSpent(key.tx, uint32(key.log))
		}
		if p.background(ctx, key, &ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: pay}}, applied) {
			p.log.Info("paying a wallet's GC debt from a DebtPaid log", zap.String("wallet", paid.Wallet.Hex()),
				zap.String("tx", paid.TxHash.Hex()), zap.Uint("log_index", paid.LogIndex), zap.Uint64("micros", paid.Micros()))
		}
	}
}

// debtObserved reports whether the payment index still holds a DebtPaid
// log; a source that cannot tell (no DebtsByTx) is taken to hold it.
func (p *Pipeline) debtObserved(key debtLog) bool {
	idx, ok := p.payments.(DebtIndex)
	if !ok {
		return true
	}
	for _, d := range idx.DebtsByTx(key.tx) {
		if d.LogIndex == key.log {
			return true
		}
	}
	return false
}
