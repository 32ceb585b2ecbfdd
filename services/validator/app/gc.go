package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/validator/internal/consensus"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// gcTimeout bounds how long a GC account change waits to be applied.
const gcTimeout = 10 * time.Second

// gcView changes GC debt accounts through raft and waits until the change
// is applied (the API's GC).
type gcView struct {
	node    *consensus.Node
	machine *state.Machine
	// debts are the observed DebtPaid logs, nil in MOCK mode; paid must
	// match them (the configured chain and contract).
	debts debtIndex
	paid  payment.DebtExpectation // Wallet is set per call
	// now dates the entries (their events' timestamp): this validator
	// proposes them, as a leader dates what it proposes.
	now func() time.Time
}

// debtIndex finds the DebtPaid logs observed in a transaction
// (payments.Index).
type debtIndex interface {
	DebtsByTx(tx common.Hash) []payment.DebtPaid
}

// Account renders the wallet's account with the state machine's rules
// (its effective limit, whether its writes are blocked).
func (g gcView) Account(wallet common.Address) (api.GcAccount, error) {
	acc, err := g.machine.Account(wallet)
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

func (g gcView) ExecutePending(ctx context.Context, wallet common.Address) error {
	return g.change(ctx, []*ledgerpb.Entry{{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Wallet: wallet[:], AtMs: g.now().UnixMilli()}}}},
		func() (bool, error) {
			acc, err := g.machine.Account(wallet)
			return acc.GetPendingDebtMicros() == 0, err
		})
}

func (g gcView) SetLimit(ctx context.Context, wallet common.Address, micros uint64) error {
	return g.change(ctx, []*ledgerpb.Entry{{Op: &ledgerpb.Entry_GcSetLimit{GcSetLimit: &ledgerpb.GcSetLimit{Wallet: wallet[:], LimitMicros: micros, AtMs: g.now().UnixMilli()}}}},
		func() (bool, error) {
			acc, err := g.machine.Account(wallet)
			return acc != nil && acc.GetLimitMicros() == micros, err
		})
}

// Pay pays without a chain transaction (MOCK mode). The entry still carries
// a random transaction id, so that proposing it again after a timeout can
// never pay twice.
func (g gcView) Pay(ctx context.Context, wallet common.Address, micros uint64) error {
	var tx [32]byte
	if _, err := rand.Read(tx[:]); err != nil {
		return err
	}
	return g.change(ctx, []*ledgerpb.Entry{{Op: &ledgerpb.Entry_GcPay{GcPay: &ledgerpb.GcPay{Wallet: wallet[:], AmountMicros: micros, TxHash: tx[:], AtMs: g.now().UnixMilli()}}}},
		func() (bool, error) { return g.machine.DebtTxSpent(tx, 0) })
}

// PayTx pays the wallet's debt with the DebtPaid logs of transaction tx that
// the payment index observed (DECISIONS D9): one GcPay per log not spent
// yet, through raft, waiting until they are applied. The leader's own loop
// (pipeline.payDebts) may propose the same logs; apply spends each once.
func (g gcView) PayTx(ctx context.Context, wallet common.Address, tx common.Hash) error {
	if g.debts == nil {
		return apierror.New(apierror.PaymentNotFound, "this validator follows no chain (MOCK mode): pay with ?amount=")
	}
	want := g.paid
	want.Wallet = wallet
	due, err := debtsToPay(tx, g.debts.DebtsByTx(tx), want, g.machine.DebtTxSpent)
	if err != nil || len(due) == 0 {
		return err // nothing due: spent already, the account is the answer
	}
	ents := make([]*ledgerpb.Entry, len(due))
	at := g.now().UnixMilli()
	for i, d := range due {
		pay := d.GcPay()
		pay.AtMs = at
		ents[i] = &ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: pay}}
	}
	return g.change(ctx, ents, func() (bool, error) {
		for _, d := range due {
			if spent, err := g.machine.DebtTxSpent(d.TxHash, uint32(d.LogIndex)); err != nil || !spent {
				return false, err
			}
		}
		return true, nil
	})
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

// change proposes ents and waits until applied() holds, proposing them
// again every second while it does not (a proposal may be dropped by a
// leader change; each change is idempotent).
func (g gcView) change(ctx context.Context, ents []*ledgerpb.Entry, applied func() (bool, error)) error {
	data := make([][]byte, len(ents))
	for i, ent := range ents {
		var err error
		if data[i], err = proto.Marshal(ent); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, gcTimeout)
	defer cancel()
	propose := func() error {
		for _, d := range data {
			if err := g.node.Propose(ctx, d); err != nil {
				return err
			}
		}
		return nil
	}
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for first := true; ; first = false {
		changed := g.machine.Changed()
		if first {
			if err := propose(); err != nil && ctx.Err() == nil {
				return fmt.Errorf("proposing the GC account change: %w", err)
			}
		}
		if ok, err := applied(); err != nil || ok {
			return err
		}
		select {
		case <-changed:
		case <-retry.C:
			_ = propose()
		case <-ctx.Done():
			return apierror.New(apierror.Timeout, "the change was not applied within %s; it may still be, check the account and retry", gcTimeout)
		}
	}
}
