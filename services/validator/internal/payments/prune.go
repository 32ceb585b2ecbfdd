package payments

import (
	"slices"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// Pruning (ADR 0031)
//
// A payment leaves the index once applied state has spent it and the chain
// can no longer take it back: nothing reads it then that replicated state
// cannot answer. Spent: the proposal's record is COMMITTED or FINALIZED on
// this very log (transaction, block hash, log index) and carries no
// payment_orphaned mark. Final: its block is at or below the chain's
// finalized block (or head - reorg depth when the chain reports no
// finality), so no retraction of it can come. A debt payment leaves once
// its GcPay is applied and its block is final. A retraction with no
// current payment leaves once its proposal is REJECTED (final) and its
// block is final; one of a committed proposal stays, it is what lets the
// leader restore the record if the payer's transaction is mined again.
//
// A final entry applied state has not settled (a payment paid and not
// submitted yet) is read again after 1, 2, 4, ... up to maxRecheck sweeps:
// entries settle soon after they are final or stay unsettled for long, and
// reading every one on every pass cost each validator one state read per
// unsettled payment every PruneInterval (a tenth of the pipeline
// benchmark's throughput, which pays its proposals ahead).
//
// Pruning reads applied state only, which is never rolled back, so a
// pruned entry never has to come back; a replay of its message (a full
// replay, or the few messages after a checkpoint) adds it again and the
// next pass prunes it again.

// AppliedState is what pruning reads of applied state; *state.Machine
// satisfies it.
type AppliedState interface {
	// Record returns the record of a proposal id; ok is false when there is
	// none.
	Record(id common.Hash) (rec *ledgerpb.ProposalRecord, ok bool, err error)
	// DebtTxSpent reports whether a GcPay spent the DebtPaid log.
	DebtTxSpent(tx [32]byte, logIndex uint32) (bool, error)
}

// pruneKey names one entry Prune may remove: a proposal id (its payment
// and its retraction), or a debt payment (transaction, log index).
type pruneKey struct {
	debt bool
	id   common.Hash // proposal id, or the debt payment's transaction
	log  uint
}

// recheckAt is when an unsettled entry is read again: at sweep, after wait
// sweeps.
type recheckAt struct {
	sweep uint64
	wait  uint64
}

// maxRecheck bounds the sweeps between two reads of an unsettled entry.
const maxRecheck = 64

// shrinkBelow is the smallest peak at which the maps are rebuilt once most
// of their entries are gone: a Go map keeps its buckets after deletions.
const shrinkBelow = 4096

// PruneStats is what one Prune pass did.
type PruneStats struct {
	Examined int // keys looked at
	Pruned   int // payments, retractions and debt payments removed
	// Swept is true when the pass reached the end of the index: the next
	// one starts from its beginning again.
	Swept bool
}

// candidate is an entry read under the lock, judged against applied state
// outside it.
type candidate struct {
	key        pruneKey
	pay        payment.ProposalPaid // the current payment, or the retraction when retraction is set
	retraction bool
	debt       payment.DebtPaid
}

// Prune examines up to batch keys, continuing where the last pass stopped,
// and removes the entries applied state has spent whose block is at or
// below final (the newest block no reorg can take back). State is read
// without the index's lock held; an entry that changed meanwhile stays.
func (ix *Index) Prune(final uint64, st AppliedState, batch int) (PruneStats, error) {
	var stats PruneStats
	cands := ix.candidates(final, max(batch, 1), &stats)
	prunable := make([]candidate, 0, len(cands))
	var unsettled []pruneKey
	for _, c := range cands {
		ok, err := spentFor(c, st)
		if err != nil {
			return stats, err // the next sweep looks again
		}
		if ok {
			prunable = append(prunable, c)
		} else {
			unsettled = append(unsettled, c.key)
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.recheck == nil {
		ix.recheck = map[pruneKey]recheckAt{}
	}
	for _, k := range unsettled {
		wait := min(max(2*ix.recheck[k].wait, 1), maxRecheck)
		ix.recheck[k] = recheckAt{sweep: ix.sweeps + wait, wait: wait}
	}
	for _, c := range prunable {
		delete(ix.recheck, c.key)
		if ix.removeLocked(c) {
			stats.Pruned++
			ix.removed++
		}
	}
	if stats.Swept { // after this pass's removals, so that they are compacted too
		ix.compactLocked()
	}
	return stats, nil
}

// candidates collects the entries of the next batch keys whose block is
// final, and advances the cursor.
func (ix *Index) candidates(final uint64, batch int, stats *PruneStats) []candidate {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.cursor == 0 {
		ix.sweeps++ // a sweep begins
	}
	end := min(ix.cursor+batch, len(ix.sweep))
	var out []candidate
	for _, k := range ix.sweep[ix.cursor:end] {
		stats.Examined++
		if r, ok := ix.recheck[k]; ok && r.sweep > ix.sweeps {
			continue
		}
		switch {
		case k.debt:
			if d, ok := ix.debts[k.id][k.log]; ok && d.BlockNumber <= final {
				out = append(out, candidate{key: k, debt: d})
			}
		default:
			if p, ok := ix.byID[k.id]; ok {
				if p.BlockNumber <= final {
					out = append(out, candidate{key: k, pay: p})
				}
			} else if x, ok := ix.retracted[k.id]; ok && x.BlockNumber <= final {
				out = append(out, candidate{key: k, pay: x, retraction: true})
			}
		}
	}
	ix.cursor = end
	stats.Swept = ix.cursor == len(ix.sweep)
	return out
}

// spentFor reports whether applied state has settled c for good.
func spentFor(c candidate, st AppliedState) (bool, error) {
	if c.key.debt {
		return st.DebtTxSpent(c.debt.TxHash, uint32(c.debt.LogIndex))
	}
	rec, ok, err := st.Record(c.key.id)
	if err != nil || !ok {
		return false, err
	}
	if c.retraction {
		return rec.GetStatus() == ledgerpb.Status_STATUS_REJECTED, nil
	}
	switch rec.GetStatus() {
	case ledgerpb.Status_STATUS_COMMITTED, ledgerpb.Status_STATUS_FINALIZED:
		held := rec.GetPayment()
		return rec.GetPaymentOrphaned() == nil && held != nil && common.BytesToHash(held.GetTxHash()) == c.pay.TxHash &&
			spentBy(held, TxLog{Payment: c.pay}), nil
	}
	return false, nil
}

// removeLocked removes c's entry if the index still holds it as read;
// ix.mu is held.
func (ix *Index) removeLocked(c candidate) bool {
	if c.key.debt {
		logs := ix.debts[c.key.id]
		if d, ok := logs[c.key.log]; !ok || d.BlockHash != c.debt.BlockHash {
			return false
		}
		delete(logs, c.key.log)
		ix.ndebts--
		if len(logs) == 0 {
			delete(ix.debts, c.key.id)
		}
		return true
	}
	id := c.key.id
	if c.retraction {
		x, ok := ix.retracted[id]
		if _, current := ix.byID[id]; current || !ok || x.BlockHash != c.pay.BlockHash || x.LogIndex != c.pay.LogIndex {
			return false
		}
	} else if p, ok := ix.byID[id]; !ok || p.BlockHash != c.pay.BlockHash || p.LogIndex != c.pay.LogIndex {
		return false
	}
	// The retraction of a payment whose re-mined log is spent and final
	// goes with it: the log it names can never be canonical again.
	old, hadRetraction := ix.retracted[id]
	delete(ix.byID, id)
	delete(ix.retracted, id)
	delete(ix.observedAt, id)
	delete(ix.retractedAt, id)
	ix.forgetTx(c.pay.TxHash, id)
	if hadRetraction && old.TxHash != c.pay.TxHash {
		ix.forgetTx(old.TxHash, id)
	}
	return true
}

// forgetTx drops id from the proposal ids of transaction tx; ix.mu is held.
func (ix *Index) forgetTx(tx, id common.Hash) {
	ids := slices.DeleteFunc(ix.byTx[tx], func(x common.Hash) bool { return x == id })
	if len(ids) == 0 {
		delete(ix.byTx, tx)
		return
	}
	ix.byTx[tx] = ids
}

// knows reports whether the index holds anything of proposal id; ix.mu is
// held.
func (ix *Index) knows(id common.Hash) bool {
	_, current := ix.byID[id]
	_, retracted := ix.retracted[id]
	return current || retracted
}

// track adds a key the index did not hold to the sweep; ix.mu is held.
func (ix *Index) track(k pruneKey) {
	ix.sweep = append(ix.sweep, k)
	ix.peak = max(ix.peak, len(ix.byID)+1)
}

// compactLocked drops the keys whose entries are gone from the sweep, and
// rebuilds the maps once most of their entries are gone, so that the heap
// follows what the index holds; ix.mu is held.
func (ix *Index) compactLocked() {
	live := make([]pruneKey, 0, len(ix.byID)+len(ix.retracted)+ix.ndebts)
	seen := make(map[pruneKey]struct{}, cap(live))
	for _, k := range ix.sweep {
		var held bool
		if k.debt {
			_, held = ix.debts[k.id][k.log]
		} else {
			held = ix.knows(k.id)
		}
		if _, dup := seen[k]; held && !dup {
			seen[k] = struct{}{}
			live = append(live, k)
		}
	}
	for k := range ix.recheck {
		if _, held := seen[k]; !held {
			delete(ix.recheck, k)
		}
	}
	ix.sweep, ix.cursor = live, 0
	if ix.peak >= shrinkBelow && len(ix.byID) < ix.peak/4 {
		ix.byID = resized(ix.byID)
		ix.retracted = resized(ix.retracted)
		ix.observedAt = resized(ix.observedAt)
		ix.retractedAt = resized(ix.retractedAt)
		ix.byTx = resized(ix.byTx)
		ix.peak = len(ix.byID)
	}
}

// resized copies m into a map sized for its entries.
func resized[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
