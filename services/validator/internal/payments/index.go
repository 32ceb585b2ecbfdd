// Package payments builds the payment index that verifiers read: every
// ProposalPaid log the chain-watcher published on chain.<chainId>.payments,
// by proposal id. A retraction (a log a reorg took back) removes the entry it
// names.
package payments

import (
	"context"
	"sync"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/payment"
)

// Index maps proposal ids to their observed payments. It is safe for
// concurrent use.
type Index struct {
	mu      sync.Mutex
	byID    map[common.Hash]payment.ProposalPaid
	changed chan struct{} // closed and replaced on every change
	seen    uint64
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byID: map[common.Hash]payment.ProposalPaid{}, changed: make(chan struct{})}
}

// Observe records a payment, or removes the one a retraction names. The
// contract refuses a second payment for a proposal id, so one entry per id
// suffices; after a reorg the re-mined log replaces the retracted one.
func (ix *Index) Observe(p payment.ProposalPaid) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.seen++
	if p.Removed {
		if cur, ok := ix.byID[p.ProposalID]; ok && cur.BlockHash == p.BlockHash && cur.LogIndex == p.LogIndex {
			delete(ix.byID, p.ProposalID)
		}
	} else {
		ix.byID[p.ProposalID] = p
	}
	close(ix.changed)
	ix.changed = make(chan struct{})
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
	Observed uint64 `json:"observed"` // messages read, retractions included
	Indexed  int    `json:"indexed"`  // proposal ids with a payment
}

// Stats returns the index's counters.
func (ix *Index) Stats() Stats {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return Stats{Observed: ix.seen, Indexed: len(ix.byID)}
}
