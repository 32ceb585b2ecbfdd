package chainstatus

import (
	"testing"

	"github.com/contentledger/contentledger/pkg/payment"
)

// TestWindowTruncation: the window keeps the newest MaxPendingPayments and
// says it is truncated while a block it left payments out of is still in
// it.
func TestWindowTruncation(t *testing.T) {
	var w pendingWindow
	w.from = 10
	var paid []payment.ProposalPaid
	for b := uint64(10); b < 10+payment.MaxPendingPayments/2+1; b++ { // two per block
		paid = append(paid, payment.ProposalPaid{BlockNumber: b, LogIndex: 0}, payment.ProposalPaid{BlockNumber: b, LogIndex: 1})
	}
	w.add(paid)
	if len(w.paid) != payment.MaxPendingPayments || w.paid[0].BlockNumber != 11 || !w.truncated() {
		t.Fatalf("%d kept from block %d, truncated %v", len(w.paid), w.paid[0].BlockNumber, w.truncated())
	}
	w.advance(11)
	if w.truncated() || len(w.paid) != payment.MaxPendingPayments {
		t.Fatalf("from block 11: %d kept, truncated %v", len(w.paid), w.truncated())
	}
	w.advance(12)
	if len(w.paid) != payment.MaxPendingPayments-2 || w.paid[0].BlockNumber != 12 {
		t.Fatalf("from block 12: %d kept from block %d", len(w.paid), w.paid[0].BlockNumber)
	}
	w.add([]payment.ProposalPaid{{BlockNumber: 200}, {BlockNumber: 200, LogIndex: 1}, {BlockNumber: 201}})
	if len(w.paid) != payment.MaxPendingPayments || w.paid[0].BlockNumber != 12 || w.paid[0].LogIndex != 1 || !w.truncated() {
		t.Fatalf("after more: %d kept from block %d, truncated %v", len(w.paid), w.paid[0].BlockNumber, w.truncated())
	}
}
