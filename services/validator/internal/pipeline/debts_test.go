package pipeline

import (
	"context"
	"math/big"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
	"github.com/contentledger/contentledger/pkg/payment"
)

func (l *ledger) DebtTxSpent(tx [32]byte, logIndex uint32) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent[debtLog{tx, uint(logIndex)}], nil
}

func (l *ledger) DebtTxPaid(tx [32]byte) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, spent := range l.spent {
		if spent && k.tx == tx {
			return true, nil
		}
	}
	return false, nil
}

// Debts: the payments of the other tests carry no debt payment.
func (p paymentsByID) Debts() []payment.DebtPaid { return nil }

// debtLedger is a ledger that applies GcPay entries as apply does (a log
// pays once), can lose them as a leader change may, and counts what the
// pipeline asked.
type debtLedger struct {
	*ledger
	pipe   *Pipeline // the pipeline running on it
	leader atomic.Bool
	drop   atomic.Int32 // GcPay proposals still to lose

	mu      sync.Mutex
	spent   map[debtLog]bool
	paid    map[common.Address]uint64
	pays    int              // GcPay entries proposed, lost ones included
	checked map[debtLog]bool // DebtTxSpent answered true
	looks   int              // IsLeader calls
}

func (d *debtLedger) IsLeader() bool {
	d.mu.Lock()
	d.looks++
	d.mu.Unlock()
	return d.leader.Load()
}

func (d *debtLedger) Leading() (nodeID, term uint64, ok bool) { return 1, 1, d.leader.Load() }

func (d *debtLedger) Propose(ctx context.Context, data []byte) error {
	var e ledgerpb.Entry
	if err := proto.Unmarshal(data, &e); err != nil {
		return err
	}
	g := e.GetGcPay()
	if g == nil {
		return d.ledger.Propose(ctx, data)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pays++
	if d.drop.Load() > 0 {
		d.drop.Add(-1)
		return nil // "maybe": raft may lose an entry it accepted
	}
	key := debtLog{common.BytesToHash(g.GetTxHash()), uint(g.GetLogIndex())}
	if !d.spent[key] {
		d.spent[key] = true
		d.paid[common.BytesToAddress(g.GetWallet())] += g.GetAmountMicros()
	}
	// The ledger's own lock, under which it wakes its watchers; d.mu is
	// held already.
	d.ledger.mu.Lock()
	d.notify()
	d.ledger.mu.Unlock()
	return nil
}

func (d *debtLedger) DebtTxSpent(tx [32]byte, logIndex uint32) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := debtLog{tx, uint(logIndex)}
	if d.spent[key] {
		d.checked[key] = true
	}
	return d.spent[key], nil
}

func (d *debtLedger) DebtTxPaid(tx [32]byte) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, spent := range d.spent {
		if spent && k.tx == tx {
			return true, nil
		}
	}
	return false, nil
}

// read runs f under the ledger's lock.
func (d *debtLedger) read(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f()
}

// debtSource is a payment index holding debt payments only.
type debtSource struct {
	paymentsByID
	mu   sync.Mutex
	list []payment.DebtPaid
}

func (s *debtSource) Debts() []payment.DebtPaid {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

func (s *debtSource) add(d ...payment.DebtPaid) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, d...)
}

func (s *debtSource) DebtsByTx(tx common.Hash) []payment.DebtPaid {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []payment.DebtPaid
	for _, d := range s.list {
		if d.TxHash == tx {
			out = append(out, d)
		}
	}
	return out
}

// retract takes a transaction's logs out, as the index does when a reorg
// takes them back.
func (s *debtSource) retract(tx common.Hash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = slices.DeleteFunc(s.list, func(d payment.DebtPaid) bool { return d.TxHash == tx })
}

// startDebts runs a pipeline on a debtLedger that leads or not and loses
// its first drop GcPay proposals.
func startDebts(t *testing.T, src Payments, leader bool, drop int32, edit func(*Config)) *debtLedger {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Contract, cfg.ChainID = contract, 1337
	cfg.FinalizeInterval = 5 * time.Millisecond
	cfg.Feed = openFeed{}
	edit(&cfg)
	d := &debtLedger{ledger: newLedger(), spent: map[debtLog]bool{}, paid: map[common.Address]uint64{}, checked: map[debtLog]bool{}}
	d.leader.Store(leader)
	d.drop.Store(drop)
	p, err := New(cfg, zap.NewNop(), d, d, src, fixedEpoch(7))
	if err != nil {
		t.Fatal(err)
	}
	d.pipe = p
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// waitUntil polls cond, under the ledger's lock, until it holds or 5 s pass.
func waitUntil(t *testing.T, d *debtLedger, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ok bool
		d.read(func() { ok = cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func debtPaid(wallet common.Address, tx common.Hash, log uint, wei *big.Int) payment.DebtPaid {
	return payment.DebtPaid{ChainID: 1337, Contract: contract, Wallet: wallet, Payer: common.HexToAddress("0xfe"), Amount: wei,
		TxHash: tx, BlockHash: common.HexToHash("0xb1"), BlockNumber: 9, LogIndex: log}
}

// TestPayDebtsPaysEachObservedLogOnce: the leader proposes one GcPay per
// observed log, two logs of one transaction each paying, at the contract's
// ratio; logs that pay nothing are never proposed, and a spent log is not
// proposed again.
func TestPayDebtsPaysEachObservedLogOnce(t *testing.T) {
	alice, bob := common.HexToAddress("0xa1"), common.HexToAddress("0xb0")
	tx, tx2 := common.HexToHash("0xaa"), common.HexToHash("0xbb")
	foreign := debtPaid(bob, common.HexToHash("0xcc"), 0, payment.Standard.Price(payment.ETH))
	foreign.Contract = common.HexToAddress("0x01")
	src := &debtSource{}
	src.add(
		debtPaid(alice, tx, 1, payment.Standard.Price(payment.ETH)), // 3.25
		debtPaid(alice, tx, 4, payment.Express.Price(payment.ETH)),  // 6.50, the same transaction
		debtPaid(bob, tx2, 0, big.NewInt(1_000_000_000_000)),        // 0.00325
		debtPaid(bob, common.HexToHash("0xdd"), 0, big.NewInt(1)),   // less than a micro
		foreign, // another contract's
	)
	d := startDebts(t, src, true, 0, func(*Config) {})
	valid := []debtLog{{tx, 1}, {tx, 4}, {tx2, 0}}
	waitUntil(t, d, "every paying log is seen spent", func() bool {
		for _, k := range valid {
			if !d.checked[k] {
				return false
			}
		}
		return true
	})
	d.read(func() {
		if d.paid[alice] != 9_750_000 || d.paid[bob] != 3_250 || len(d.paid) != 2 {
			t.Errorf("paid %v, want alice 9.75 and bob 0.00325", d.paid)
		}
		if d.pays != 3 || len(d.spent) != 3 {
			t.Errorf("%d GcPay proposed for %d logs, want 3 for 3", d.pays, len(d.spent))
		}
	})
	// A log observed later is paid too.
	late := debtPaid(bob, common.HexToHash("0xee"), 2, payment.Standard.Price(payment.ETH))
	src.add(late)
	waitUntil(t, d, "the late log is paid", func() bool { return d.checked[debtLog{late.TxHash, 2}] })
	d.read(func() {
		if d.paid[bob] != 3_253_250 || d.pays != 4 {
			t.Errorf("after a late log: paid %v in %d GcPay", d.paid, d.pays)
		}
	})
}

// TestPayDebtsOnlyWhileLeading: a follower proposes nothing; once it leads,
// it pays.
func TestPayDebtsOnlyWhileLeading(t *testing.T) {
	wallet := common.HexToAddress("0xa1")
	src := &debtSource{}
	src.add(debtPaid(wallet, common.HexToHash("0xaa"), 0, payment.Standard.Price(payment.ETH)))
	d := startDebts(t, src, false, 0, func(*Config) {})
	// Every loop of the pipeline asks; at 5 ms, payDebts asked several times by then.
	waitUntil(t, d, "the loops looked a few times", func() bool { return d.looks >= 20 })
	d.read(func() {
		if d.pays != 0 {
			t.Fatalf("a follower proposed %d GcPay", d.pays)
		}
	})
	d.leader.Store(true)
	waitUntil(t, d, "the new leader pays", func() bool { return d.paid[wallet] == 3_250_000 })
}

// TestPayDebtsProposesAgainWhenLost: a GcPay raft lost is proposed again
// after CommitTimeout, not at every look.
func TestPayDebtsProposesAgainWhenLost(t *testing.T) {
	wallet := common.HexToAddress("0xa1")
	src := &debtSource{}
	src.add(debtPaid(wallet, common.HexToHash("0xaa"), 0, payment.Standard.Price(payment.ETH)))
	start := time.Now()
	d := startDebts(t, src, true, 1, func(c *Config) { c.CommitTimeout = 100 * time.Millisecond })
	waitUntil(t, d, "the lost GcPay is proposed again and paid", func() bool { return d.paid[wallet] == 3_250_000 })
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("proposed again after %s, before CommitTimeout", waited)
	}
	d.read(func() {
		if d.pays != 2 {
			t.Errorf("%d GcPay proposed, want the lost one and one more", d.pays)
		}
	})
}

// TestPayDebtsStopsWhenRetracted: a GcPay raft lost is not proposed again
// once its log has left the payment index (a reorg took it back).
func TestPayDebtsStopsWhenRetracted(t *testing.T) {
	wallet := common.HexToAddress("0xa1")
	tx := common.HexToHash("0xaa")
	src := &debtSource{}
	src.add(debtPaid(wallet, tx, 0, payment.Standard.Price(payment.ETH)))
	d := startDebts(t, src, true, 1, func(c *Config) { c.CommitTimeout = 100 * time.Millisecond })
	waitUntil(t, d, "the GcPay proposed (and lost)", func() bool { return d.pays == 1 })
	src.retract(tx)
	waitStats(t, d.pipe, "the GcPay settled", func(s Stats) bool { return s.ChangesInFlight == 0 && s.QueuedChanges == 0 })
	d.read(func() {
		if d.pays != 1 || d.paid[wallet] != 0 {
			t.Fatalf("%d GcPay proposed, %d paid, for a log retracted after the first was lost", d.pays, d.paid[wallet])
		}
	})
	if st := d.pipe.Stats(); st.Reproposed != 0 {
		t.Fatalf("stats %+v: an entry was proposed again", st)
	}
}

// TestPayDebtsNotInMockMode: without payment verification the loop does
// not run (and has no index to read).
func TestPayDebtsNotInMockMode(t *testing.T) {
	d := startDebts(t, nil, true, 0, func(c *Config) { c.VerifyPayments = false })
	waitUntil(t, d, "the pipeline ran its finality loop", func() bool { return d.FinalizedEpoch() > 0 })
	d.read(func() {
		if d.pays != 0 {
			t.Fatalf("%d GcPay proposed in MOCK mode", d.pays)
		}
	})
}
