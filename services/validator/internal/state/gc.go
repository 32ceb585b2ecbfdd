package state

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// GC debt (ADR 0011). Amounts are integers in millionths of a debt unit
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

// DeleteDebtMicros is the debt a delete accrues for a cleanup costing
// costBytes (CleanupCostBytes): 0.10 per MB, at least 1 MB.
func DeleteDebtMicros(costBytes uint64) uint64 {
	// 128-bit product: hi < debtPerMBMicros < 1,000,000, so the quotient
	// fits and nothing overflows, whatever the cost.
	hi, lo := bits.Mul64(max(costBytes, minDebtBytes), debtPerMBMicros)
	q, _ := bits.Div64(hi, lo, 1_000_000)
	return q
}

// CleanupCostBytes is what cleaning up deletedBytes of deleted content
// costs this store, in bytes dropped and written (ADR 0033, "GC debt"):
// the bytes cleanup drops, and the live content a compaction rewrites for
// them, at the rate the newest run that is done measured: its bytes
// written (the live content it rewrote) per byte of the garbage that made
// it due (its garbage, or the threshold in force when an operator forced
// it earlier). Before the first such run, the bytes dropped alone. A
// function of replicated state: every validator charges the same.
func CleanupCostBytes(deletedBytes uint64, lastDone *ledgerpb.GcRun) uint64 {
	garbage := max(lastDone.GetGarbageBytes(), lastDone.GetSizeDelta())
	if garbage == 0 {
		return deletedBytes
	}
	hi, lo := bits.Mul64(deletedBytes, lastDone.GetBytesWritten())
	if hi >= garbage {
		return math.MaxUint64
	}
	rewrite, _ := bits.Div64(hi, lo, garbage)
	return saturatingAdd(deletedBytes, rewrite)
}

// saturatingAdd is a + b, or MaxUint64 past it: a debt never wraps.
func saturatingAdd(a, b uint64) uint64 {
	if sum := a + b; sum >= a {
		return sum
	}
	return math.MaxUint64
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
	return getRecentMessage[*ledgerpb.GcAccount](r, storage.AccountKey([20]byte(wallet)), fmt.Sprintf("GC account %x", wallet))
}

// account returns a copy of the wallet's account to change, a new one if
// it has none (stored false).
func (a *applier) account(wallet []byte) (acc *ledgerpb.GcAccount, stored bool, err error) {
	acc, err = getAccount(a.b, wallet)
	if err != nil || acc != nil {
		return acc, acc != nil, err
	}
	return &ledgerpb.GcAccount{Wallet: append([]byte(nil), wallet...)}, false, nil
}

func (a *applier) putAccount(acc *ledgerpb.GcAccount) error {
	return a.put(storage.AccountKey([20]byte(acc.GetWallet())), acc)
}

// accountEvents emits the wallet events of a change of acc whose writes were
// blocked or not before (wasBlocked): action, when not empty, then
// writes_blocked or writes_unblocked when the change flipped WritesBlocked.
func (a *applier) accountEvents(acc *ledgerpb.GcAccount, wasBlocked bool, action string, index uint64, atMs int64) error {
	if action != "" {
		if err := a.emit(opEvent(EventTypeWallet, action, acc.GetWallet(), index, atMs)); err != nil {
			return err
		}
	}
	switch blocked := WritesBlocked(acc); {
	case blocked && !wasBlocked:
		return a.emit(opEvent(EventTypeWallet, EventActionWritesBlocked, acc.GetWallet(), index, atMs))
	case !blocked && wasBlocked:
		return a.emit(opEvent(EventTypeWallet, EventActionWritesUnblocked, acc.GetWallet(), index, atMs))
	}
	return nil
}

// accrue charges a delete of deletedBytes to the wallet's pending debt
// (in the entry's cache: see flushEntryRecords). It emits no event: pending
// debt never blocks writes (WritesBlocked reads executed debt and the
// limit only), and the delete event already names the wallet.
func (a *applier) accrue(wallet []byte, deletedBytes uint64) error {
	acc, err := a.entryAccount(wallet)
	if err != nil {
		return err
	}
	if acc == nil {
		acc = &ledgerpb.GcAccount{Wallet: append([]byte(nil), wallet...)}
		a.accounts[[20]byte(wallet)] = acc
	}
	acc.PendingDebtMicros = saturatingAdd(acc.GetPendingDebtMicros(), DeleteDebtMicros(CleanupCostBytes(deletedBytes, a.meta.lastDone)))
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
// account (the per-epoch job, once per epoch: it records the epoch). Each
// account it changes gets a debt_executed event, and writes_blocked when
// that reached its limit.
func (a *applier) gcExecute(index uint64, op *ledgerpb.GcExecute) error {
	if len(op.GetWallet()) == 20 {
		acc, err := getAccount(a.b, op.GetWallet())
		if err != nil || acc == nil || acc.GetPendingDebtMicros() == 0 {
			return err
		}
		return a.execute(acc, index, op.GetAtMs())
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
		if err := a.execute(acc, index, op.GetAtMs()); err != nil {
			return err
		}
	}
	return nil
}

// execute moves acc's pending debt to executed debt and stores it.
func (a *applier) execute(acc *ledgerpb.GcAccount, index uint64, atMs int64) error {
	was := WritesBlocked(acc)
	acc.ExecutedDebtMicros += acc.GetPendingDebtMicros()
	acc.PendingDebtMicros = 0
	if err := a.putAccount(acc); err != nil {
		return err
	}
	return a.accountEvents(acc, was, EventActionDebtExecuted, index, atMs)
}

// gcSetLimit sets a wallet's limit. A limit_set event is emitted when the
// account is new or its limit changes: the API proposes the same change
// again until it sees it applied, and a repeat says nothing new.
func (a *applier) gcSetLimit(index uint64, op *ledgerpb.GcSetLimit) error {
	if len(op.GetWallet()) != 20 {
		return nil
	}
	acc, stored, err := a.account(op.GetWallet())
	if err != nil {
		return err
	}
	was, changed := stored && WritesBlocked(acc), !stored || acc.GetLimitMicros() != op.GetLimitMicros()
	acc.LimitMicros = op.GetLimitMicros()
	if err := a.putAccount(acc); err != nil {
		return err
	}
	action := ""
	if changed {
		action = EventActionLimitSet
	}
	return a.accountEvents(acc, was, action, index, op.GetAtMs())
}

// gcPay pays the debt down, executed debt first, and emits debt_paid (and
// writes_unblocked when the executed debt fell below the limit). A DebtPaid
// log (tx hash and log index) pays once: a repeat changes nothing and emits
// nothing.
func (a *applier) gcPay(index uint64, op *ledgerpb.GcPay) error {
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
	acc, _, err := a.account(op.GetWallet())
	if err != nil {
		return err
	}
	was := WritesBlocked(acc)
	left := op.GetAmountMicros()
	fromExecuted := min(left, acc.GetExecutedDebtMicros())
	acc.ExecutedDebtMicros -= fromExecuted
	left -= fromExecuted
	acc.PendingDebtMicros -= min(left, acc.GetPendingDebtMicros())
	acc.PaidMicros += op.GetAmountMicros()
	if err := a.putAccount(acc); err != nil {
		return err
	}
	return a.accountEvents(acc, was, EventActionDebtPaid, index, op.GetAtMs())
}
