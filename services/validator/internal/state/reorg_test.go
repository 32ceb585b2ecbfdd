package state

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// recorder is an Observer that keeps the records of every Apply.
type recorder struct{ records []*ledgerpb.ProposalRecord }

func (r *recorder) RecordsApplied(recs []*ledgerpb.ProposalRecord) {
	r.records = append(r.records, recs...)
}
func (r *recorder) StateRestored() {}

func orphaned(t *testing.T, m *Machine) uint64 {
	t.Helper()
	c, _ := m.Counts()
	return c.GetPaymentOrphaned()
}

// TestPaymentReorgMarksCommittedRecord: a retraction of the payment a
// committed record holds marks it payment_orphaned with the retracted
// block, once, counted; a replacement (the same transaction re-mined)
// replaces the payment and clears the mark. Entries that do not concern the
// record's payment change nothing.
func TestPaymentReorgMarksCommittedRecord(t *testing.T) {
	m := newMachine(t)
	obs := &recorder{}
	m.SetObserver(obs)
	l := newLog(t)
	paid := writeItem(1, alice, "p", `{}`)
	paid.Payment = minedPayment(1, 0xb1)
	l.batch(1, paid)
	mustApply(t, m, l.entries...)
	committed := mustRecord(t, m, 1)

	// Not its payment, a malformed replacement, no record, no retraction:
	// nothing changes.
	other := minedPayment(1, 0xb2)
	badRepl := minedPayment(1, 0xc1)
	badRepl.TxHash = pid(0x77)
	before := len(l.entries)
	l.reorg(1, other, nil, 2)
	l.reorg(1, minedPayment(1, 0xb1), badRepl, 2)
	l.reorg(5, minedPayment(5, 0xb5), nil, 2)
	l.op(&ledgerpb.Entry{Op: &ledgerpb.Entry_PaymentReorg{PaymentReorg: &ledgerpb.PaymentReorg{ProposalId: pid(1)}}})
	mustApply(t, m, l.entries[before:]...)
	if got := mustRecord(t, m, 1); !proto.Equal(got, committed) || orphaned(t, m) != 0 {
		t.Fatalf("an unrelated entry changed the record: %v (orphaned %d)", got, orphaned(t, m))
	}

	// The retraction marks it, once.
	before = len(l.entries)
	l.reorg(1, minedPayment(1, 0xb1), nil, 3)
	l.reorg(1, minedPayment(1, 0xb1), nil, 4) // a repeat
	mustApply(t, m, l.entries[before:]...)
	rec := mustRecord(t, m, 1)
	mark := rec.GetPaymentOrphaned()
	if rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || mark == nil || mark.GetBlockNumber() != 0xb1 ||
		mark.GetLogIndex() != 3 || mark.GetAtMs() != 3 || !proto.Equal(rec.GetPayment(), paid.Payment) || orphaned(t, m) != 1 {
		t.Fatalf("after the retraction: %v (orphaned %d)", rec, orphaned(t, m))
	}
	if last := obs.records[len(obs.records)-1]; !proto.Equal(last, rec) {
		t.Errorf("the observer last saw %v", last)
	}

	// Finality keeps the mark.
	before = len(l.entries)
	l.finalize(1000, 5)
	mustApply(t, m, l.entries[before:]...)
	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_FINALIZED || rec.GetPaymentOrphaned() == nil {
		t.Fatalf("finalized: %v", rec)
	}

	// Re-mined: the payment is the new log, the mark is gone.
	before = len(l.entries)
	l.reorg(1, minedPayment(1, 0xb1), minedPayment(1, 0xc1), 6)
	mustApply(t, m, l.entries[before:]...)
	rec = mustRecord(t, m, 1)
	if rec.GetPaymentOrphaned() != nil || !proto.Equal(rec.GetPayment(), minedPayment(1, 0xc1)) || orphaned(t, m) != 0 {
		t.Fatalf("after the replacement: %v (orphaned %d)", rec, orphaned(t, m))
	}
	// A retraction of the old log again changes nothing now.
	before = len(l.entries)
	l.reorg(1, minedPayment(1, 0xb1), nil, 7)
	mustApply(t, m, l.entries[before:]...)
	if got := mustRecord(t, m, 1); !proto.Equal(got, rec) {
		t.Fatalf("a stale retraction changed the record: %v", got)
	}
}

// TestPaymentReorgStopsPendingDecision: a retraction marks an accepted
// proposal; its decision carrying the retracted payment is then REJECTED
// payment_orphaned, or committed with the mark's replacement; a decision
// with another log (decided after the re-mined payment arrived) commits as
// usual, without the mark. A rejected record is not marked.
func TestPaymentReorgStopsPendingDecision(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	accept := func(n int) *ledgerpb.BatchItem {
		it := writeItem(n, alice, "n"+string(rune('a'+n)), `{}`)
		it.Payment, it.Accept = nil, true
		return it
	}
	decide := func(n int, paid *ledgerpb.Payment) *ledgerpb.BatchItem {
		it := writeItem(n, alice, "n"+string(rune('a'+n)), `{}`)
		it.Payment = paid
		return it
	}
	l.batch(1, accept(1), accept(2), accept(3))
	l.reorg(1, minedPayment(1, 0xb1), nil, 2)
	l.reorg(2, minedPayment(2, 0xb2), minedPayment(2, 0xc2), 2)
	l.reorg(3, minedPayment(3, 0xb3), nil, 2)
	mustApply(t, m, l.entries...)
	if mark := mustRecord(t, m, 1).GetPaymentOrphaned(); mark == nil || mark.GetBlockNumber() != 0xb1 || mark.GetReplacement() != nil {
		t.Fatalf("pending record 1 mark %v", mark)
	}
	if orphaned(t, m) != 0 {
		t.Fatal("a pending mark is counted as an orphaned commit")
	}
	before := len(l.entries)
	l.batch(3, decide(1, minedPayment(1, 0xb1)), decide(2, minedPayment(2, 0xb2)), decide(3, minedPayment(3, 0xc3)))
	mustApply(t, m, l.entries[before:]...)

	if rec := mustRecord(t, m, 1); rec.GetStatus() != ledgerpb.Status_STATUS_REJECTED || rec.GetReason() != ReasonPaymentOrphaned {
		t.Errorf("decided on a retracted payment: %v %s", rec.GetStatus(), rec.GetReason())
	}
	if rec := mustRecord(t, m, 2); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || !proto.Equal(rec.GetPayment(), minedPayment(2, 0xc2)) ||
		rec.GetPaymentOrphaned() != nil {
		t.Errorf("decided on a retracted payment that was re-mined: %v", rec)
	}
	if rec := mustRecord(t, m, 3); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || !proto.Equal(rec.GetPayment(), minedPayment(3, 0xc3)) ||
		rec.GetPaymentOrphaned() != nil {
		t.Errorf("decided on the re-mined log: %v", rec)
	}
	if _, ok, _ := m.Node(path(alice, "nb")); ok {
		t.Error("the rejected proposal wrote its node")
	}

	rejected := mustRecord(t, m, 1)
	before = len(l.entries)
	l.reorg(1, minedPayment(1, 0xb1), nil, 9)
	mustApply(t, m, l.entries[before:]...)
	if got := mustRecord(t, m, 1); !proto.Equal(got, rejected) {
		t.Fatalf("a rejected record changed: %v", got)
	}
	if c, _ := m.Counts(); c.GetRejectedByReason()[ReasonPaymentOrphaned] != 1 || c.GetCommitted() != 2 {
		t.Fatalf("counts %v", c)
	}
}

// TestPaymentReorgRestoresReadoptedLog: a replacement that is the
// retracted log itself (its block canonical again after the chain flipped
// back) restores it: a committed record loses its mark and keeps the
// payment it committed with; a pending record's decision carrying the log
// commits. Never marked, a restoration changes nothing.
func TestPaymentReorgRestoresReadoptedLog(t *testing.T) {
	m := newMachine(t)
	l := newLog(t)
	paid := writeItem(1, alice, "p", `{}`)
	paid.Payment = minedPayment(1, 0xb1)
	accept := writeItem(2, alice, "q", `{}`)
	accept.Payment, accept.Accept = nil, true
	l.batch(1, paid, accept)
	mustApply(t, m, l.entries...)
	committed := mustRecord(t, m, 1)

	before := len(l.entries)
	l.reorg(1, minedPayment(1, 0xb1), minedPayment(1, 0xb1), 2)
	mustApply(t, m, l.entries[before:]...)
	if got := mustRecord(t, m, 1); !proto.Equal(got, committed) {
		t.Fatalf("restoring an unmarked record changed it: %v", got)
	}

	// Retracted, then canonical again: the mark comes and goes.
	before = len(l.entries)
	l.reorg(1, minedPayment(1, 0xb1), nil, 3)
	mustApply(t, m, l.entries[before:]...)
	if mustRecord(t, m, 1).GetPaymentOrphaned() == nil || orphaned(t, m) != 1 {
		t.Fatal("the retraction did not mark the record")
	}
	restored := minedPayment(1, 0xb1)
	restored.Confirmations = 9 // read again, later
	before = len(l.entries)
	l.reorg(1, minedPayment(1, 0xb1), restored, 4)
	mustApply(t, m, l.entries[before:]...)
	if got := mustRecord(t, m, 1); !proto.Equal(got, committed) || orphaned(t, m) != 0 {
		t.Fatalf("after the restoration: %v (orphaned %d), want %v", got, orphaned(t, m), committed)
	}

	// A pending proposal: marked, restored, then its decision on the log
	// commits.
	before = len(l.entries)
	l.reorg(2, minedPayment(2, 0xb2), nil, 5)
	l.reorg(2, minedPayment(2, 0xb2), minedPayment(2, 0xb2), 6)
	decided := writeItem(2, alice, "q", `{}`)
	decided.Payment = minedPayment(2, 0xb2)
	l.batch(7, decided)
	mustApply(t, m, l.entries[before:]...)
	if rec := mustRecord(t, m, 2); rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED || !proto.Equal(rec.GetPayment(), minedPayment(2, 0xb2)) ||
		rec.GetPaymentOrphaned() != nil {
		t.Fatalf("decided on a restored payment: %v", rec)
	}
	if _, ok, err := m.Node(path(alice, "q")); !ok || err != nil {
		t.Fatalf("the committed proposal's node: %v", err)
	}
}

// TestPaymentReorgScenario: after the scenario's reorg entries (pinned by
// TestStateHashGolden) record 8 holds its re-mined payment and 9 is
// rejected payment_orphaned.
func TestPaymentReorgScenario(t *testing.T) {
	m := newMachine(t)
	mustApply(t, m, scenario(t).entries...)
	if rec := mustRecord(t, m, 8); rec.GetStatus() != ledgerpb.Status_STATUS_FINALIZED || rec.GetPaymentOrphaned() != nil ||
		!proto.Equal(rec.GetPayment(), minedPayment(8, 0xc8)) {
		t.Errorf("record 8 %v", rec)
	}
	if rec := mustRecord(t, m, 9); rec.GetStatus() != ledgerpb.Status_STATUS_REJECTED || rec.GetReason() != ReasonPaymentOrphaned {
		t.Errorf("record 9 %v", rec)
	}
}
