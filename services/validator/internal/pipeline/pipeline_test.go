package pipeline

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/payments"
	"github.com/contentledger/contentledger/services/validator/internal/state"
)

// ledger stands in for raft and the state machine: a proposed entry is
// "applied" at once, recording acceptances and decisions, finality, leader
// announcements and GC account changes as apply would. The raft and state
// packages have their own tests; the app and e2e tests run the pipeline on
// the real ones.
type ledger struct {
	gate      chan struct{} // when set, Propose of a proposal batch waits until it is closed
	refuse    atomic.Bool   // when set, Propose refuses, as raft without a leader
	refused   atomic.Int64  // proposals refused
	lose      atomic.Int32  // entries other than batches still to lose, as a leader change may
	mu        sync.Mutex
	changed   chan struct{} // closed after the next apply, as state.Machine's Changed
	records   map[common.Hash]*ledgerpb.ProposalRecord
	index     uint64
	batches   int                     // entries that carried a batch
	lastBatch *ledgerpb.ProposalBatch // the newest of them
	ops       map[string]int          // other entries proposed, by op, lost ones included
	finalized uint64                  // the newest FinalizeEpochs entry's epoch
	gcEpoch   uint64                  // the newest GcExecute entry's epoch
	garbage   uint64                  // segment bytes since the last compaction, set by tests
	runs      []*ledgerpb.GcRun       // the compactions applied
	// runSteps are the steps a run takes to end (0: 1); stepTook is what
	// LastCompactStep says each step's apply took.
	runSteps  int
	stepTook  time.Duration
	lastStep  state.CompactStepApply
	stepBytes []uint64                         // of each GcCompactStep proposed
	elected   []*ledgerpb.LeaderElected        // the LeaderElected entries proposed
	announced uint64                           // the newest term announced, as apply keeps it
	accounts  map[[20]byte]*ledgerpb.GcAccount // GC debt accounts, set by tests and GC entries
	spent     map[debtLog]bool                 // debt payment logs a GcPay spent
	observer  func([]*ledgerpb.ProposalRecord) // as state.Machine's observer
}

// Intent: the pipeline's tests record no uploads.
func (l *ledger) Intent([32]byte) (*ledgerpb.BlobIntent, error) { return nil, nil }

func newLedger() *ledger {
	return &ledger{records: map[common.Hash]*ledgerpb.ProposalRecord{}, changed: make(chan struct{}), ops: map[string]int{},
		accounts: map[[20]byte]*ledgerpb.GcAccount{}, spent: map[debtLog]bool{}}
}

func (l *ledger) IsLeader() bool { return true }

func (l *ledger) Leading() (nodeID, term uint64, ok bool) { return 1, 1, true }

func (l *ledger) LeaderTerm() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.announced
}

func (l *ledger) LeaderChanged() <-chan struct{} { return nil } // leadership never changes here

func (l *ledger) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// notify wakes the Changed waiters; l.mu is held.
func (l *ledger) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// proposed returns how many entries of op were proposed (lost ones included).
func (l *ledger) proposed(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops[op]
}

func (l *ledger) Undecided(limit int) ([]*ledgerpb.ProposalRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*ledgerpb.ProposalRecord
	for _, r := range l.records {
		if r.GetStatus() == ledgerpb.Status_STATUS_PENDING && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l *ledger) Propose(ctx context.Context, data []byte) error {
	if l.refuse.Load() {
		l.refused.Add(1)
		return errors.New("no leader")
	}
	var e ledgerpb.Entry
	if err := proto.Unmarshal(data, &e); err != nil {
		return err
	}
	if l.gate != nil && e.GetBatch() != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	observer := l.observer
	var written []*ledgerpb.ProposalRecord
	defer func() {
		l.notify()
		l.mu.Unlock()
		if observer != nil && len(written) > 0 {
			observer(written)
		}
	}()
	if e.GetBatch() == nil {
		l.ops[opName(&e)]++
		if l.lose.Load() > 0 {
			l.lose.Add(-1)
			return nil // "maybe": raft may lose an entry it accepted
		}
	}
	if le := e.GetLeaderElected(); le != nil {
		l.elected = append(l.elected, le)
		l.announced = max(l.announced, le.GetTerm())
		return nil
	}
	l.index++
	if g := e.GetGcExecute(); g != nil {
		if len(g.GetWallet()) == 20 {
			if acc := l.accounts[[20]byte(g.GetWallet())]; acc != nil && acc.GetPendingDebtMicros() > 0 {
				next := proto.Clone(acc).(*ledgerpb.GcAccount)
				next.ExecutedDebtMicros, next.PendingDebtMicros = next.ExecutedDebtMicros+next.PendingDebtMicros, 0
				l.accounts[[20]byte(g.GetWallet())] = next
			}
			return nil
		}
		l.gcEpoch = max(l.gcEpoch, g.GetEpoch())
		return nil
	}
	if g := e.GetGcCompact(); g != nil {
		n := len(l.runs)
		if n == 0 || g.GetEpoch() > l.runs[n-1].GetEpoch() && !state.RunInProgress(l.runs[n-1]) { // as apply does
			l.runs = append(l.runs, &ledgerpb.GcRun{Run: uint64(len(l.runs) + 1), Epoch: g.GetEpoch(), Index: l.index, AtMs: g.GetAtMs(), GarbageBytes: l.garbage})
			l.garbage = 0
		}
		return nil
	}
	if g := e.GetGcCompactStep(); g != nil {
		l.stepBytes = append(l.stepBytes, g.GetStepBytes())
		if n := len(l.runs); n > 0 && state.RunInProgress(l.runs[n-1]) && g.GetRun() == l.runs[n-1].GetRun() && g.GetStep() == l.runs[n-1].GetSteps()+1 {
			run := proto.Clone(l.runs[n-1]).(*ledgerpb.GcRun)
			run.Steps++
			if run.Steps >= uint64(max(l.runSteps, 1)) {
				run.Done, run.EndIndex = true, l.index
			}
			l.runs[n-1] = run
			l.lastStep = state.CompactStepApply{Run: run.GetRun(), Step: run.GetSteps(), Took: l.stepTook}
		}
		return nil
	}
	if g := e.GetGcCompactAbandon(); g != nil {
		if n := len(l.runs); n > 0 && state.RunInProgress(l.runs[n-1]) && g.GetRun() == l.runs[n-1].GetRun() {
			run := proto.Clone(l.runs[n-1]).(*ledgerpb.GcRun)
			run.Abandoned, run.EndIndex = g.GetReason(), l.index
			l.runs[n-1] = run
		}
		return nil
	}
	if g := e.GetGcSetLimit(); g != nil {
		next := &ledgerpb.GcAccount{Wallet: g.GetWallet()}
		if acc := l.accounts[[20]byte(g.GetWallet())]; acc != nil {
			next = proto.Clone(acc).(*ledgerpb.GcAccount)
		}
		next.LimitMicros = g.GetLimitMicros()
		l.accounts[[20]byte(g.GetWallet())] = next
		return nil
	}
	if g := e.GetGcPay(); g != nil {
		key := debtLog{common.BytesToHash(g.GetTxHash()), uint(g.GetLogIndex())}
		if !l.spent[key] {
			l.spent[key] = true
			next := &ledgerpb.GcAccount{Wallet: g.GetWallet()}
			if acc := l.accounts[[20]byte(g.GetWallet())]; acc != nil {
				next = proto.Clone(acc).(*ledgerpb.GcAccount)
			}
			next.PaidMicros += g.GetAmountMicros()
			l.accounts[[20]byte(g.GetWallet())] = next
		}
		return nil
	}
	if f := e.GetFinalize(); f != nil {
		if f.GetEpoch() > l.finalized {
			l.finalized = f.GetEpoch()
			for _, r := range l.records {
				if r.GetStatus() == ledgerpb.Status_STATUS_COMMITTED && r.GetProposal().GetEpoch() <= l.finalized {
					next := proto.Clone(r).(*ledgerpb.ProposalRecord)
					next.Status, next.FinalizedAtMs = ledgerpb.Status_STATUS_FINALIZED, f.GetAtMs()
					l.records[common.BytesToHash(r.GetProposal().GetId())] = next
					written = append(written, next)
				}
			}
		}
		return nil
	}
	l.batches++
	l.lastBatch = e.GetBatch()
	for _, it := range e.GetBatch().GetItems() {
		id := common.BytesToHash(it.GetProposal().GetId())
		prev, ok := l.records[id]
		if ok && state.Replaces(prev, it.GetProposal()) { // as apply does (ADR 0028)
			prev, ok = nil, false
		}
		if it.GetAccept() {
			if !ok {
				l.records[id] = &ledgerpb.ProposalRecord{Proposal: it.GetProposal(), Status: ledgerpb.Status_STATUS_PENDING}
				written = append(written, l.records[id])
			}
			continue
		}
		if ok && (prev.GetStatus() != ledgerpb.Status_STATUS_PENDING || !bytes.Equal(prev.GetProposal().GetDigest(), it.GetProposal().GetDigest())) {
			continue
		}
		rec := &ledgerpb.ProposalRecord{Proposal: it.GetProposal(), Payment: it.GetPayment(), Status: ledgerpb.Status_STATUS_COMMITTED, CommitIndex: l.index}
		if it.GetRejection() != "" {
			rec.Status, rec.Reason = ledgerpb.Status_STATUS_REJECTED, it.GetRejection()
		}
		l.records[id] = rec
		written = append(written, rec)
	}
	return nil
}

func (l *ledger) GcEpoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gcEpoch
}

func (l *ledger) LastGcRun() *ledgerpb.GcRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.runs); n > 0 {
		return l.runs[n-1]
	}
	return nil
}

func (l *ledger) LastCompactStep() state.CompactStepApply {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastStep
}

func (l *ledger) GarbageBytes() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.garbage
}

// addGarbage counts segment bytes written, as apply does.
func (l *ledger) addGarbage(n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.garbage += n
}

func (l *ledger) Account(wallet [20]byte) (*ledgerpb.GcAccount, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accounts[wallet], nil
}

func (l *ledger) FinalizedEpoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finalized
}

func (l *ledger) Record(id common.Hash) (*ledgerpb.ProposalRecord, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.records[id]
	return r, ok, nil
}

type paymentsByID map[common.Hash]payment.ProposalPaid

func (p paymentsByID) Lookup(id common.Hash) (payment.ProposalPaid, bool) {
	paid, ok := p[id]
	return paid, ok
}

// Changed and Watch never fire: the map does not change once the test
// built it.
func (p paymentsByID) Changed() <-chan struct{} { return nil }
func (p paymentsByID) Watch(common.Hash) (<-chan struct{}, func()) {
	return nil, func() {}
}

// openFeed is a chain feed that vouches for every payment: its head is far
// above any block of the tests, and it is never stale.
type openFeed struct{}

func (openFeed) Position() FeedPosition {
	return FeedPosition{Known: true, Head: 1 << 40, Cursor: 1 << 40}
}
func (openFeed) Seen(common.Hash) (uint64, bool) { return 0, false }
func (openFeed) Changed() <-chan struct{}        { return nil }

type fixedEpoch uint64

func (e fixedEpoch) Current() uint64 { return uint64(e) }

func (e fixedEpoch) Finalized() uint64 { return uint64(e) - 2 }

// movableEpoch is an epoch source whose finality a test moves.
type movableEpoch struct{ current, finalized atomic.Uint64 }

func (e *movableEpoch) Current() uint64   { return e.current.Load() }
func (e *movableEpoch) Finalized() uint64 { return e.finalized.Load() }

var contract = common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")

func start(t *testing.T, paid paymentsByID) (*Pipeline, *ledger) {
	return startWith(t, paid, nil, nil, func(*Config) {})
}

// startWith starts a pipeline on a ledger whose Propose waits for gate
// (nil: never waits), with epochs (nil: fixed at 7) and the test defaults
// edited by edit.
func startWith(t *testing.T, paid Payments, gate chan struct{}, epochs Epochs, edit func(*Config)) (*Pipeline, *ledger) {
	if epochs == nil {
		epochs = fixedEpoch(7)
	}
	cfg := DefaultConfig()
	cfg.Domain = signing.Domain{ChainID: 1337, VerifyingContract: contract}
	cfg.Contract, cfg.ChainID = contract, 1337
	cfg.PaymentWait = 200 * time.Millisecond
	cfg.Feed = openFeed{}
	cfg.AdoptInterval = 20 * time.Millisecond
	edit(&cfg)
	l := newLedger()
	l.gate = gate
	p, err := New(cfg, zap.NewNop(), l, l, paid, epochs)
	if err != nil {
		t.Fatal(err)
	}
	l.observer = p.RecordsApplied
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// The leader announces its term at once: the tests start once that
	// change is applied and no longer takes a place below the ceiling.
	waitStats(t, p, "the term announced", func(s Stats) bool { return l.LeaderTerm() == 1 && s.ChangesInFlight == 0 })
	return p, l
}

func submission(t *testing.T, key *ecdsa.PrivateKey, id, tx common.Hash, class payment.Class) *proposal.Submission {
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	sub := "page/" + id.Hex()[2:18]
	path := proposal.ContentPath("ledger", wallet, "default", sub)
	msg := []byte(`{"title":"x"}`)
	sig, err := signing.Sign(signing.Domain{ChainID: 1337, VerifyingContract: contract}, signing.Proposal{
		Action: "write", ProposalID: id, Wallet: wallet, Path: path, Organization: "default",
		PaymentTier: class.Name(), MessageHash: signing.MessageHash(msg),
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := proposal.ParseWrite(url.Values{
		"proposalId": {id.Hex()}, "walletAddress": {wallet.Hex()}, "message": {string(msg)}, "ethereumTxHash": {tx.Hex()},
		"signature": {hexutil.Encode(sig)}, "paymentTier": {class.Name()}, "path": {sub},
	}, proposal.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// acceptEarlier replicates the acceptance of sub, a PENDING record without
// a decision, as versions before the hold did for a proposal whose payment
// was not observed yet (ADR 0030): a leader adopts it and its verifiers
// decide it (verifier.go).
func acceptEarlier(t *testing.T, p *Pipeline, raft Proposer, sub *proposal.Submission) {
	t.Helper()
	prop := wireProposal(sub, sub.Digest(), p.cfg.Now(), p.epochs.Current())
	data, err := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{
		SealedAtMs: prop.GetAcceptedAtMs(), Epoch: prop.GetEpoch(), Items: []*ledgerpb.BatchItem{{Proposal: prop, Accept: true}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := raft.Propose(context.Background(), data); err != nil {
		t.Fatal(err)
	}
}

func final(t *testing.T, p *Pipeline, id common.Hash) api.ProposalStatus {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := p.WaitStatus(context.Background(), id, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if api.Terminal(s.Status) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("proposal %s still %s", id.Hex(), s.Status)
		}
	}
}

func TestPaymentOutcomes(t *testing.T) {
	key := payerKey()
	thief, _ := crypto.GenerateKey()
	paidID, tierID, txID, payerID, unpaidID := common.HexToHash("0x01"), common.HexToHash("0x02"), common.HexToHash("0x03"),
		common.HexToHash("0x05"), common.HexToHash("0x04")
	tx := common.HexToHash("0xaa")
	pay := func(id common.Hash, class payment.Class) payment.ProposalPaid {
		return payment.ProposalPaid{Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: tx, Class: class, Token: payment.ETH, Amount: class.Price(payment.ETH)}
	}
	p, _ := start(t, paymentsByID{paidID: pay(paidID, payment.Express), tierID: pay(tierID, payment.Standard),
		txID: pay(txID, payment.Standard), payerID: pay(payerID, payment.Standard)})

	// A payment observed that does not pay for the proposal is refused at
	// intake with its code, and nothing is replicated (ADR 0028).
	refused := []struct {
		id    common.Hash
		key   *ecdsa.PrivateKey
		tx    common.Hash
		class payment.Class
		code  apierror.Code
	}{
		{tierID, key, tx, payment.Priority, apierror.PaymentTierMismatch},
		{txID, key, common.HexToHash("0xbb"), payment.Standard, apierror.PaymentTxMismatch},
		{payerID, thief, tx, payment.Standard, apierror.PaymentPayerMismatch},
	}
	for _, c := range refused {
		_, _, err := p.Submit(context.Background(), submission(t, c.key, c.id, c.tx, c.class))
		if e := apierror.As(err); e == nil || e.Code != c.code || e.Status() != http.StatusPaymentRequired {
			t.Fatalf("%s: %v, want 402 %s", c.id.Hex(), err, c.code)
		}
		if _, err := p.Status(c.id); apierror.CodeOf(err) != apierror.NotFound {
			t.Fatalf("%s: a refused proposal left a status (%v)", c.id.Hex(), err)
		}
	}

	// The id and its payment stay free: the proposals the payments are
	// for commit.
	for _, id := range []common.Hash{paidID, tierID, txID, payerID} {
		class := payment.Standard
		if id == paidID {
			class = payment.Express
		}
		if s, created, err := p.Submit(context.Background(), submission(t, key, id, tx, class)); err != nil || !created {
			t.Fatalf("%s: %+v %v %v", id.Hex(), s, created, err)
		}
	}
	for _, id := range []common.Hash{paidID, tierID, txID, payerID} {
		if s := final(t, p, id); s.Status != api.StatusCommitted {
			t.Errorf("%s: %s %q, want COMMITTED", id.Hex(), s.Status, s.Reason)
		}
	}
	// Nothing unpaid is replicated: the unpaid one waits PaymentWait at
	// intake, then is refused, retryable, and leaves no status.
	_, _, err := p.Submit(context.Background(), submission(t, key, unpaidID, tx, payment.Standard))
	if e := apierror.As(err); e == nil || e.Code != apierror.PaymentNotFound || !e.Retryable || e.RetryAfter <= 0 {
		t.Fatalf("unpaid: %v", err)
	}
	if _, err := p.Status(unpaidID); apierror.CodeOf(err) != apierror.NotFound {
		t.Fatalf("the unpaid proposal left a status (%v)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Pending != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the sender drops applied proposals right after apply
	}
	if st := p.Stats(); st.Pending != 0 || st.Accepted != 4 || st.Verified != 4 || st.Rejected != 0 || st.Applied != 4 || st.Holds.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The four commits, and only they, are in the submit-to-commit
	// histogram; each took more than nothing and less than CommitTimeout.
	lat := p.CommitLatency()
	if lat.Count != 4 || lat.SumSeconds <= 0 || lat.Buckets[10] != 4 {
		t.Fatalf("commit latency %+v", lat)
	}
}

// TestHeldSubmissionRefusedOnMismatch: a thief's proposal submitted under
// an id before its payment is observed waits at intake without taking the
// id; when the owner's payment arrives it is refused 402
// payment_payer_mismatch, and the owner's own proposal commits on it.
func TestHeldSubmissionRefusedOnMismatch(t *testing.T) {
	pays := payments.NewIndex()
	p, _ := startWith(t, pays, nil, nil, func(c *Config) { c.PaymentWait = 10 * time.Second })
	owner := payerKey()
	thief, _ := crypto.GenerateKey()
	id, tx := common.HexToHash("0x0301"), common.HexToHash("0xcc")

	stolen := submission(t, thief, id, tx, payment.Standard)
	thiefDone := make(chan error, 1)
	go func() {
		_, _, err := p.Submit(context.Background(), stolen)
		thiefDone <- err
	}()
	waitStats(t, p, "the thief's submission held", func(s Stats) bool { return s.Holds.Waiting == 1 })
	if _, err := p.Status(id); apierror.CodeOf(err) != apierror.NotFound {
		t.Fatalf("a held submission has a status (%v)", err)
	}
	pays.Observe(payment.ProposalPaid{Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: tx,
		Class: payment.Standard, Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)})
	if err := <-thiefDone; apierror.CodeOf(err) != apierror.PaymentPayerMismatch {
		t.Fatalf("thief's submission: %v", err)
	}
	s, created, err := p.Submit(context.Background(), submission(t, owner, id, tx, payment.Standard))
	if err != nil || !created {
		t.Fatalf("owner's submission: %+v %v %v", s, created, err)
	}
	if s := final(t, p, id); s.Status != api.StatusCommitted || !strings.EqualFold(s.Wallet, payerWallet().Hex()) || s.Payment == nil {
		t.Fatalf("owner's proposal: %+v", s)
	}
	// The id is spent now: the thief's repeat is a conflict.
	if _, _, err := p.Submit(context.Background(), stolen); apierror.CodeOf(err) != apierror.ProposalIDConflict {
		t.Fatalf("thief's repeat after the commit: %v", err)
	}
}

// TestConcurrentStatusReads reads statuses while verification changes them;
// run with -race.
// TestBatchesCarryEventRetention: the leader writes its event retention
// into every batch, so that every validator prunes by the same settings.
func TestBatchesCarryEventRetention(t *testing.T) {
	key := payerKey()
	id, tx := common.HexToHash("0x01"), common.HexToHash("0xaa")
	paid := paymentsByID{id: {Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: tx, Class: payment.Standard,
		Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)}}
	p, l := startWith(t, paid, nil, nil, func(c *Config) { c.EventWindow, c.EventMax = time.Hour, 7 })
	if _, _, err := p.Submit(context.Background(), submission(t, key, id, tx, payment.Standard)); err != nil {
		t.Fatal(err)
	}
	if s := final(t, p, id); s.Status != api.StatusCommitted {
		t.Fatalf("status %+v", s)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.lastBatch; b.GetEventWindowMs() != time.Hour.Milliseconds() || b.GetEventMax() != 7 {
		t.Fatalf("batch carries window %d ms, max %d", b.GetEventWindowMs(), b.GetEventMax())
	}
}

func TestConcurrentStatusReads(t *testing.T) {
	key := payerKey()
	paid := paymentsByID{}
	var ids []common.Hash
	for i := range 50 {
		id := common.BigToHash(big.NewInt(int64(i + 100)))
		paid[id] = payment.ProposalPaid{Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: id, Class: payment.Standard, Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)}
		ids = append(ids, id)
	}
	p, _ := start(t, paid)
	var wg sync.WaitGroup
	for _, id := range ids {
		if _, _, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard)); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if s := final(t, p, id); s.Status != api.StatusCommitted {
				t.Errorf("%s: %s %s", id.Hex(), s.Status, s.Reason)
			}
		})
	}
	wg.Wait()
	for _, id := range ids { // reads of decided proposals leave no waiter behind
		if _, err := p.Status(id); err != nil {
			t.Fatal(err)
		}
	}
	// The sender watches each id of a batch it sent until the batch is
	// applied (awaitApplied), on its own goroutine: a watch of its may
	// still be open a moment after the readers returned.
	waiters := func() int {
		p.outcomes.mu.Lock()
		defer p.outcomes.mu.Unlock()
		return len(p.outcomes.waiters)
	}
	deadline := time.Now().Add(5 * time.Second)
	for waiters() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters left 5s after every reader returned", waiters())
		}
		time.Sleep(time.Millisecond) // polling the sender's watches
	}
}

func TestIntakeGuards(t *testing.T) {
	key, other := func() (*ecdsa.PrivateKey, *ecdsa.PrivateKey) {
		a, _ := crypto.GenerateKey()
		b, _ := crypto.GenerateKey()
		return a, b
	}()
	id := common.HexToHash("0x09")
	p, _ := start(t, paymentsByID{id: {Payer: crypto.PubkeyToAddress(key.PublicKey), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: id,
		Class: payment.Standard, Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)}})
	forged := submission(t, other, id, id, payment.Standard)
	forged.Wallet = crypto.PubkeyToAddress(key.PublicKey)
	if _, _, err := p.Submit(context.Background(), forged); apierror.CodeOf(err) != apierror.InvalidSignature {
		t.Fatalf("forged: %v", err)
	}
	sub := submission(t, key, id, id, payment.Standard)
	if _, created, err := p.Submit(context.Background(), sub); err != nil || !created {
		t.Fatalf("first: %v", err)
	}
	if s, created, err := p.Submit(context.Background(), sub); err != nil || created || s.ProposalID != id.Hex() {
		t.Fatalf("identical: %+v %v %v", s, created, err)
	}
	changed := submission(t, key, id, common.HexToHash("0x0a"), payment.Standard)
	if _, _, err := p.Submit(context.Background(), changed); apierror.CodeOf(err) != apierror.ProposalIDConflict {
		t.Fatalf("conflict: %v", err)
	}
}

// TestResubmissionAnswersTheAppliedRecord: between its decision's apply
// and the end of the proposal's batch, the proposal is both applied and in
// the pending set; an identical resubmission then answers what was applied.
func TestResubmissionAnswersTheAppliedRecord(t *testing.T) {
	key := payerKey()
	id := common.HexToHash("0x0b")
	paid := paymentsByID{id: {Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: id, Class: payment.Standard, Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)}}
	p, l := start(t, paid)
	// The apply of a batch holds until the test is done: the sender, which
	// drops the batch's proposals from the pending set after it, waits.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	l.mu.Lock()
	l.observer = func(recs []*ledgerpb.ProposalRecord) {
		p.RecordsApplied(recs)
		<-release
	}
	l.mu.Unlock()
	sub := submission(t, key, id, id, payment.Standard)
	if s, created, err := p.Submit(context.Background(), sub); err != nil || !created || s.Status != api.StatusCommitted {
		t.Fatalf("first: %+v %v %v", s, created, err)
	}
	if s, created, err := p.Submit(context.Background(), sub); err != nil || created || s.Status != api.StatusCommitted {
		t.Fatalf("identical, while its batch ends: %+v %v %v", s, created, err)
	}
}

// TestAdoptsUndecided: an accepted proposal that this process is not deciding
// (a previous leader accepted it) is taken over and decided.
func TestAdoptsUndecided(t *testing.T) {
	key := payerKey()
	id := common.HexToHash("0x42")
	paid := paymentsByID{id: {Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: id, Class: payment.Standard, Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)}}
	p, l := start(t, paid)
	sub := submission(t, key, id, id, payment.Standard)
	accepted, _ := proto.Marshal(&ledgerpb.Entry{Op: &ledgerpb.Entry_Batch{Batch: &ledgerpb.ProposalBatch{Items: []*ledgerpb.BatchItem{
		{Proposal: wireProposal(sub, sub.Digest(), time.Now(), 7), Accept: true},
	}}}})
	if err := l.Propose(context.Background(), accepted); err != nil { // as a previous leader did
		t.Fatal(err)
	}
	if s := final(t, p, id); s.Status != api.StatusCommitted {
		t.Fatalf("adopted proposal: %s %s", s.Status, s.Reason)
	}
	if st := p.Stats(); st.Adopted != 1 || st.Accepted != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSenderBackpressure fills the sender's in-flight ceiling while raft
// does not apply anything: backpressure comes on with the rest queued, and
// once raft applies again the queue drains to zero, backpressure goes off,
// and every proposal is committed. Events are told of it once each way.
func TestSenderBackpressure(t *testing.T) {
	gate := make(chan struct{})
	events := newEventLog()
	p, l := startWith(t, paymentsByID{}, gate, nil, func(c *Config) {
		c.VerifyPayments = false // decided at intake, as in MOCK mode
		c.MaxBatch, c.MaxPendingMessages = 2, 4
		c.CommitTimeout = time.Minute // no re-proposals while the gate is shut
		c.Events = events
	})
	key := payerKey()
	const n = 10
	ids := make([]common.Hash, n)
	errs := make(chan error, n)
	for i := range ids {
		ids[i] = common.BigToHash(big.NewInt(int64(1000 + i)))
		sub := submission(t, key, ids[i], ids[i], payment.Standard)
		go func() {
			_, _, err := p.Submit(context.Background(), sub)
			errs <- err
		}()
	}
	waitStats(t, p, "backpressure with the ceiling in flight", func(s Stats) bool {
		return s.BackpressureActive && s.InFlight == 4 && s.Queued == n-4 && s.Pending == n
	})
	events.wait(t, "backpressure true 4 4")
	f := p.ReleaseFlow()
	if f.Governor.State != "holding" || f.Governor.Action != "hold" || len(f.Governor.Reasons) != 1 || f.Stages.InFlight != 4 ||
		f.Stages.Packing != 6 || f.Stages.ReadyBuckets != 1 || f.Stages.MicroBatches < 1 || f.Stages.Batches < 2 || f.Tiers["standard"].Pending != n || f.Tiers["standard"].Released != 4 {
		t.Fatalf("release flow under backpressure: %+v", f)
	}
	o := p.EpochOverlay()
	if o.CurrentEpoch != 7 || o.NextEpoch != 8 || o.FinalizedEpoch != 5 || len(o.Epochs) != 1 || o.Epochs[0].Epoch != 7 ||
		!o.Epochs[0].Current || o.Epochs[0].Finalized || o.Epochs[0].ByTier["standard"] != n || o.Epochs[0].ByStatus["PENDING"] != n {
		t.Fatalf("epoch overlay: %+v", o)
	}
	q := p.QueueStats()
	if !q.BackpressureActive || q.BackpressurePendingRawCount != 4 || q.QueuedProposals != 6 || q.BatchQueueSize != 3 || q.PackingBuckets != 1 || q.MicroBatches < 1 ||
		q.ProposalsByEpoch["7"] != n || q.ProposalsByEpochAndTier["7"]["standard"] != n || len(q.PendingEpochStats) != 1 ||
		q.PendingEpochStats[0] != (api.PendingEpoch{Epoch: 7, Pending: n, OldestAgeMs: q.PendingEpochStats[0].OldestAgeMs}) ||
		q.CurrentEpoch != 7 || q.FinalizedEpoch != 5 || q.EpochsUntilFinality != 2 || q.ContractVersion != api.QueueStatsVersion {
		t.Fatalf("queue stats under backpressure: %+v", q)
	}
	close(gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitStats(t, p, "drained", func(s Stats) bool {
		return !s.BackpressureActive && s.InFlight == 0 && s.Queued == 0 && s.Pending == 0 && s.BackpressureEvents >= 1
	})
	events.wait(t, "backpressure false")
	// Each batch sealed at the ceiling lifted backpressure for an instant;
	// that is no event.
	if got := backpressureCalls(events); !slices.Equal(got, []string{"backpressure true 4 4", "backpressure false"}) {
		t.Fatalf("backpressure events %v", got)
	}
	if q := p.QueueStats(); q.ProcessedCount != n || len(q.ProposalsByEpoch) != 0 || len(q.PendingEpochStats) != 0 || q.BatchQueueSize != 0 {
		t.Fatalf("queue stats drained: %+v", q)
	}
	if f := p.ReleaseFlow(); f.Governor.State != "open" || f.Stages != (api.ReleaseStages{}) || f.Tiers["standard"].Released != n {
		t.Fatalf("release flow drained: %+v", f)
	}
	for _, id := range ids {
		if rec, ok, _ := l.Record(id); !ok || rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED {
			t.Fatalf("proposal %s: %v", id.Hex(), rec)
		}
	}
}

// TestGroupCommit: while a batch is in flight, proposals gather and go
// together in the next batch instead of one entry each.
func TestGroupCommit(t *testing.T) {
	gate := make(chan struct{})
	p, l := startWith(t, paymentsByID{}, gate, nil, func(c *Config) { c.VerifyPayments = false })
	key := payerKey()
	submit := func(i int) {
		id := common.BigToHash(big.NewInt(int64(2000 + i)))
		sub := submission(t, key, id, id, payment.Standard)
		go func() { _, _, _ = p.Submit(context.Background(), sub) }()
	}
	submit(0) // goes alone: nothing is in flight
	waitStats(t, p, "the first batch in flight", func(s Stats) bool { return s.InFlight == 1 })
	for i := 1; i <= 20; i++ {
		submit(i)
	}
	waitStats(t, p, "the others queued behind it", func(s Stats) bool { return s.Queued == 20 && !s.BackpressureActive })
	close(gate)
	waitStats(t, p, "all applied", func(s Stats) bool { return s.Pending == 0 })
	l.mu.Lock()
	entries := l.batches
	l.mu.Unlock()
	if entries != 2 {
		t.Fatalf("21 proposals took %d entries, want 2 (one alone, then the 20 that gathered)", entries)
	}
}

func waitStats(t *testing.T, p *Pipeline, what string, ok func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(p.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: stats %+v", what, p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOverloadAnswersFastAndDrains submits far more than MaxPending while
// raft applies nothing: the excess is refused at once with a retryable 429,
// the pending set stays at its bound, and once raft applies again the
// backlog drains to zero with every accepted proposal committed.
func TestOverloadAnswersFastAndDrains(t *testing.T) {
	gate := make(chan struct{})
	p, l := startWith(t, paymentsByID{}, gate, nil, func(c *Config) {
		c.VerifyPayments = false
		c.MaxPending, c.MaxBatch, c.MaxPendingMessages = 8, 4, 4
		c.CommitTimeout = time.Minute
	})
	key := payerKey()
	const n = 60
	type result struct {
		id  common.Hash
		err error
	}
	results := make(chan result, n)
	subs := make([]*proposal.Submission, n)
	for i := range subs {
		id := common.BigToHash(big.NewInt(int64(3000 + i)))
		subs[i] = submission(t, key, id, id, payment.Standard)
	}
	for _, sub := range subs {
		go func() {
			_, _, err := p.Submit(context.Background(), sub)
			results <- result{sub.ProposalID, err}
		}()
	}
	// Everything beyond the bound is answered while nothing is applied.
	var accepted []common.Hash
	for range n - 8 {
		r := <-results
		var e *apierror.Error
		if !errors.As(r.err, &e) || e.Code != apierror.Overloaded || !e.Retryable || e.Status() != 429 {
			t.Fatalf("submission beyond the bound: %v", r.err)
		}
	}
	if s := p.Stats(); s.Pending != 8 {
		t.Fatalf("pending %d, want the bound 8", s.Pending)
	}
	close(gate)
	for range 8 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		accepted = append(accepted, r.id)
	}
	waitStats(t, p, "drained", func(s Stats) bool { return s.Pending == 0 && s.Queued == 0 && s.InFlight == 0 })
	for _, id := range accepted {
		if rec, ok, _ := l.Record(id); !ok || rec.GetStatus() != ledgerpb.Status_STATUS_COMMITTED {
			t.Fatalf("accepted proposal %s: %v", id.Hex(), rec)
		}
	}
}

// TestFinalizesWhenEpochIsFinal: a committed proposal stays COMMITTED until
// the epoch source says its epoch is final; then the leader proposes
// finality and it becomes FINALIZED.
func TestFinalizesWhenEpochIsFinal(t *testing.T) {
	epochs := &movableEpoch{}
	epochs.current.Store(7)
	epochs.finalized.Store(5)
	p, l := startWith(t, paymentsByID{}, nil, epochs, func(c *Config) {
		c.VerifyPayments = false
		c.FinalizeInterval = 10 * time.Millisecond
	})
	key := payerKey()
	id := common.HexToHash("0x77")
	if _, _, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard)); err != nil {
		t.Fatal(err)
	}
	if s := final(t, p, id); s.Status != api.StatusCommitted {
		t.Fatalf("before its epoch is final: %s", s.Status)
	}
	waitStats(t, p, "finality of epoch 5 proposed", func(Stats) bool { return l.FinalizedEpoch() == 5 })
	if s, _ := p.Status(id); s.Status != api.StatusCommitted {
		t.Fatalf("epoch 7 finalized with epoch 5: %s", s.Status)
	}
	epochs.finalized.Store(7)
	waitStats(t, p, "finalized", func(s Stats) bool { return s.Finalized == 1 })
	s, err := p.Status(id)
	if err != nil || s.Status != api.StatusFinalized || s.FinalizedAt == nil {
		t.Fatalf("after epoch 7 is final: %+v %v", s, err)
	}
	if q := p.QueueStats(); q.TotalFinalizedCount != 1 {
		t.Fatalf("queue stats %+v", q)
	}
}

// TestWriteBlockedByDebt: a wallet whose executed GC debt is at its limit
// gets 402 write_blocked_gc_debt with the figures, before its signature is
// even checked; its deletes still go through; other wallets are not affected.
func TestWriteBlockedByDebt(t *testing.T) {
	p, l := startWith(t, paymentsByID{}, nil, nil, func(c *Config) { c.VerifyPayments = false })
	key := payerKey()
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	l.mu.Lock()
	l.accounts = map[[20]byte]*ledgerpb.GcAccount{wallet: {Wallet: wallet[:], ExecutedDebtMicros: 100_000_000, PendingDebtMicros: 500_000}}
	l.mu.Unlock()
	id := common.HexToHash("0x51")
	sub := submission(t, key, id, id, payment.Standard)
	_, _, err := p.Submit(context.Background(), sub)
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != apierror.WriteBlockedGCDebt || e.Status() != 402 || e.Retryable ||
		e.Details["executedDebt"] != "100.00" || e.Details["pendingDebt"] != "0.50" || e.Details["limit"] != "100.00" ||
		e.Details["payRoute"] != "/v1/gc/account/"+strings.ToLower(wallet.Hex())+"/pay" {
		t.Fatalf("blocked write: %v %+v", err, e)
	}
	if _, ok, _ := l.Record(id); ok {
		t.Fatal("a blocked write was recorded")
	}
	sub.Signature[10] ^= 0xff // the debt guard comes before the signature
	if _, _, err := p.Submit(context.Background(), sub); apierror.CodeOf(err) != apierror.WriteBlockedGCDebt {
		t.Fatalf("blocked write with a bad signature: %v", err)
	}
	other, _ := crypto.GenerateKey()
	id2 := common.HexToHash("0x52")
	if _, _, err := p.Submit(context.Background(), submission(t, other, id2, id2, payment.Standard)); err != nil {
		t.Fatalf("another wallet: %v", err)
	}
}

// countingLimiter admits the first n requests of each identifier.
type countingLimiter struct {
	mu   sync.Mutex
	n    int
	seen map[string]int
}

func (c *countingLimiter) Allow(id string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	c.seen[id]++
	return c.seen[id] <= c.n, nil
}

// TestWalletLimit: past its allowance a wallet gets 429 rate_limited,
// retryable; forged submissions in its name do not use the allowance up.
func TestWalletLimit(t *testing.T) {
	limiter := &countingLimiter{n: 2}
	p, _ := startWith(t, paymentsByID{}, nil, nil, func(c *Config) { c.VerifyPayments = false; c.WalletLimiter = limiter })
	key, forger := func() (*ecdsa.PrivateKey, *ecdsa.PrivateKey) {
		a, _ := crypto.GenerateKey()
		b, _ := crypto.GenerateKey()
		return a, b
	}()
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	for i := range 5 {
		id := common.BigToHash(big.NewInt(int64(4000 + i)))
		forged := submission(t, forger, id, id, payment.Standard)
		forged.Wallet = wallet
		if _, _, err := p.Submit(context.Background(), forged); apierror.CodeOf(err) != apierror.InvalidSignature {
			t.Fatalf("forged: %v", err)
		}
	}
	for i := range 3 {
		id := common.BigToHash(big.NewInt(int64(4100 + i)))
		_, _, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard))
		var e *apierror.Error
		switch {
		case i < 2 && err != nil:
			t.Fatalf("submission %d within the allowance: %v", i, err)
		case i == 2 && (!errors.As(err, &e) || e.Code != apierror.RateLimited || !e.Retryable || e.Status() != 429):
			t.Fatalf("submission past the allowance: %v", err)
		}
	}
}

// TestVerifiersParkUnpaidProposals: many proposals accepted before their
// payments were observed (by an earlier version) are adopted and wait
// parked, without a goroutine each; as payments arrive they are decided;
// the rest are REJECTED payment_not_found when their wait is over, counted
// by reason.
func TestVerifiersParkUnpaidProposals(t *testing.T) {
	pays := payments.NewIndex()
	p, l := startWith(t, pays, nil, nil, func(c *Config) { c.PaymentWait, c.Verifiers = 3*time.Second, 2 })

	key := payerKey()
	const n = 200
	ids := make([]common.Hash, n)
	goroutines := runtime.NumGoroutine()
	for i := range ids {
		ids[i] = common.BigToHash(big.NewInt(int64(5000 + i)))
		acceptEarlier(t, p, l, submission(t, key, ids[i], ids[i], payment.Standard))
	}
	waitStats(t, p, "all parked", func(s Stats) bool { return s.Verifiers.Parked == n })
	if q := p.QueueStats(); q.AwaitingPayment != n || q.Verifiers != 2 {
		t.Fatalf("queue stats while parked: %+v", q)
	}
	if extra := runtime.NumGoroutine() - goroutines; extra > 20 {
		t.Fatalf("%d goroutines more for %d parked proposals", extra, n)
	}
	for _, id := range ids[:n/2] {
		pays.Observe(payment.ProposalPaid{Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: id, Class: payment.Standard,
			Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)})
	}
	for _, id := range ids[:n/2] {
		if s := final(t, p, id); s.Status != api.StatusCommitted {
			t.Fatalf("paid proposal %s: %s %s", id.Hex(), s.Status, s.Reason)
		}
	}
	for _, id := range ids[n/2:] {
		if s := final(t, p, id); s.Status != api.StatusRejected || s.Reason != string(apierror.PaymentNotFound) {
			t.Fatalf("unpaid proposal %s: %s %s", id.Hex(), s.Status, s.Reason)
		}
	}
	waitStats(t, p, "all decided", func(s Stats) bool {
		return s.Pending == 0 && s.Verifiers.Parked == 0 && s.Verifiers.WaitedFound == n/2 &&
			s.Verifiers.Rejected[string(apierror.PaymentNotFound)] == n/2
	})
}

// TestRefusedBatchHoldsTheGovernor: while raft refuses proposals the
// release flow says holding, with the reason; the batch goes through as
// soon as raft takes it again.
func TestRefusedBatchHoldsTheGovernor(t *testing.T) {
	p, l := startWith(t, paymentsByID{}, nil, nil, func(c *Config) { c.VerifyPayments = false })
	l.refuse.Store(true)
	key := payerKey()
	id := common.HexToHash("0x99")
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Submit(context.Background(), submission(t, key, id, id, payment.Standard))
		done <- err
	}()
	waitStats(t, p, "refused", func(Stats) bool {
		f := p.ReleaseFlow()
		return f.Governor.State == "holding" && len(f.Governor.Reasons) == 1 && strings.Contains(f.Governor.Reasons[0], "no leader")
	})
	l.refuse.Store(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := final(t, p, id); s.Status != api.StatusCommitted {
		t.Fatalf("after raft took it: %s", s.Status)
	}
}

// TestQueueRates: the queue statistics carry the rates of proposals
// accepted and applied, sampled by Run every second. Proposals go on being
// submitted until a sample sees the counters move: one submitted before
// the first sample would leave every sample equal.
func TestQueueRates(t *testing.T) {
	key := payerKey()
	tx := common.HexToHash("0xaa")
	paid := paymentsByID{}
	var ids []common.Hash
	for i := range 200 {
		id := common.BigToHash(big.NewInt(int64(i + 1)))
		ids = append(ids, id)
		paid[id] = payment.ProposalPaid{Payer: payerWallet(), ChainID: 1337, Contract: contract, ProposalID: id, TxHash: tx, Class: payment.Standard,
			Token: payment.ETH, Amount: payment.Standard.Price(payment.ETH)}
	}
	p, _ := start(t, paid)
	if q := p.QueueStats(); q.IngressPerSec != 0 || q.CommitPerSec != 0 {
		t.Fatalf("rates before any proposal: %+v", q)
	}
	for _, id := range ids {
		if _, _, err := p.Submit(context.Background(), submission(t, key, id, tx, payment.Standard)); err != nil {
			t.Fatal(err)
		}
		final(t, p, id)
		if q := p.QueueStats(); q.IngressPerSec > 0 && q.CommitPerSec > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond) // a steady trickle, so that some land between two samples
	}
	t.Fatalf("no rates after %d proposals were accepted and applied: %+v", len(ids), p.QueueStats())
}

// staleList is a ledger whose list of undecided proposals was read before
// their decisions were applied.
type staleList struct {
	*ledger
	undecided []*ledgerpb.ProposalRecord
}

func (s staleList) Undecided(int) ([]*ledgerpb.ProposalRecord, error) { return s.undecided, nil }

// TestAdoptSkipsDecidedSinceListed: a proposal the undecided list names but
// whose decision was applied (and which left the pending set) since is not
// adopted and decided again; one still undecided is.
func TestAdoptSkipsDecidedSinceListed(t *testing.T) {
	l := newLedger()
	decided, undecided := common.HexToHash("0x51"), common.HexToHash("0x52")
	pendingRec := func(id common.Hash) *ledgerpb.ProposalRecord {
		return &ledgerpb.ProposalRecord{Proposal: &ledgerpb.Proposal{Id: id.Bytes()}, Status: ledgerpb.Status_STATUS_PENDING}
	}
	l.records[decided] = &ledgerpb.ProposalRecord{Proposal: &ledgerpb.Proposal{Id: decided.Bytes()}, Status: ledgerpb.Status_STATUS_REJECTED}
	l.records[undecided] = pendingRec(undecided)
	cfg := DefaultConfig()
	cfg.VerifyPayments = false
	p, err := New(cfg, zap.NewNop(), l, staleList{l, []*ledgerpb.ProposalRecord{pendingRec(decided), pendingRec(undecided)}}, nil, fixedEpoch(7))
	if err != nil {
		t.Fatal(err)
	}
	p.adoptUndecided()
	if st := p.Stats(); st.Adopted != 1 || st.Pending != 1 {
		t.Fatalf("stats %+v, want the undecided one adopted and the decided one left alone", st)
	}
	if _, err := p.Status(undecided); err != nil {
		t.Fatalf("the undecided proposal: %v", err)
	}
}

// payerKey is the key these tests sign with; payerWallet, its wallet, pays
// for their proposals (ADR 0028: a payment pays only for its payer's own).
func payerKey() *ecdsa.PrivateKey {
	key, err := crypto.HexToECDSA("4c0883a69102937d6231471b5dbb6204fe512961708279f2e3e8a5d4b8e3e9a1")
	if err != nil {
		panic(err)
	}
	return key
}

func payerWallet() common.Address { return crypto.PubkeyToAddress(payerKey().PublicKey) }
