package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/state"
	"github.com/contentledger/contentledger/services/validator/internal/storage"
)

// machineLedger applies every proposed entry to a real state machine at
// once, as a single-node raft would: the reorg tests need apply's own
// handling of PaymentReorg. Decisions can be held back (hold) to stand for
// a batch still on its way while a retraction overtakes it.
type machineLedger struct {
	m      *state.Machine
	mu     sync.Mutex
	index  uint64
	leader atomic.Bool
	hold   atomic.Pointer[chan struct{}] // decisions wait until it is closed
	reorgs atomic.Int64                  // PaymentReorg entries proposed
	// holdReorgs holds PaymentReorg entries the same way; heldReorgs
	// counts those waiting.
	holdReorgs atomic.Pointer[chan struct{}]
	heldReorgs atomic.Int64
}

func newMachineLedger(t *testing.T) *machineLedger {
	db, err := storage.Open(storage.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := state.Open(db, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	l := &machineLedger{m: m}
	l.leader.Store(true)
	return l
}

func (l *machineLedger) IsLeader() bool                 { return l.leader.Load() }
func (l *machineLedger) LeaderChanged() <-chan struct{} { return nil }
func (l *machineLedger) Leading() (nodeID, term uint64, ok bool) {
	return 1, 1, l.leader.Load() // Propose applies entries in term 1
}

func (l *machineLedger) Propose(ctx context.Context, data []byte) error {
	if !l.leader.Load() {
		return errors.New("not the leader")
	}
	var e ledgerpb.Entry
	if err := proto.Unmarshal(data, &e); err != nil {
		return err
	}
	if e.GetPaymentReorg() != nil {
		l.reorgs.Add(1)
		if hold := l.holdReorgs.Load(); hold != nil {
			l.heldReorgs.Add(1)
			select {
			case <-*hold:
				l.heldReorgs.Add(-1)
			case <-ctx.Done():
				l.heldReorgs.Add(-1)
				return ctx.Err()
			}
		}
	}
	if hold := l.hold.Load(); hold != nil && decides(e.GetBatch()) {
		select {
		case <-*hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.index++
	return l.m.Apply([]state.Entry{{Index: l.index, Term: 1, Data: data}})
}

// decides reports whether a batch carries a decision (not only acceptances).
func decides(b *ledgerpb.ProposalBatch) bool {
	for _, it := range b.GetItems() {
		if !it.GetAccept() {
			return true
		}
	}
	return false
}

func (l *machineLedger) Record(id common.Hash) (*ledgerpb.ProposalRecord, bool, error) {
	return l.m.Record(id)
}

func (l *machineLedger) Undecided(limit int) ([]*ledgerpb.ProposalRecord, error) {
	return l.m.Undecided(limit)
}
func (l *machineLedger) Changed() <-chan struct{}                        { return l.m.Changed() }
func (l *machineLedger) FinalizedEpoch() uint64                          { return l.m.FinalizedEpoch() }
func (l *machineLedger) GcEpoch() uint64                                 { return l.m.GcEpoch() }
func (l *machineLedger) LeaderTerm() uint64                              { return l.m.LeaderTerm() }
func (l *machineLedger) LastGcRun() *ledgerpb.GcRun                      { return l.m.LastGcRun() }
func (l *machineLedger) GarbageBytes() uint64                            { return l.m.GarbageBytes() }
func (l *machineLedger) LastCompactStep() state.CompactStepApply         { return l.m.LastCompactStep() }
func (l *machineLedger) Account(w [20]byte) (*ledgerpb.GcAccount, error) { return l.m.Account(w) }
func (l *machineLedger) DebtTxPaid(tx [32]byte) (bool, error)            { return l.m.DebtTxPaid(tx) }
func (l *machineLedger) Intent(token [32]byte) (*ledgerpb.BlobIntent, error) {
	return l.m.Intent(token)
}
func (l *machineLedger) DebtTxSpent(tx [32]byte, i uint32) (bool, error) {
	return l.m.DebtTxSpent(tx, i)
}

// startOnMachine runs a pipeline verifying payments from index on a
// machineLedger.
func startOnMachine(t *testing.T, index *payments.Index, edit func(*Config)) (*Pipeline, *machineLedger) {
	cfg := DefaultConfig()
	cfg.Domain = signing.Domain{ChainID: 1337, VerifyingContract: contract}
	cfg.Contract, cfg.ChainID = contract, 1337
	cfg.PaymentWait, cfg.AdoptInterval, cfg.FinalizeInterval = 300*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond
	cfg.Feed = openFeed{}
	edit(&cfg)
	l := newMachineLedger(t)
	p, err := New(cfg, zap.NewNop(), l, l, index, fixedEpoch(7))
	if err != nil {
		t.Fatal(err)
	}
	l.m.SetObserver(p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, l
}

// paidIn is a valid payment of proposal id in transaction tx, mined in the
// block with hash block.
func paidIn(id, tx common.Hash, block byte) payment.ProposalPaid {
	return payment.ProposalPaid{Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: tx, Class: payment.Standard,
		Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH), BlockHash: common.BytesToHash([]byte{block, 0xbb}),
		BlockNumber: uint64(block), LogIndex: 2}
}

func retraction(p payment.ProposalPaid) payment.ProposalPaid {
	p.Removed = true
	return p
}

// waitRecord waits until the applied record of id satisfies ok.
func waitRecord(t *testing.T, l *machineLedger, id common.Hash, what string, ok func(*ledgerpb.ProposalRecord) bool) *ledgerpb.ProposalRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, found, err := l.Record(id)
		if err != nil {
			t.Fatal(err)
		}
		if found && ok(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: record %v", what, rec)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestParkedProposalWithRetractedPayment: a proposal whose payment was
// observed and then retracted waits like an unpaid one and, when its wait
// is over, is REJECTED payment_orphaned; one whose payment the new branch
// mines again meanwhile commits with the re-mined log.
func TestParkedProposalWithRetractedPayment(t *testing.T) {
	index := payments.NewIndex()
	events := newEventLog()
	p, l := startOnMachine(t, index, func(c *Config) { c.Events = events })
	key := payerKey()
	gone, back := common.HexToHash("0x0a"), common.HexToHash("0x0b")
	for _, id := range []common.Hash{gone, back} {
		index.Observe(paidIn(id, id, 0x10))
		index.Observe(retraction(paidIn(id, id, 0x10)))
	}
	for _, id := range []common.Hash{gone, back} {
		acceptEarlier(t, p, l, submission(t, key, id, id, payment.Standard))
	}
	waitStats(t, p, "both parked", func(s Stats) bool { return s.Verifiers.Parked == 2 })
	index.Observe(paidIn(back, back, 0x11)) // re-mined in another block

	if s := final(t, p, gone); s.Status != api.StatusRejected || s.Reason != string(apierror.PaymentOrphaned) {
		t.Errorf("retracted payment: %s %s", s.Status, s.Reason)
	}
	s := final(t, p, back)
	if s.Status != api.StatusCommitted || s.Payment == nil || s.Payment.BlockHash != paidIn(back, back, 0x11).BlockHash.Hex() {
		t.Errorf("re-mined payment: %s %+v", s.Status, s.Payment)
	}
	waitStats(t, p, "counted", func(s Stats) bool { return s.Verifiers.Rejected[string(apierror.PaymentOrphaned)] == 1 })
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	events.wait(t, fmt.Sprintf("rejected payment_orphaned %s %s", wallet.Hex(), gone.Hex()))
	if got := events.matching("rejected"); len(got) != 1 {
		t.Errorf("rejections %v", got)
	}
}

// TestRetractionBeforeCommitStopsDecision: the decision carrying a
// payment is on its way (held before raft) when the payment is retracted.
// The leader's PaymentReorg reaches the log first, so applying the decision
// rejects it payment_orphaned, and nothing is written.
func TestRetractionBeforeCommitStopsDecision(t *testing.T) {
	index := payments.NewIndex()
	events := newEventLog()
	p, l := startOnMachine(t, index, func(c *Config) { c.PaymentWait, c.Events = 5*time.Second, events })
	key := payerKey()
	id := common.HexToHash("0x0c")
	acceptEarlier(t, p, l, submission(t, key, id, id, payment.Standard))
	waitStats(t, p, "adopted and parked", func(s Stats) bool { return s.Verifiers.Parked == 1 })
	hold := make(chan struct{})
	l.hold.Store(&hold)
	index.Observe(paidIn(id, id, 0x20)) // decided VERIFIED; the decision waits at raft
	waitStats(t, p, "verified", func(s Stats) bool { return s.Verified == 1 })
	index.Observe(retraction(paidIn(id, id, 0x20)))
	waitRecord(t, l, id, "the pending record marked", func(r *ledgerpb.ProposalRecord) bool {
		return r.GetStatus() == ledgerpb.Status_STATUS_PENDING && r.GetPaymentOrphaned() != nil
	})
	events.wait(t, fmt.Sprintf("retracted %s %s committed=false reMined=false", id.Hex(), crypto.PubkeyToAddress(key.PublicKey).Hex()))
	close(hold)
	if s := final(t, p, id); s.Status != api.StatusRejected || s.Reason != string(apierror.PaymentOrphaned) {
		t.Fatalf("decision on a retracted payment: %s %s", s.Status, s.Reason)
	}
	if c, _ := l.m.Counts(); c.GetCommitted() != 0 || c.GetRejectedByReason()[string(apierror.PaymentOrphaned)] != 1 {
		t.Fatalf("counts %v", c)
	}
}

// TestRetractionAfterCommitIsRecorded: a retraction of a committed
// proposal's payment marks the record payment_orphaned with the retracted
// block on the leader's PaymentReorg, counted as such; when the same
// transaction is mined again the record takes the new log and the mark
// goes. A follower proposes nothing.
func TestRetractionAfterCommitIsRecorded(t *testing.T) {
	index := payments.NewIndex()
	events := newEventLog()
	p, l := startOnMachine(t, index, func(c *Config) { c.Events = events })
	key := payerKey()
	id := common.HexToHash("0x0d")
	orig := paidIn(id, id, 0x30)
	index.Observe(orig)
	if _, _, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard)); err != nil {
		t.Fatal(err)
	}
	if s := final(t, p, id); s.Status != api.StatusCommitted || s.PaymentOrphaned != nil {
		t.Fatalf("before the reorg: %+v", s)
	}

	index.Observe(retraction(orig))
	waitRecord(t, l, id, "marked", func(r *ledgerpb.ProposalRecord) bool { return r.GetPaymentOrphaned() != nil })
	s, err := p.Status(id)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != api.StatusCommitted || s.PaymentOrphaned == nil || s.PaymentOrphaned.BlockHash != orig.BlockHash.Hex() ||
		s.PaymentOrphaned.BlockNumber != orig.BlockNumber || s.PaymentOrphaned.LogIndex != 2 {
		t.Fatalf("status after the retraction: %+v", s)
	}
	if c, _ := l.m.Counts(); c.GetPaymentOrphaned() != 1 || c.GetCommitted() != 1 {
		t.Fatalf("counts %v", c)
	}
	proposed := l.reorgs.Load()
	time.Sleep(100 * time.Millisecond) // several passes: nothing more to say
	if l.reorgs.Load() != proposed {
		t.Fatalf("%d PaymentReorg entries after the mark, want none", l.reorgs.Load()-proposed)
	}

	// A follower does not act on what its index learns.
	l.leader.Store(false)
	remined := paidIn(id, id, 0x31)
	index.Observe(remined)
	time.Sleep(100 * time.Millisecond)
	if l.reorgs.Load() != proposed {
		t.Fatal("a follower proposed a PaymentReorg")
	}
	l.leader.Store(true)
	rec := waitRecord(t, l, id, "re-mined", func(r *ledgerpb.ProposalRecord) bool { return r.GetPaymentOrphaned() == nil })
	if common.BytesToHash(rec.GetPayment().GetBlockHash()) != remined.BlockHash {
		t.Fatalf("payment after the re-mine: %v", rec.GetPayment())
	}
	wallet := crypto.PubkeyToAddress(key.PublicKey).Hex()
	events.wait(t, fmt.Sprintf("retracted %s %s committed=true reMined=true", id.Hex(), wallet))
	if got := events.matching("retracted"); !slices.Equal(got, []string{
		fmt.Sprintf("retracted %s %s committed=true reMined=false", id.Hex(), wallet),
		fmt.Sprintf("retracted %s %s committed=true reMined=true", id.Hex(), wallet),
	}) {
		t.Fatalf("retraction events %v", got)
	}
	if c, _ := l.m.Counts(); c.GetPaymentOrphaned() != 0 {
		t.Fatalf("counts after the re-mine %v", c)
	}
}

// TestReadoptedPaymentIsRestored: the chain flips back, and a payment's
// block, dropped by a reorg, is canonical again (the watcher publishes the
// log again after its retraction). A committed record's mark goes and it
// keeps its payment; a decision held before raft while its payment was
// retracted and re-adopted commits; and a proposal decided after the
// re-adoption waits for the restoring entry rather than reach the log
// before it and be rejected payment_orphaned.
func TestReadoptedPaymentIsRestored(t *testing.T) {
	index := payments.NewIndex()
	p, l := startOnMachine(t, index, func(c *Config) { c.PaymentWait = 10 * time.Second })
	key := payerKey()

	t.Run("committed", func(t *testing.T) {
		id := common.HexToHash("0x1a")
		orig := paidIn(id, id, 0x40)
		index.Observe(orig)
		if _, _, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard)); err != nil {
			t.Fatal(err)
		}
		committed := waitRecord(t, l, id, "committed", func(r *ledgerpb.ProposalRecord) bool {
			return r.GetStatus() == ledgerpb.Status_STATUS_COMMITTED
		})
		index.Observe(retraction(orig))
		waitRecord(t, l, id, "marked", func(r *ledgerpb.ProposalRecord) bool { return r.GetPaymentOrphaned() != nil })
		index.Observe(orig) // canonical again
		rec := waitRecord(t, l, id, "restored", func(r *ledgerpb.ProposalRecord) bool { return r.GetPaymentOrphaned() == nil })
		if !proto.Equal(rec.GetPayment(), committed.GetPayment()) {
			t.Fatalf("payment after the restoration %v, want %v", rec.GetPayment(), committed.GetPayment())
		}
		if c, _ := l.m.Counts(); c.GetPaymentOrphaned() != 0 {
			t.Fatalf("counts %v", c)
		}
	})

	t.Run("decision on its way", func(t *testing.T) {
		id := common.HexToHash("0x1b")
		paid := paidIn(id, id, 0x41)
		acceptEarlier(t, p, l, submission(t, key, id, id, payment.Standard))
		waitStats(t, p, "adopted and parked", func(s Stats) bool { return s.Verifiers.Parked == 1 })
		hold := make(chan struct{})
		l.hold.Store(&hold)
		defer l.hold.Store(nil)
		index.Observe(paid) // decided; the decision waits at raft
		waitStats(t, p, "verified", func(s Stats) bool { return s.Verified >= 1 })
		index.Observe(retraction(paid))
		waitRecord(t, l, id, "marked", func(r *ledgerpb.ProposalRecord) bool { return r.GetPaymentOrphaned() != nil })
		index.Observe(paid)
		waitRecord(t, l, id, "mark restored", func(r *ledgerpb.ProposalRecord) bool {
			return r.GetPaymentOrphaned().GetReplacement() != nil
		})
		close(hold)
		if s := final(t, p, id); s.Status != api.StatusCommitted || s.Payment == nil || s.Payment.BlockHash != paid.BlockHash.Hex() {
			t.Fatalf("decision on a restored payment: %+v", s)
		}
	})

	t.Run("decided after the re-adoption", func(t *testing.T) {
		id := common.HexToHash("0x1c")
		paid := paidIn(id, id, 0x42)
		index.Observe(paid)
		index.Observe(retraction(paid))
		acceptEarlier(t, p, l, submission(t, key, id, id, payment.Standard))
		waitRecord(t, l, id, "marked while parked", func(r *ledgerpb.ProposalRecord) bool {
			return r.GetStatus() == ledgerpb.Status_STATUS_PENDING && r.GetPaymentOrphaned() != nil
		})
		hold := make(chan struct{})
		l.holdReorgs.Store(&hold)
		index.Observe(paid) // canonical again: the restoring entry is held
		deadline := time.Now().Add(5 * time.Second)
		for l.heldReorgs.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no restoring PaymentReorg proposed")
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(4 * restoreRecheck) // several rechecks: the decision must wait
		if rec, _, err := l.Record(id); err != nil || rec.GetStatus() != ledgerpb.Status_STATUS_PENDING {
			t.Fatalf("decided before its payment's restoration: %v %v", rec, err)
		}
		l.holdReorgs.Store(nil)
		close(hold)
		if s := final(t, p, id); s.Status != api.StatusCommitted || s.Payment == nil || s.Payment.BlockHash != paid.BlockHash.Hex() {
			t.Fatalf("decision on a restored payment: %+v", s)
		}
	})
}
