package state

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// GC debt (DECISIONS D9). Amounts are integers in millionths of a debt unit
// ("micros"), so that apply never rounds differently on two validators.
const (
	// DefaultDebtLimitMicros is the executed debt (100.00) at which a
	// wallet's writes are blocked, unless its account sets another limit.
	DefaultDebtLimitMicros = 100_000_000
	// debtPerMBMicros is the estimated cleanup cost of a deleted megabyte
	// (0.10), and minDebtBytes the least a delete is charged for (1 MB).
	debtPerMBMicros = 100_000
	minDebtBytes    = 1_000_000
)

// ReasonWriteBlocked rejects a write whose wallet's executed debt is at or
// above its limit.
const ReasonWriteBlocked = "write_blocked_gc_debt"

// DeleteDebtMicros is the debt a delete of deletedBytes of stored nodes
// accrues: 0.10 per MB, at least 1 MB.
func DeleteDebtMicros(deletedBytes uint64) uint64 {
	return max(deletedBytes, minDebtBytes) * debtPerMBMicros / 1_000_000
}

// LimitMicros is the account's effective limit.
func LimitMicros(acc *ledgerpb.GcAccount) uint64 {
	if l := acc.GetLimitMicros(); l > 0 {
		return l
	}
	return DefaultDebtLimitMicros
}

// WritesBlocked reports whether the account's writes are blocked: its
// executed debt is at or above its limit. A nil account blocks nothing.
func WritesBlocked(acc *ledgerpb.GcAccount) bool {
	return acc != nil && acc.GetExecutedDebtMicros() >= LimitMicros(acc)
}

func getAccount(r pebble.Reader, wallet []byte) (*ledgerpb.GcAccount, error) {
	if len(wallet) != 20 {
		return nil, nil
	}
	return getMessage[*ledgerpb.GcAccount](r, storage.AccountKey([20]byte(wallet)), fmt.Sprintf("GC account %x", wallet))
}

// account returns a copy of the wallet's account to change, a new one if
// it has none.
func (a *applier) account(wallet []byte) (*ledgerpb.GcAccount, error) {
	acc, err := getAccount(a.b, wallet)
	if err != nil || acc != nil {
		return acc, err
	}
	return &ledgerpb.GcAccount{Wallet: append([]byte(nil), wallet...)}, nil
}

func (a *applier) putAccount(acc *ledgerpb.GcAccount) error {
	return a.put(storage.AccountKey([20]byte(acc.GetWallet())), acc)
}

// accrue charges a delete of deletedBytes to the wallet's pending debt
// (in the entry's cache: see flushEntryRecords).
func (a *applier) accrue(wallet []byte, deletedBytes uint64) error {
	acc, err := a.entryAccount(wallet)
	if err != nil {
		return err
	}
	if acc == nil {
		acc = &ledgerpb.GcAccount{Wallet: append([]byte(nil), wallet...)}
		a.accounts[[20]byte(wallet)] = acc
	}
	acc.PendingDebtMicros += DeleteDebtMicros(deletedBytes)
	acc.Deletes++
	acc.DeletedBytes += deletedBytes
	a.dirty[[20]byte(wallet)] = true
	return nil
}

// entryAccount is the wallet's account as the entry being applied sees it,
// nil when it has none.
func (a *applier) entryAccount(wallet []byte) (*ledgerpb.GcAccount, error) {
	if len(wallet) != 20 {
		return nil, nil
	}
	if a.accounts == nil {
		a.accounts, a.dirty = map[[20]byte]*ledgerpb.GcAccount{}, map[[20]byte]bool{}
	}
	if acc, ok := a.accounts[[20]byte(wallet)]; ok {
		return acc, nil
	}
	acc, err := getAccount(a.b, wallet)
	if err != nil {
		return nil, err
	}
	a.accounts[[20]byte(wallet)] = acc
	return acc, nil
}

// gcExecute moves pending debt to executed debt: of one wallet, or of every
// account (the per-epoch job, once per epoch: it records the epoch).
func (a *applier) gcExecute(op *ledgerpb.GcExecute) error {
	if len(op.GetWallet()) == 20 {
		acc, err := getAccount(a.b, op.GetWallet())
		if err != nil || acc == nil || acc.GetPendingDebtMicros() == 0 {
			return err
		}
		acc.ExecutedDebtMicros += acc.GetPendingDebtMicros()
		acc.PendingDebtMicros = 0
		return a.putAccount(acc)
	}
	if op.GetEpoch() <= a.meta.gcEpoch {
		return nil // this epoch's job ran already
	}
	first := a.meta.gcEpoch == 0
	a.meta.gcEpoch = op.GetEpoch()
	if first {
		// The first job only starts the schedule: debt accrued during an
		// epoch is executed when the next one begins, not at whatever
		// moment a new cluster's leader first looks.
		return nil
	}
	lower, upper := storage.AccountBounds()
	it, err := a.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	var due []*ledgerpb.GcAccount
	for ok := it.First(); ok; ok = it.Next() {
		acc := &ledgerpb.GcAccount{}
		if err := proto.Unmarshal(it.Value(), acc); err != nil {
			it.Close()
			return fmt.Errorf("%w: GC account %x: %v", ErrCorruptState, it.Key(), err)
		}
		if acc.GetPendingDebtMicros() > 0 {
			due = append(due, acc)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	for _, acc := range due { // in key order
		acc.ExecutedDebtMicros += acc.GetPendingDebtMicros()
		acc.PendingDebtMicros = 0
		if err := a.putAccount(acc); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) gcSetLimit(op *ledgerpb.GcSetLimit) error {
	if len(op.GetWallet()) != 20 {
		return nil
	}
	acc, err := a.account(op.GetWallet())
	if err != nil {
		return err
	}
	acc.LimitMicros = op.GetLimitMicros()
	return a.putAccount(acc)
}

// gcPay pays the debt down, executed debt first. A DebtPaid log (tx hash
// and log index) pays once.
func (a *applier) gcPay(op *ledgerpb.GcPay) error {
	if len(op.GetWallet()) != 20 || op.GetAmountMicros() == 0 {
		return nil
	}
	if tx := op.GetTxHash(); len(tx) > 0 {
		if len(tx) != 32 {
			return nil
		}
		key := storage.DebtTxKey([32]byte(tx), op.GetLogIndex())
		if _, err := storage.Get(a.b, key); err == nil {
			return nil // spent already
		} else if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		if err := a.mut.set(key, nil); err != nil {
			return err
		}
	}
	acc, err := a.account(op.GetWallet())
	if err != nil {
		return err
	}
	left := op.GetAmountMicros()
	fromExecuted := min(left, acc.GetExecutedDebtMicros())
	acc.ExecutedDebtMicros -= fromExecuted
	left -= fromExecuted
	acc.PendingDebtMicros -= min(left, acc.GetPendingDebtMicros())
	acc.PaidMicros += op.GetAmountMicros()
	return a.putAccount(acc)
}
