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
		Paid: api.DebtString(acc.GetPaidMicros()), Deletes: acc.GetDeletes(), DeletedBytes: acc.GetDeletedBytes(),
	}, nil
}

func (g gcView) ExecutePending(ctx context.Context, wallet common.Address) error {
	return g.change(ctx, &ledgerpb.Entry{Op: &ledgerpb.Entry_GcExecute{GcExecute: &ledgerpb.GcExecute{Wallet: wallet[:]}}},
		func() (bool, error) {
			acc, err := g.machine.Account(wallet)
			return acc.GetPendingDebtMicros() == 0, err
		})
}

func (g gcView) SetLimit(ctx context.Context, wallet common.Address, micros uint64) error {
	return g.change(ctx, &ledgerpb.Entry{Op: &ledgerpb.Entry_GcSetLimit{GcSetLimit: &ledgerpb.GcSetLimit{Wallet: wallet[:], LimitMicros: micros}}},
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
	return g.change(ctx, &ledgerpb.Entry{Op: &ledgerpb.Entry_GcPay{GcPay: &ledgerpb.GcPay{Wallet: wallet[:], AmountMicros: micros, TxHash: tx[:]}}},
		func() (bool, error) { return g.machine.DebtTxSpent(tx) })
}

// change proposes ent and waits until applied() holds, proposing it again
// every second while it does not (a proposal may be dropped by a leader
// change; each change is idempotent).
func (g gcView) change(ctx context.Context, ent *ledgerpb.Entry, applied func() (bool, error)) error {
	data, err := proto.Marshal(ent)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, gcTimeout)
	defer cancel()
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for first := true; ; first = false {
		changed := g.machine.Changed()
		if first {
			if err := g.node.Propose(ctx, data); err != nil && ctx.Err() == nil {
				return fmt.Errorf("proposing the GC account change: %w", err)
			}
		}
		if ok, err := applied(); err != nil || ok {
			return err
		}
		select {
		case <-changed:
		case <-retry.C:
			_ = g.node.Propose(ctx, data)
		case <-ctx.Done():
			return apierror.New(apierror.Timeout, "the change was not applied within %s; it may still be, check the account and retry", gcTimeout)
		}
	}
}
