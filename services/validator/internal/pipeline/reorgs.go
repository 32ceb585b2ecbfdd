package pipeline

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// Payments a chain reorganization took back (ADR 0014; the
// ORPHANED transaction state of ADR 0007).
//
// The chain-watcher publishes a retraction (removed = true) for every
// payment of a block a reorg dropped, and the same transaction again, under
// a new message id, if the new branch mines it. Every validator's payment
// index removes the retracted log and remembers the retraction.
//
// Before a decision, the verifiers need nothing replicated: a proposal
// whose payment was taken back and not re-mined waits like any unpaid one,
// and when its wait is over it is REJECTED payment_orphaned instead of
// payment_not_found (verifier.go). Rejecting at once would reject a
// proposal whose payment the new branch mines a few blocks later, which is
// what usually happens; PaymentWait is already how long the chain may take.
//
// A decision already made is another matter: it may be on its way to raft
// (queued in the packer, proposed) or applied. Only replicated state can
// say which came first, so the leader proposes a PaymentReorg and apply
// decides (state/reorg.go): a PENDING record is marked, so that a decision
// carrying the retracted payment is rejected payment_orphaned when it is
// applied (or committed with the re-mined log, if the leader knew it); a
// COMMITTED or FINALIZED record is marked payment_orphaned (it was
// committed on a payment the chain no longer has: a signal for operators,
// counted in ProposalCounts), and unmarked with its payment replaced once
// the same transaction is mined again. Apply ignores an entry that no
// longer fits the record, so repeats and stale entries are harmless, and a
// new leader simply looks again.
//
// The chain may also flip back: the dropped block becomes canonical again,
// and the watcher publishes its logs again. The index then holds as current
// the very log it last saw retracted, and the leader proposes a
// PaymentReorg whose replacement is that log: the mark of a committed
// record goes, and a pending record's decision carrying the log commits. A
// decision on such a log waits for that entry to be applied (verifier.go,
// awaitsRestore); otherwise it could reach the log first and be rejected
// payment_orphaned on a payment the chain has.

// Retractions is what the payment source knows of payments a reorg took
// back. *payments.Index implements it; a source without it (MOCK mode, a
// test) has no reorgs to follow.
type Retractions interface {
	// Retracted returns the last retraction seen for a proposal id.
	Retracted(id common.Hash) (payment.ProposalPaid, bool)
	// Retractions returns the last retraction of every id that had one.
	Retractions() []payment.ProposalPaid
}

// retractions returns the payment source's retractions, nil when it has
// none to tell.
func (p *Pipeline) retractions() Retractions {
	if !p.cfg.VerifyPayments {
		return nil
	}
	r, _ := p.payments.(Retractions)
	return r
}

// logID names a payment log: block hash and log index.
type logID struct {
	block common.Hash
	index uint
}

func logOf(pb *ledgerpb.Payment) logID {
	if pb == nil {
		return logID{}
	}
	return logID{common.BytesToHash(pb.GetBlockHash()), uint(pb.GetLogIndex())}
}

// reorgView is what the payment index says of one proposal id: the log
// last retracted and the log paying now (zero when none).
type reorgView struct {
	retracted, current logID
}

// reorgKey names one PaymentReorg: the key of its background change.
type reorgKey struct {
	id                     common.Hash
	retracted, replacement logID
}

// reorgFollower is followReorgs' memory; it belongs to its goroutine.
type reorgFollower struct {
	// settled are ids whose applied record needs nothing for what the index
	// said then (REJECTED, or committed and marked as the index says): not
	// read again until the index says something else of them.
	settled map[common.Hash]reorgView
}

// followReorgs runs on every validator; while it leads, when the payment
// index changes (at most every parkScanInterval) and every
// FinalizeInterval, it compares the payments a reorg took back with applied
// state and hands the sender a PaymentReorg where they disagree. The sender
// proposes it until applied state no longer disagrees (the entry is its
// key: it is not handed over again meanwhile), ahead of queued proposals,
// and gives it up if this node stops leading.
func (p *Pipeline) followReorgs(ctx context.Context) {
	src := p.retractions()
	if src == nil {
		return
	}
	tick := time.NewTicker(p.cfg.FinalizeInterval)
	defer tick.Stop()
	f := reorgFollower{settled: map[common.Hash]reorgView{}}
	changed := p.payments.Changed()
	var last time.Time
	for {
		select {
		case <-changed:
			// A retraction should reach raft before the decision it may
			// stop: react at once, but no more often than the parker.
			if wait := parkScanInterval - time.Since(last); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return
				}
			}
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		last, changed = time.Now(), p.payments.Changed()
		if p.raft.IsLeader() {
			p.proposeReorgs(ctx, src, &f)
		}
	}
}

// proposeReorgs makes one pass over the retractions.
func (p *Pipeline) proposeReorgs(ctx context.Context, src Retractions, f *reorgFollower) {
	now := p.cfg.Now()
	for _, x := range src.Retractions() {
		id := x.ProposalID
		cur, paid := p.payments.Lookup(id)
		view := reorgView{retracted: logID{x.BlockHash, x.LogIndex}}
		if paid {
			view.current = logID{cur.BlockHash, cur.LogIndex}
		}
		if v, ok := f.settled[id]; ok && v == view {
			continue
		}
		rec, ok, err := p.record(id)
		if err != nil {
			p.log.Error("reading a proposal record for a retracted payment", zap.String("proposal_id", id.Hex()), zap.Error(err))
			return // the next pass looks again
		}
		if !ok {
			// No proposal yet, or its decision is not applied yet: the
			// verifiers handle the first, the next pass the second.
			continue
		}
		op, settled := p.reorgOp(rec, x, cur, paid)
		if settled {
			f.settled[id] = view
			continue
		}
		if op == nil {
			continue
		}
		key := reorgKey{id, logOf(op.GetRetracted()), logOf(op.GetReplacement())}
		op.AtMs = now.UnixMilli()
		// Applied once the record no longer calls for this entry, for what
		// the index says now: the entry's effect, or a record or an index
		// that needs another one (the loop hands that one over). Read from
		// state: the sender looks when Records.Changed fires, which may be
		// before the observer has the new record in memory.
		applied := func() (bool, error) {
			x, retracted := src.Retracted(id)
			if !retracted {
				return true, nil
			}
			rec, ok, err := p.records.Record(id)
			if err != nil || !ok {
				return false, err
			}
			cur, paid := p.payments.Lookup(id)
			next, _ := p.reorgOp(rec, x, cur, paid)
			return next == nil || (reorgKey{id, logOf(next.GetRetracted()), logOf(next.GetReplacement())}) != key, nil
		}
		if !p.background(ctx, key, &ledgerpb.Entry{Op: &ledgerpb.Entry_PaymentReorg{PaymentReorg: op}}, applied) {
			continue // on its way
		}
		msg := "a payment was taken back by a chain reorganization; recording it on the proposal"
		if repl := op.GetReplacement(); repl != nil && logOf(repl) == logOf(op.GetRetracted()) {
			msg = "a payment a chain reorganization took back is canonical again; recording it on the proposal"
		}
		p.log.Warn(msg,
			zap.String("proposal_id", id.Hex()), zap.String("status", rec.GetStatus().String()),
			zap.String("retracted_block", x.BlockHash.Hex()), zap.Uint("log_index", x.LogIndex),
			zap.Bool("re_mined", op.GetReplacement() != nil))
		p.cfg.Events.Retracted(id, common.BytesToAddress(rec.GetProposal().GetWallet()), rec.GetStatus() != ledgerpb.Status_STATUS_PENDING,
			op.GetReplacement() != nil)
	}
}

// reorgOp returns the PaymentReorg that brings rec in line with what the
// index says of its payment (retraction x, current payment cur if paid),
// or nil; settled is true when rec needs nothing until the index says
// something else.
func (p *Pipeline) reorgOp(rec *ledgerpb.ProposalRecord, x, cur payment.ProposalPaid, paid bool) (op *ledgerpb.PaymentReorg, settled bool) {
	prop := rec.GetProposal()
	var repl *ledgerpb.Payment // the same payment re-mined, valid for the proposal
	if paid && payment.Check(cur, p.expectation(prop)) == nil {
		repl = cur.Proto()
	}
	switch rec.GetStatus() {
	case ledgerpb.Status_STATUS_COMMITTED, ledgerpb.Status_STATUS_FINALIZED:
		held := rec.GetPayment()
		switch {
		case held == nil: // MOCK mode commits hold none
			return nil, true
		case repl != nil && logOf(repl) == logOf(held) && rec.GetPaymentOrphaned() != nil:
			// Its block is canonical again (the chain flipped back).
			return &ledgerpb.PaymentReorg{ProposalId: prop.GetId(), Retracted: held, Replacement: repl}, false
		case repl != nil && logOf(repl) == logOf(held):
			return nil, true // paid by the log it holds
		case repl != nil:
			return &ledgerpb.PaymentReorg{ProposalId: prop.GetId(), Retracted: held, Replacement: repl}, false
		case logOf(held) == (logID{x.BlockHash, x.LogIndex}) && rec.GetPaymentOrphaned() == nil:
			return &ledgerpb.PaymentReorg{ProposalId: prop.GetId(), Retracted: held}, false
		}
		return nil, true
	case ledgerpb.Status_STATUS_PENDING:
		// Its decision may be on its way with the retracted payment. A
		// PENDING record can still change, so it is never settled.
		// A replacement may be the retracted log itself, canonical again:
		// the mark then lets the decision carrying it commit.
		retracted := x
		retracted.Removed = false // the payment as it was observed
		wire := retracted.Proto()
		if m := rec.GetPaymentOrphaned(); m != nil && logOf(&ledgerpb.Payment{BlockHash: m.GetBlockHash(), LogIndex: m.GetLogIndex()}) == logOf(wire) &&
			proto.Equal(m.GetReplacement(), repl) {
			return nil, false // marked as the index says
		}
		return &ledgerpb.PaymentReorg{ProposalId: prop.GetId(), Retracted: wire, Replacement: repl}, false
	}
	return nil, true // REJECTED: final
}

// expectation is what a proposal says about its payment (ADR 0007).
func (p *Pipeline) expectation(prop *ledgerpb.Proposal) payment.Expectation {
	return payment.Expectation{
		ChainID: p.cfg.ChainID, Contract: p.cfg.Contract, ProposalID: common.BytesToHash(prop.GetId()),
		TxHash: common.BytesToHash(prop.GetEthereumTxHash()), Class: payment.ClassFromProto(prop.GetTier()),
		Wallet: common.BytesToAddress(prop.GetWallet()),
	}
}
