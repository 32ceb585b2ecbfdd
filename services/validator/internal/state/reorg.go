package state

// Payments a chain reorganization took back (PaymentReorg entries)
//
// The chain-watcher retracts a payment whose block a reorg dropped. Only the
// leader reacts (pipeline, reorgs.go): it proposes a PaymentReorg, so that
// every validator records the same thing at the same index, whatever its
// own payment index has seen by then. Apply reads only the entry and the
// record:
//
//   - A COMMITTED or FINALIZED record whose payment is the retracted log
//     (same block hash and log index) gets the payment_orphaned mark: it was
//     committed on a payment the chain no longer has. The mark is the signal
//     (status and explorer routes, ProposalCounts.payment_orphaned); the
//     content stays, since a commit is not undone. When the entry carries a
//     replacement (the same transaction re-mined in another block), the
//     record's payment becomes the replacement and the mark goes: the
//     proposal is paid on the canonical chain again.
//   - A replacement may be the retracted log itself: its block was dropped
//     and then became canonical again (the chain flipped back). That
//     restores it like any replacement: a COMMITTED record loses its mark,
//     and a PENDING record's decision carrying the log commits.
//   - A PENDING record keeps the retraction as its mark. Its decision may be
//     on its way with the retracted payment (decided before the retraction,
//     not yet applied): applying that decision then REJECTS it
//     payment_orphaned, or commits it with the mark's replacement. Which of
//     the two entries comes first in the log decides, identically on every
//     validator, so no validator ever commits on a payment the leader knew
//     to be retracted when it proposed the mark.
//   - Anything else (no record, REJECTED, another payment) changes nothing,
//     so a repeated or stale entry is harmless.

import (
	"bytes"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// ReasonPaymentOrphaned rejects a decision whose payment a reorg took back
// (apierror.PaymentOrphaned).
const ReasonPaymentOrphaned = "payment_orphaned"

// sameLog reports whether two payments name the same log: block hash and
// log index (a log index is unique within a block).
func sameLog(a, b *ledgerpb.Payment) bool {
	return a != nil && b != nil && len(a.GetBlockHash()) == 32 &&
		bytes.Equal(a.GetBlockHash(), b.GetBlockHash()) && a.GetLogIndex() == b.GetLogIndex()
}

// markedLog reports whether the mark names payment p's log.
func markedLog(m *ledgerpb.PaymentOrphan, p *ledgerpb.Payment) bool {
	return m != nil && p != nil && len(p.GetBlockHash()) == 32 &&
		bytes.Equal(m.GetBlockHash(), p.GetBlockHash()) && m.GetLogIndex() == p.GetLogIndex()
}

// paymentReorg applies a PaymentReorg entry (see the top of the file).
func (a *applier) paymentReorg(op *ledgerpb.PaymentReorg) error {
	retracted, repl := op.GetRetracted(), op.GetReplacement()
	rec, err := getRecord(a.b, op.GetProposalId())
	if err != nil || rec == nil || retracted == nil {
		return err
	}
	if repl != nil && (!bytes.Equal(repl.GetTxHash(), retracted.GetTxHash()) || !bytes.Equal(repl.GetProposalId(), op.GetProposalId()) ||
		len(repl.GetBlockHash()) != 32) {
		// A replacement is the same transaction's log: re-mined in another
		// block, or the retracted one canonical again.
		repl = nil
	}
	next := proto.Clone(rec).(*ledgerpb.ProposalRecord)
	switch rec.GetStatus() {
	case ledgerpb.Status_STATUS_COMMITTED, ledgerpb.Status_STATUS_FINALIZED:
		if !sameLog(rec.GetPayment(), retracted) {
			return nil // not the payment it holds (any more)
		}
		switch {
		case op.GetReplacement() != nil && repl == nil:
			return nil // a malformed replacement: not a retraction either
		case repl != nil && sameLog(repl, retracted) && rec.GetPaymentOrphaned() == nil:
			return nil // canonical again, and never marked
		case repl != nil:
			if !sameLog(repl, retracted) {
				next.Payment = repl // re-mined; a restored log keeps the payment committed
			}
			if next.PaymentOrphaned != nil {
				next.PaymentOrphaned = nil
				a.meta.counts.PaymentOrphaned -= min(1, a.meta.counts.PaymentOrphaned)
			}
		case rec.GetPaymentOrphaned() != nil:
			return nil // marked already
		default:
			next.PaymentOrphaned = orphanMark(retracted, op.GetAtMs(), nil)
			a.meta.counts.PaymentOrphaned++
		}
	case ledgerpb.Status_STATUS_PENDING:
		mark := orphanMark(retracted, op.GetAtMs(), repl)
		if old := rec.GetPaymentOrphaned(); old != nil {
			// The time a mark was set is part of it only when it is new.
			same := proto.Clone(mark).(*ledgerpb.PaymentOrphan)
			same.AtMs = old.GetAtMs()
			if proto.Equal(same, old) {
				return nil
			}
		}
		next.PaymentOrphaned = mark
	default:
		return nil
	}
	return a.putRecord(next)
}

func orphanMark(p *ledgerpb.Payment, atMs int64, repl *ledgerpb.Payment) *ledgerpb.PaymentOrphan {
	return &ledgerpb.PaymentOrphan{BlockNumber: p.GetBlockNumber(), BlockHash: p.GetBlockHash(), LogIndex: p.GetLogIndex(),
		TxHash: p.GetTxHash(), AtMs: atMs, Replacement: repl}
}

// orphanedDecision checks a decision's payment against the PENDING record's
// mark: the payment to record, or the rejection reason when the payment
// was taken back and not re-mined.
func orphanedDecision(prev *ledgerpb.ProposalRecord, paid *ledgerpb.Payment) (*ledgerpb.Payment, string) {
	m := prev.GetPaymentOrphaned()
	if !markedLog(m, paid) {
		return paid, ""
	}
	if m.GetReplacement() != nil {
		return m.GetReplacement(), ""
	}
	return paid, ReasonPaymentOrphaned
}
