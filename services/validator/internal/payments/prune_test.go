package payments

import (
	"encoding/binary"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

// fakeState is applied state: records by id, spent debt logs.
type fakeState struct {
	mu      sync.Mutex
	records map[common.Hash]*ledgerpb.ProposalRecord
	spent   map[pruneKey]bool
}

func newFakeState() *fakeState {
	return &fakeState{records: map[common.Hash]*ledgerpb.ProposalRecord{}, spent: map[pruneKey]bool{}}
}

func (s *fakeState) Record(id common.Hash) (*ledgerpb.ProposalRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[id]
	return rec, ok, nil
}

func (s *fakeState) DebtTxSpent(tx [32]byte, logIndex uint32) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spent[pruneKey{debt: true, id: tx, log: uint(logIndex)}], nil
}

// decide gives id a record of status holding payment p.
func (s *fakeState) decide(p payment.ProposalPaid, status ledgerpb.Status) *ledgerpb.ProposalRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := p
	held.Removed = false
	rec := &ledgerpb.ProposalRecord{Status: status, Payment: held.Proto()}
	s.records[p.ProposalID] = rec
	return rec
}

func (s *fakeState) spend(d payment.DebtPaid) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spent[pruneKey{debt: true, id: d.TxHash, log: d.LogIndex}] = true
}

// fakeChain is the watcher's status: a head, and a finalized block or none.
type fakeChain struct{ status payment.WatcherStatus }

func (c fakeChain) Latest() (payment.WatcherStatus, time.Time, bool) {
	return c.status, time.Time{}, c.status.Head.Number > 0
}

func finalAt(head, finalized uint64) fakeChain {
	return fakeChain{payment.WatcherStatus{Head: payment.StatusBlock{Number: head}, Finalized: &finalized}}
}

// paidAt is the payment of proposal n, alone in its transaction, in block.
func paidAt(n, block uint64) payment.ProposalPaid {
	var id, tx common.Hash
	binary.BigEndian.PutUint64(id[24:], n)
	binary.BigEndian.PutUint64(tx[24:], n+1<<32)
	return payment.ProposalPaid{ChainID: 1337, Contract: common.HexToAddress("0x0c"), ProposalID: id, Payer: common.HexToAddress("0x01"),
		Amount: big.NewInt(1e15), Class: payment.Standard, Token: payment.ETH, TxHash: tx,
		BlockHash: common.BigToHash(new(big.Int).SetUint64(block)), BlockNumber: block, LogIndex: uint(n % 7)}
}

func debtAt(n, block uint64) payment.DebtPaid {
	var tx common.Hash
	binary.BigEndian.PutUint64(tx[24:], n+2<<32)
	return payment.DebtPaid{ChainID: 1337, Contract: common.HexToAddress("0x0c"), Wallet: common.HexToAddress("0x02"), Payer: common.HexToAddress("0x02"),
		Amount: big.NewInt(1e12), TxHash: tx, BlockHash: common.BigToHash(new(big.Int).SetUint64(block)), BlockNumber: block, LogIndex: 4}
}

func retracted(p payment.ProposalPaid) payment.ProposalPaid {
	p.Removed = true
	return p
}

func TestPruneRemovesOnlyWhatIsSpentAndFinal(t *testing.T) {
	ix, st := NewIndex(), newFakeState()
	const final = 100
	spent := paidAt(1, 90) // committed on this log, final: pruned
	ix.Observe(spent)
	st.decide(spent, ledgerpb.Status_STATUS_COMMITTED)
	finalized := paidAt(2, 100) // FINALIZED, at the final block itself: pruned
	ix.Observe(finalized)
	st.decide(finalized, ledgerpb.Status_STATUS_FINALIZED)

	kept := map[string]payment.ProposalPaid{}
	keep := func(name string, p payment.ProposalPaid) payment.ProposalPaid {
		ix.Observe(p)
		kept[name] = p
		return p
	}
	st.decide(keep("committed, not final", paidAt(3, 101)), ledgerpb.Status_STATUS_COMMITTED)
	keep("no proposal yet", paidAt(4, 10))
	st.decide(keep("pending", paidAt(5, 10)), ledgerpb.Status_STATUS_PENDING)
	st.decide(keep("rejected", paidAt(6, 10)), ledgerpb.Status_STATUS_REJECTED)
	otherLog := keep("committed on another log", paidAt(7, 10))
	moved := otherLog
	moved.BlockHash, moved.BlockNumber = common.HexToHash("0xfeed"), 9
	st.decide(moved, ledgerpb.Status_STATUS_COMMITTED)
	orphaned := keep("committed, marked orphaned", paidAt(8, 10))
	st.decide(orphaned, ledgerpb.Status_STATUS_COMMITTED).PaymentOrphaned = &ledgerpb.PaymentOrphan{}

	// A re-mined payment spent and final: its retraction goes with it.
	remined := paidAt(9, 50)
	ix.Observe(retracted(paidAt(9, 40)))
	ix.Observe(remined)
	st.decide(remined, ledgerpb.Status_STATUS_COMMITTED)
	// Retraction-only: of a REJECTED proposal it goes, of a committed one
	// (the payer may pay again) it stays.
	goneX := paidAt(10, 30)
	ix.Observe(retracted(goneX))
	st.decide(goneX, ledgerpb.Status_STATUS_REJECTED)
	keptX := paidAt(11, 30)
	ix.Observe(retracted(keptX))
	st.decide(keptX, ledgerpb.Status_STATUS_COMMITTED).PaymentOrphaned = &ledgerpb.PaymentOrphan{}

	spentDebt, unspentDebt, lateDebt := debtAt(1, 20), debtAt(2, 20), debtAt(3, 101)
	for _, d := range []payment.DebtPaid{spentDebt, unspentDebt, lateDebt} {
		ix.ObserveDebt(d)
	}
	st.spend(spentDebt)
	st.spend(lateDebt)

	var total PruneStats
	for !total.Swept {
		s, err := ix.Prune(final, st, 3) // small batches: several passes
		if err != nil {
			t.Fatal(err)
		}
		if s.Examined > 3 {
			t.Fatalf("a pass of batch 3 examined %d keys", s.Examined)
		}
		total.Pruned += s.Pruned
		total.Swept = s.Swept
	}
	for _, p := range []payment.ProposalPaid{spent, finalized, remined} {
		if _, ok := ix.Lookup(p.ProposalID); ok {
			t.Errorf("payment of %s spent and final is still indexed", p.ProposalID.Hex())
		}
		if _, ok := ix.Retracted(p.ProposalID); ok {
			t.Errorf("retraction of %s stayed after its re-mined payment was pruned", p.ProposalID.Hex())
		}
		if logs := ix.Transaction(p.TxHash); len(logs) != 0 {
			t.Errorf("transaction %s of a pruned payment still listed: %+v", p.TxHash.Hex(), logs)
		}
	}
	if logs := ix.Transaction(paidAt(9, 40).TxHash); len(logs) != 0 {
		t.Errorf("the retracted log's transaction is still listed: %+v", logs)
	}
	for name, p := range kept {
		if got, ok := ix.Lookup(p.ProposalID); !ok || got.BlockHash != p.BlockHash {
			t.Errorf("%s: payment pruned", name)
		}
	}
	if _, ok := ix.Retracted(goneX.ProposalID); ok {
		t.Error("retraction of a REJECTED proposal in a final block stayed")
	}
	if _, ok := ix.Retracted(keptX.ProposalID); !ok {
		t.Error("retraction of a committed proposal was pruned")
	}
	debts := ix.Debts()
	if len(debts) != 2 || debts[0].TxHash != unspentDebt.TxHash || debts[1].TxHash != lateDebt.TxHash {
		t.Errorf("debts after pruning: %+v", debts)
	}
	if s := ix.Stats(); total.Pruned != 5 || s.Pruned != 5 || s.Indexed != len(kept) {
		t.Errorf("pruned %d, stats %+v", total.Pruned, s)
	}
}

func TestPruneKeepsAnEntryThatChangedDuringThePass(t *testing.T) {
	ix, st := NewIndex(), newFakeState()
	p := paidAt(1, 10)
	ix.Observe(p)
	st.decide(p, ledgerpb.Status_STATUS_COMMITTED)
	c := ix.candidates(100, 10, &PruneStats{})
	if len(c) != 1 {
		t.Fatalf("candidates %+v", c)
	}
	// A reorg replaces the payment between the read and the removal.
	ix.Observe(retracted(p))
	again := p
	again.BlockHash = common.HexToHash("0xbeef")
	ix.Observe(again)
	ix.mu.Lock()
	removed := ix.removeLocked(c[0])
	ix.mu.Unlock()
	if removed {
		t.Fatal("an entry replaced after it was judged was removed")
	}
	if got, ok := ix.Lookup(p.ProposalID); !ok || got.BlockHash != again.BlockHash {
		t.Fatalf("lookup after the pass: %+v %v", got, ok)
	}
}

func TestKeeperFinality(t *testing.T) {
	cases := map[string]struct {
		chain fakeChain
		final uint64
		ok    bool
	}{
		"no status":                    {fakeChain{}, 0, false},
		"finalized block":              {finalAt(1000, 900), 900, true},
		"finalized above head ignored": {finalAt(1000, 5000), 1000, true},
		"no finality: head - depth":    {fakeChain{payment.WatcherStatus{Head: payment.StatusBlock{Number: 5000}}}, 5000 - DefaultReorgDepth, true},
		"no finality, shallow chain":   {fakeChain{payment.WatcherStatus{Head: payment.StatusBlock{Number: 100}}}, 0, false},
	}
	for name, c := range cases {
		k, err := NewKeeper(KeeperConfig{Index: NewIndex(), State: newFakeState(), Chain: c.chain})
		if err != nil {
			t.Fatal(err)
		}
		if final, ok := k.Final(); final != c.final || ok != c.ok {
			t.Errorf("%s: final %d %v, want %d %v", name, final, ok, c.final, c.ok)
		}
	}
	if _, err := NewKeeper(KeeperConfig{Index: NewIndex()}); err == nil {
		t.Error("a keeper without state and chain was accepted")
	}
}

func TestPruneShrinksTheIndex(t *testing.T) {
	ix, st := NewIndex(), newFakeState()
	const n = 3 * shrinkBelow
	for i := range uint64(n) {
		p := paidAt(i+1, 10)
		ix.Observe(p)
		st.decide(p, ledgerpb.Status_STATUS_COMMITTED)
	}
	ix.Observe(paidAt(n+1, 10)) // never spent: stays
	for {
		s, err := ix.Prune(10, st, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if s.Swept {
			break
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(ix.byID) != 1 || len(ix.sweep) != 1 || ix.peak != 1 || len(ix.byTx) != 1 || len(ix.observedAt) != 1 {
		t.Fatalf("after pruning all but one: %d ids, %d sweep keys, peak %d, %d transactions", len(ix.byID), len(ix.sweep), ix.peak, len(ix.byTx))
	}
}

// countingState counts the records read.
type countingState struct {
	*fakeState
	reads int
}

func (s *countingState) Record(id common.Hash) (*ledgerpb.ProposalRecord, bool, error) {
	s.reads++
	return s.fakeState.Record(id)
}

// TestPruneBacksOffUnsettledEntries: a final payment applied state has not
// spent is read on sweeps 1, 2, 4, 8, ... (not on every one), and pruned
// at the first read after it is spent.
func TestPruneBacksOffUnsettledEntries(t *testing.T) {
	ix := NewIndex()
	p := paidAt(1, 10)
	ix.Observe(p)
	st := &countingState{fakeState: newFakeState()}
	var readOn []int
	for sweep := 1; sweep <= 16; sweep++ {
		before := st.reads
		if _, err := ix.Prune(100, st, 10); err != nil {
			t.Fatal(err)
		}
		if st.reads > before {
			readOn = append(readOn, sweep)
		}
	}
	if want := []int{1, 2, 4, 8, 16}; !slices.Equal(readOn, want) {
		t.Fatalf("read on sweeps %v, want %v", readOn, want)
	}
	st.decide(p, ledgerpb.Status_STATUS_COMMITTED)
	for sweep := 17; ; sweep++ {
		s, err := ix.Prune(100, st, 10)
		if err != nil {
			t.Fatal(err)
		}
		if s.Pruned == 1 {
			if sweep > 32 {
				t.Fatalf("pruned on sweep %d, want by 32", sweep)
			}
			break
		}
		if sweep > 32 {
			t.Fatal("a spent and final payment was not pruned")
		}
	}
	if _, ok := ix.Lookup(p.ProposalID); ok {
		t.Fatal("pruned payment still found")
	}
}
