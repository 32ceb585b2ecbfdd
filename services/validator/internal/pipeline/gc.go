package pipeline

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// GC is the GC debt accounts (ADR 0011) as the API sees them: reads
// from applied state, and changes that go through the sender (Run) as
// route changes and return once applied. It implements the API's GC.
type GC struct {
	p *Pipeline
	// debts are the observed DebtPaid logs, nil in MOCK mode; PayTx uses
	// those that pay the pipeline's chain and contract.
	debts DebtIndex
}

// DebtIndex finds the DebtPaid logs observed in a transaction
// (payments.Index).
type DebtIndex interface {
	DebtsByTx(tx common.Hash) []payment.DebtPaid
}

// NewGC returns the GC accounts of p; debts is nil when no chain is
// followed (MOCK mode). The entries are dated by p's clock and paid to p's
// chain and contract (Config).
func NewGC(p *Pipeline, debts DebtIndex) *GC {
	return &GC{p: p, debts: debts}
}

// Account renders the wallet's account with the state machine's rules
// (its effective limit, whether its writes are blocked).
func (g *GC) Account(wallet common.Address) (api.GcAccount, error) {
	acc, err := g.p.records.Account(wallet)
	if err != nil {
		return api.GcAccount{}, err
	}
	limit := state.LimitMicros(acc)
	return api.GcAccount{
		ContractVersion: api.GcAccountVersion, Wallet: strings.ToLower(wallet.Hex()),
		PendingDebt: api.DebtString(acc.GetPendingDebtMicros()), ExecutedDebt: api.DebtString(acc.GetExecutedDebtMicros()),
		Limit: api.DebtString(limit), WritesBlocked: state.WritesBlocked(acc),
		PendingDebtMicros: acc.GetPendingDebtMicros(), ExecutedDebtMicros: acc.GetExecutedDebtMicros(), LimitMicros: limit,
		Paid: api.DebtString(acc.GetPaidMicros()), PaidMicros: acc.GetPaidMicros(), Deletes: acc.GetDeletes(), DeletedBytes: acc.GetDeletedBytes(),
	}, nil
}

// ExecutePending moves the wallet's pending debt to executed debt now.
func (g *GC) ExecutePending(ctx context.Context, wallet common.Address) error {
	return g.change(ctx, routeChange{
		entry: &ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Wallet: wallet[:], AtMs: g.now()}}},
		applied: func() (bool, error) {
			acc, err := g.p.records.Account(wallet)
			return acc.GetPendingDebtMicros() == 0, err
		},
	})
}

// SetLimit sets the wallet's executed-debt limit (0: the default).
func (g *GC) SetLimit(ctx context.Context, wallet common.Address, micros uint64) error {
	return g.change(ctx, routeChange{
		entry: &ledgerpb.Entry{Op: &ledgerpb.Entry_GcSetLimit{GcSetLimit: &ledgerpb.GcSetLimit{Wallet: wallet[:], LimitMicros: micros, AtMs: g.now()}}},
		applied: func() (bool, error) {
			acc, err := g.p.records.Account(wallet)
			return acc != nil && acc.GetLimitMicros() == micros, err
		},
	})
}

// Pay pays without a chain transaction (MOCK mode). The entry still carries
// a random transaction id, so that proposing it again after a timeout can
// never pay twice.
func (g *GC) Pay(ctx context.Context, wallet common.Address, micros uint64) error {
	var tx [32]byte
	if _, err := rand.Read(tx[:]); err != nil {
		return err
	}
	return g.change(ctx, routeChange{
		entry:   &ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: &ledgerpb.GcPay{Wallet: wallet[:], AmountMicros: micros, TxHash: tx[:], AtMs: g.now()}}},
		applied: func() (bool, error) { return g.p.records.DebtTxSpent(tx, 0) },
	})
}

// PayTx pays the wallet's debt with the DebtPaid logs of transaction tx that
// the payment index observed (ADR 0011): one GcPay per log not spent
// yet, waiting until they are applied. The leader's own loop (payDebts) may
// propose the same logs; apply spends each once.
func (g *GC) PayTx(ctx context.Context, wallet common.Address, tx common.Hash) error {
	if g.debts == nil {
		return apierror.New(apierror.PaymentNotFound, "this validator follows no chain (MOCK mode): pay with ?amount=")
	}
	logs := g.debts.DebtsByTx(tx)
	if len(logs) == 0 {
		// The payment index drops logs spent and final (ADR 0031): a
		// transaction it no longer holds may have paid long ago.
		if paid, err := g.p.records.DebtTxPaid(tx); err != nil || paid {
			return err // spent already: the account is the answer
		}
	}
	due, err := debtsToPay(tx, logs, payment.DebtExpectation{ChainID: g.p.cfg.ChainID, Contract: g.p.cfg.Contract, Wallet: wallet},
		g.p.records.DebtTxSpent)
	if err != nil || len(due) == 0 {
		return err // nothing due: spent already, the account is the answer
	}
	changes := make([]routeChange, len(due))
	at := g.now()
	for i, d := range due {
		pay := d.GcPay()
		pay.AtMs = at
		changes[i] = routeChange{
			entry:   &ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: pay}},
			applied: func() (bool, error) { return g.p.records.DebtTxSpent(d.TxHash, uint32(d.LogIndex)) },
		}
	}
	return g.change(ctx, changes...)
}

// debtsToPay picks, of the logs observed in transaction tx, those that pay
// want.Wallet's debt (payment.CheckDebt) and are not spent. It fails with
// payment_not_found when no log is observed, and otherwise, when no log
// pays this wallet, with the reason of a log naming the wallet if there is
// one (say, payment_insufficient), else payment_tx_mismatch.
func debtsToPay(tx common.Hash, logs []payment.DebtPaid, want payment.DebtExpectation, spent func(tx [32]byte, logIndex uint32) (bool, error)) ([]payment.DebtPaid, error) {
	if len(logs) == 0 {
		return nil, apierror.New(apierror.PaymentNotFound, "no DebtPaid log of transaction %s is observed; "+
			"the chain-watcher publishes it once it has the configured confirmations: retry then", tx.Hex())
	}
	var (
		mine   []payment.DebtPaid
		reason *apierror.Error
	)
	for _, d := range logs {
		bad := payment.CheckDebt(d, want)
		switch {
		case bad == nil:
			mine = append(mine, d)
		case reason == nil || d.Wallet == want.Wallet && reason.Code == apierror.PaymentTxMismatch:
			reason = bad
		}
	}
	if len(mine) == 0 {
		return nil, reason
	}
	var due []payment.DebtPaid
	for _, d := range mine {
		ok, err := spent(d.TxHash, uint32(d.LogIndex))
		if err != nil {
			return nil, fmt.Errorf("reading whether a debt payment is spent: %w", err)
		}
		if !ok {
			due = append(due, d)
		}
	}
	return due, nil
}

// change hands the route's changes to the sender and waits until they are
// applied.
func (g *GC) change(ctx context.Context, changes ...routeChange) error {
	return g.p.awaitRoute(ctx, "the GC account change", "it may still be, check the account and retry", changes...)
}

// now dates an entry (its events' timestamp): this validator proposes it,
// as a leader dates what it proposes.
func (g *GC) now() int64 { return g.p.cfg.Now().UnixMilli() }
