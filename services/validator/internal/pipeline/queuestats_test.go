package pipeline

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
)

// Counts derives the proposal counts from the records, as apply keeps
// them while no rejected id is taken over by another proposal.
func (l *ledger) Counts() (*ledgerpb.ProposalCounts, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &ledgerpb.ProposalCounts{RejectedByReason: map[string]uint64{}}
	for _, r := range l.records {
		switch r.GetStatus() {
		case ledgerpb.Status_STATUS_REJECTED:
			c.Rejected++
			c.RejectedByReason[r.GetReason()]++
		case ledgerpb.Status_STATUS_FINALIZED:
			c.Finalized++
			c.Committed++
		case ledgerpb.Status_STATUS_COMMITTED:
			c.Committed++
		}
	}
	return c, l.index
}

func (l *machineLedger) Counts() (*ledgerpb.ProposalCounts, uint64) { return l.m.Counts() }

// TestQueueStatsCountersFromAppliedState: a pipeline that decided
// nothing itself (a restarted process, a new leader, a follower) reports
// the cumulative counters of the decisions applied before it, not zeros.
func TestQueueStatsCountersFromAppliedState(t *testing.T) {
	l := newLedger()
	decided := func(b byte, status ledgerpb.Status, reason string) {
		id := common.BytesToHash([]byte{b})
		l.records[id] = &ledgerpb.ProposalRecord{Proposal: &ledgerpb.Proposal{Id: id.Bytes(), Epoch: 3}, Status: status, Reason: reason}
	}
	for b := range byte(3) {
		decided(0x10+b, ledgerpb.Status_STATUS_COMMITTED, "")
	}
	for b := range byte(2) {
		decided(0x20+b, ledgerpb.Status_STATUS_FINALIZED, "")
	}
	decided(0x30, ledgerpb.Status_STATUS_REJECTED, "payment_tx_mismatch")
	decided(0x31, ledgerpb.Status_STATUS_REJECTED, "write_blocked_gc_debt")
	decided(0x32, ledgerpb.Status_STATUS_REJECTED, "write_blocked_gc_debt")
	l.records[common.HexToHash("0x40")] = &ledgerpb.ProposalRecord{Status: ledgerpb.Status_STATUS_PENDING} // undecided: counts nowhere

	cfg := DefaultConfig()
	cfg.Feed = openFeed{}
	p, err := New(cfg, zap.NewNop(), l, l, paymentsByID{}, fixedEpoch(7))
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Verified != 0 || st.Applied != 0 || st.Finalized != 0 || st.Rejected != 0 {
		t.Fatalf("this process's own counters start at zero: %+v", st)
	}
	q := p.QueueStats()
	if q.VerifiedCount != 5 || q.TotalFinalizedCount != 2 || q.ProcessedCount != 8 || q.RejectedCount != 3 {
		t.Fatalf("counters: verified %d finalized %d processed %d rejected %d", q.VerifiedCount, q.TotalFinalizedCount, q.ProcessedCount, q.RejectedCount)
	}
	want := map[string]uint64{"payment_tx_mismatch": 1, "write_blocked_gc_debt": 2}
	if !maps.Equal(q.RejectedByReason, want) {
		t.Fatalf("rejected by reason %v, want %v", q.RejectedByReason, want)
	}
	if q.ProcessedCount != q.VerifiedCount+q.RejectedCount {
		t.Fatalf("processed %d is not verified %d + rejected %d", q.ProcessedCount, q.VerifiedCount, q.RejectedCount)
	}
}

// TestQueueStatsCountersSurviveANewPipeline: proposals commit through a
// pipeline on a real state machine; a second pipeline on the same applied
// state, as after a restart or a leader change, reports the same counters.
func TestQueueStatsCountersSurviveANewPipeline(t *testing.T) {
	index := payments.NewIndex()
	p, l := startOnMachine(t, index, func(*Config) {})
	key := payerKey()
	const n = 4
	for i := range n {
		h := common.HexToHash(fmt.Sprintf("0x5%d", i))
		index.Observe(paidIn(h, h, 0x30))
		if _, _, err := p.Submit(context.Background(), submission(t, key, h, h, payment.Standard)); err != nil {
			t.Fatal(err)
		}
		if s := final(t, p, h); s.Status != api.StatusCommitted {
			t.Fatalf("proposal %d: %s %s", i, s.Status, s.Reason)
		}
	}
	before := p.QueueStats()
	if before.VerifiedCount != n || before.ProcessedCount != n || before.RejectedCount != 0 {
		t.Fatalf("after %d commits: verified %d processed %d rejected %d", n, before.VerifiedCount, before.ProcessedCount, before.RejectedCount)
	}

	cfg := DefaultConfig()
	cfg.Domain = signing.Domain{ChainID: 1337, VerifyingContract: contract}
	cfg.Contract, cfg.ChainID, cfg.Feed = contract, 1337, openFeed{}
	next, err := New(cfg, zap.NewNop(), l, l, index, fixedEpoch(7))
	if err != nil {
		t.Fatal(err)
	}
	after := next.QueueStats()
	if after.VerifiedCount != before.VerifiedCount || after.ProcessedCount != before.ProcessedCount ||
		after.TotalFinalizedCount != before.TotalFinalizedCount || after.RejectedCount != before.RejectedCount {
		t.Fatalf("counters changed with the pipeline: before %+v after %+v", before, after)
	}
}
