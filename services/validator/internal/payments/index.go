// Package payments builds the payment index that verifiers read: every
// ProposalPaid log the chain-watcher published on chain.<chainId>.payments,
// by proposal id, and every DebtPaid log it published on
// chain.<chainId>.debts, by transaction hash and log index, which the leader
// and the GC pay route turn into GcPay (ADR 0011). A retraction (a log a
// reorg took back) removes the entry it names; a payment's retraction is
// also remembered, for the verifiers and the leader's reorg handling. The
// Follower that feeds the index also feeds the chain's epoch updates
// (chain.<chainId>.epochs) to the validator's epoch clock. A Keeper prunes
// what applied state has spent and the chain can no longer take back, and
// checkpoints the rest, so that the index stays as large as the payments
// in flight and a validator starts from its checkpoint (ADR 0031).
package payments

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/payment"
)

// Index maps proposal ids to their observed payments, and transactions to
// their observed debt payments. It is safe for concurrent use.
type Index struct {
	mu   sync.Mutex
	byID map[common.Hash]payment.ProposalPaid
	// retracted is the last payment of each proposal id a retraction named,
	// kept when a log pays for the id again (re-mined): the leader compares
	// it with applied state (pipeline, reorgs.go), and a verifier rejects a
	// proposal payment_orphaned rather than payment_not_found when this is
	// all that is left. It grows with reorged payments only, which are few,
	// and is rebuilt from the stream like the rest.
	retracted map[common.Hash]payment.ProposalPaid
	debts     map[common.Hash]map[uint]payment.DebtPaid // tx hash -> log index -> log
	ndebts    int
	// byTx names the proposal ids each transaction paid (current or
	// retracted), and observedAt/retractedAt when this validator saw a
	// payment and its retraction (unix ms): the transaction views.
	byTx        map[common.Hash][]common.Hash
	observedAt  map[common.Hash]int64
	retractedAt map[common.Hash]int64
	changed     chan struct{} // closed and replaced on every change
	// watches are the channels of callers waiting for one proposal id's
	// payment (Watch), each closed at that id's next change: a wait for one
	// id is not woken by every other payment. An entry lives while some
	// caller holds it, so the map is as large as the waits.
	watches map[common.Hash]*watch
	seen    uint64
	now     func() time.Time

	// consumed is the last stream sequence whose message the index holds,
	// and streamCreated the creation time of that stream (unix ns): what a
	// checkpoint records, to resume after it (checkpoint.go).
	consumed      uint64
	streamCreated int64
	// sweep is what Prune walks: every key observed, in observation order
	// (chain order), including keys pruned since; compacted at the end of
	// each sweep (prune.go).
	sweep   []pruneKey
	cursor  int
	peak    int    // most proposal ids held since the maps were last rebuilt
	removed uint64 // entries pruned, payments and debt payments
	// sweeps counts the sweeps begun; recheck holds, for each final
	// entry applied state did not settle when last read, the sweep before
	// which it is not read again (prune.go).
	sweeps  uint64
	recheck map[pruneKey]recheckAt
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byID: map[common.Hash]payment.ProposalPaid{}, retracted: map[common.Hash]payment.ProposalPaid{},
		debts: map[common.Hash]map[uint]payment.DebtPaid{}, byTx: map[common.Hash][]common.Hash{},
		observedAt: map[common.Hash]int64{}, retractedAt: map[common.Hash]int64{}, changed: make(chan struct{}), now: time.Now}
}

// Observe records a payment, or removes the one a retraction names and
// remembers the retraction. The contract refuses a second payment for a
// proposal id, so one entry per id suffices; after a reorg the re-mined log
// replaces the retracted one (in whichever order the two arrive).
func (ix *Index) Observe(p payment.ProposalPaid) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.seen++
	now := ix.now().UnixMilli()
	if !ix.knows(p.ProposalID) {
		ix.track(pruneKey{id: p.ProposalID})
	}
	if ids := ix.byTx[p.TxHash]; !slices.Contains(ids, p.ProposalID) {
		ix.byTx[p.TxHash] = append(ids, p.ProposalID)
	}
	if p.Removed {
		if cur, ok := ix.byID[p.ProposalID]; ok && cur.BlockHash == p.BlockHash && cur.LogIndex == p.LogIndex {
			delete(ix.byID, p.ProposalID)
		}
		ix.retracted[p.ProposalID] = p
		ix.retractedAt[p.ProposalID] = now
	} else {
		if cur, ok := ix.byID[p.ProposalID]; !ok || cur.BlockHash != p.BlockHash || cur.LogIndex != p.LogIndex {
			ix.observedAt[p.ProposalID] = now
		}
		ix.byID[p.ProposalID] = p
	}
	ix.signal()
	ix.wake(p.ProposalID)
}

// TxLog is one ProposalPaid log of a transaction as this validator knows
// it: the current payment of its proposal id, or the last one a reorg took
// back (Retracted) when no other replaced it.
type TxLog struct {
	Payment   payment.ProposalPaid
	Retracted bool
	// ObservedAt and RetractedAt are when this validator received the
	// payment and its retraction, unix ms (0: not yet).
	ObservedAt, RetractedAt int64
}

// Transaction returns the logs of transaction tx, in log order; none when
// it paid no proposal this validator has seen.
func (ix *Index) Transaction(tx common.Hash) []TxLog {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []TxLog
	for _, id := range ix.byTx[tx] {
		if l, ok := ix.txLog(id); ok && l.Payment.TxHash == tx {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b TxLog) int { return cmp.Compare(a.Payment.LogIndex, b.Payment.LogIndex) })
	return out
}

// TxLogs calls fn with every payment's log: the current ones and the
// retracted ones nothing replaced, in no particular order. fn runs without
// the index's lock held on a copy, so it may be slow.
func (ix *Index) TxLogs(fn func(TxLog)) {
	ix.mu.Lock()
	logs := make([]TxLog, 0, len(ix.byID)+len(ix.retracted))
	for id := range ix.byID {
		l, _ := ix.txLog(id)
		logs = append(logs, l)
	}
	for id := range ix.retracted {
		if _, current := ix.byID[id]; !current {
			l, _ := ix.txLog(id)
			logs = append(logs, l)
		}
	}
	ix.mu.Unlock()
	for _, l := range logs {
		fn(l)
	}
}

// txLog is the log of a proposal id; ix.mu is held.
func (ix *Index) txLog(id common.Hash) (TxLog, bool) {
	if p, ok := ix.byID[id]; ok {
		return TxLog{Payment: p, ObservedAt: ix.observedAt[id]}, true
	}
	if p, ok := ix.retracted[id]; ok {
		p.Removed = false
		return TxLog{Payment: p, Retracted: true, ObservedAt: ix.observedAt[id], RetractedAt: ix.retractedAt[id]}, true
	}
	return TxLog{}, false
}

// ObserveDebt records a debt payment under its transaction hash and log
// index (one transaction may carry several), or removes the one a
// retraction names. A repeat replaces the entry with itself.
func (ix *Index) ObserveDebt(d payment.DebtPaid) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.seen++
	logs := ix.debts[d.TxHash]
	cur, ok := logs[d.LogIndex]
	if !ok && !d.Removed {
		ix.track(pruneKey{debt: true, id: d.TxHash, log: d.LogIndex})
	}
	switch {
	case d.Removed:
		if ok && cur.BlockHash == d.BlockHash {
			delete(logs, d.LogIndex)
			ix.ndebts--
			if len(logs) == 0 {
				delete(ix.debts, d.TxHash)
			}
		}
	default:
		if logs == nil {
			logs = map[uint]payment.DebtPaid{}
			ix.debts[d.TxHash] = logs
		}
		if !ok {
			ix.ndebts++
		}
		logs[d.LogIndex] = d
	}
	ix.signal()
}

// signal wakes the waiters of the index's change; ix.mu is held.
func (ix *Index) signal() {
	close(ix.changed)
	ix.changed = make(chan struct{})
}

// watch is one proposal id's change channel and how many callers hold it.
type watch struct {
	ch      chan struct{}
	holders int
}

// Watch returns a channel closed at the next change of id's payment (a
// payment or a retraction observed for it, or the index restored from a
// checkpoint); only that id's changes close it, unlike Changed. stop ends
// the caller's interest and must be called once the channel is no longer
// waited on.
func (ix *Index) Watch(id common.Hash) (changed <-chan struct{}, stop func()) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.watches == nil {
		ix.watches = map[common.Hash]*watch{}
	}
	w := ix.watches[id]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		ix.watches[id] = w
	}
	w.holders++
	return w.ch, func() {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		if w.holders--; w.holders == 0 && ix.watches[id] == w {
			delete(ix.watches, id)
		}
	}
}

// wake closes the watch of id, if any; ix.mu is held.
func (ix *Index) wake(id common.Hash) {
	if w := ix.watches[id]; w != nil {
		close(w.ch)
		delete(ix.watches, id)
	}
}

// DebtsByTx returns the debt payments observed in transaction tx, by log
// index; none when the transaction is not observed (yet).
func (ix *Index) DebtsByTx(tx common.Hash) []payment.DebtPaid {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make([]payment.DebtPaid, 0, len(ix.debts[tx]))
	for _, d := range ix.debts[tx] {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b payment.DebtPaid) int { return cmp.Compare(a.LogIndex, b.LogIndex) })
	return out
}

// Debts returns every debt payment observed, in chain order (block, log
// index). It grows with the chain's DebtPaid logs, which are few: one per
// debt paid.
func (ix *Index) Debts() []payment.DebtPaid {
	ix.mu.Lock()
	out := make([]payment.DebtPaid, 0, ix.ndebts)
	for _, logs := range ix.debts {
		for _, d := range logs {
			out = append(out, d)
		}
	}
	ix.mu.Unlock()
	slices.SortFunc(out, func(a, b payment.DebtPaid) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.LogIndex, b.LogIndex))
	})
	return out
}

// Lookup returns the payment observed for a proposal id.
func (ix *Index) Lookup(id common.Hash) (payment.ProposalPaid, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p, ok := ix.byID[id]
	return p, ok
}

// Changed returns a channel closed at the index's next change.
func (ix *Index) Changed() <-chan struct{} {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.changed
}

// Retracted returns the last retraction observed for a proposal id: the
// log a reorg took back (Removed set). A payment may have been observed for
// the id again since; Lookup tells.
func (ix *Index) Retracted(id common.Hash) (payment.ProposalPaid, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p, ok := ix.retracted[id]
	return p, ok
}

// Retractions returns the last retraction of every proposal id that had
// one, in chain order (block, log index).
func (ix *Index) Retractions() []payment.ProposalPaid {
	ix.mu.Lock()
	out := make([]payment.ProposalPaid, 0, len(ix.retracted))
	for _, p := range ix.retracted {
		out = append(out, p)
	}
	ix.mu.Unlock()
	slices.SortFunc(out, func(a, b payment.ProposalPaid) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.LogIndex, b.LogIndex))
	})
	return out
}

// Wait returns the payment for id as soon as it is observed, or ctx's error.
func (ix *Index) Wait(ctx context.Context, id common.Hash) (payment.ProposalPaid, error) {
	for {
		ix.mu.Lock()
		p, ok := ix.byID[id]
		changed := ix.changed
		ix.mu.Unlock()
		if ok {
			return p, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return payment.ProposalPaid{}, ctx.Err()
		}
	}
}

// Stats are the index's counters.
type Stats struct {
	Observed  uint64 `json:"observed"`  // messages read, payments and debt payments, retractions included
	Indexed   int    `json:"indexed"`   // proposal ids with a payment
	Retracted int    `json:"retracted"` // proposal ids whose payment a retraction named
	Debts     int    `json:"debts"`     // debt payments (DebtPaid logs) indexed
	// Pruned counts the payments and debt payments that left the index,
	// spent and final (ADR 0031), since this validator started.
	Pruned uint64 `json:"pruned"`
	// Consumed is the last stream sequence the index holds.
	Consumed uint64 `json:"consumed"`
}

// Stats returns the index's counters.
func (ix *Index) Stats() Stats {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return Stats{Observed: ix.seen, Indexed: len(ix.byID), Retracted: len(ix.retracted), Debts: ix.ndebts,
		Pruned: ix.removed, Consumed: ix.consumed}
}
