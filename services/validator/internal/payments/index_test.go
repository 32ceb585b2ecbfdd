package payments

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/validator/internal/epoch"
)

func TestIndexObserveAndRetract(t *testing.T) {
	ix := NewIndex()
	id := common.HexToHash("0x01")
	paid := payment.ProposalPaid{ProposalID: id, BlockHash: common.HexToHash("0xb1"), LogIndex: 3}

	got := make(chan payment.ProposalPaid, 1)
	go func() {
		p, err := ix.Wait(context.Background(), id)
		if err == nil {
			got <- p
		}
	}()
	ix.Observe(paid)
	select {
	case p := <-got:
		if p.BlockHash != paid.BlockHash {
			t.Fatalf("waited for %+v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Observe")
	}

	other := paid
	other.BlockHash, other.Removed = common.HexToHash("0xb2"), true
	ix.Observe(other) // a retraction of another log leaves this one
	if _, ok := ix.Lookup(id); !ok {
		t.Fatal("retraction of another block removed the payment")
	}
	retract := paid
	retract.Removed = true
	ix.Observe(retract)
	if _, ok := ix.Lookup(id); ok {
		t.Fatal("retracted payment still indexed")
	}
	if s := ix.Stats(); s.Observed != 3 || s.Indexed != 0 {
		t.Fatalf("stats %+v", s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := ix.Wait(ctx, common.HexToHash("0x02")); err == nil {
		t.Fatal("Wait for an unpaid id returned no error")
	}
}

func TestIndexDebts(t *testing.T) {
	ix := NewIndex()
	tx, other := common.HexToHash("0xaa"), common.HexToHash("0xbb")
	wallet := common.HexToAddress("0x01")
	debt := func(tx common.Hash, block uint64, log uint) payment.DebtPaid {
		return payment.DebtPaid{Wallet: wallet, TxHash: tx, BlockHash: common.BigToHash(new(big.Int).SetUint64(block)),
			BlockNumber: block, LogIndex: log, Amount: big.NewInt(int64(log))}
	}
	if got := ix.DebtsByTx(tx); len(got) != 0 {
		t.Fatalf("an empty index has %v", got)
	}
	changed := ix.Changed()
	ix.ObserveDebt(debt(tx, 5, 7)) // two logs of one transaction, seen out of order
	select {
	case <-changed:
	default:
		t.Fatal("ObserveDebt did not signal a change")
	}
	ix.ObserveDebt(debt(other, 4, 9))
	ix.ObserveDebt(debt(tx, 5, 2))
	ix.ObserveDebt(debt(tx, 5, 2)) // a repeat
	if got := ix.DebtsByTx(tx); len(got) != 2 || got[0].LogIndex != 2 || got[1].LogIndex != 7 {
		t.Fatalf("DebtsByTx = %+v, want logs 2 and 7", got)
	}
	if got := ix.Debts(); len(got) != 3 || got[0].TxHash != other || got[1].LogIndex != 2 || got[2].LogIndex != 7 {
		t.Fatalf("Debts = %+v, want chain order", got)
	}
	if s := ix.Stats(); s.Debts != 3 || s.Observed != 4 || s.Indexed != 0 {
		t.Fatalf("stats %+v", s)
	}

	elsewhere := debt(tx, 6, 2) // a retraction of the log as mined in another block
	elsewhere.Removed = true
	ix.ObserveDebt(elsewhere)
	if got := ix.DebtsByTx(tx); len(got) != 2 {
		t.Fatalf("a retraction of another block removed a debt payment: %+v", got)
	}
	for _, log := range []uint{2, 7} {
		retract := debt(tx, 5, log)
		retract.Removed = true
		ix.ObserveDebt(retract)
	}
	if got := ix.DebtsByTx(tx); len(got) != 0 {
		t.Fatalf("retracted debt payments still indexed: %+v", got)
	}
	if s := ix.Stats(); s.Debts != 1 || len(ix.Debts()) != 1 {
		t.Fatalf("after the retractions: %+v", s)
	}
}

// TestFollowerDispatch: a payment message feeds the payments, a debt
// payment message the debts; messages that do not decode, and subjects of
// another chain, change nothing.
func TestFollowerDispatch(t *testing.T) {
	ix := NewIndex()
	f := &Follower{ChainID: 1337, Index: ix, Log: zap.NewNop()}
	addr, hash := common.HexToAddress("0x01"), common.HexToHash("0x02")
	paid := payment.ProposalPaid{ChainID: 1337, Contract: addr, ProposalID: common.HexToHash("0x03"), Payer: addr, Amount: big.NewInt(1),
		TxHash: hash, BlockHash: hash}
	debt := payment.DebtPaid{ChainID: 1337, Contract: addr, Wallet: addr, Payer: addr, Amount: big.NewInt(1), TxHash: common.HexToHash("0x04"), BlockHash: hash}
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	f.dispatch("chain.1337.payments", marshal(paid.Proto()), 1)
	f.dispatch("chain.1337.debts", marshal(debt.Proto()), 2)
	f.dispatch("chain.1337.debts", marshal(paid.Proto()), 3) // a payment on the debts subject: malformed
	f.dispatch("chain.1337.debts", []byte{0xff}, 4)
	f.dispatch("chain.1.debts", marshal(debt.Proto()), 5)
	if _, ok := ix.Lookup(paid.ProposalID); !ok {
		t.Fatal("payment not indexed")
	}
	if got := ix.DebtsByTx(debt.TxHash); len(got) != 1 || got[0].Wallet != addr {
		t.Fatalf("debt payment not indexed: %+v", got)
	}
	if s := ix.Stats(); s.Observed != 2 || s.Indexed != 1 || s.Debts != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestIndexRemembersRetractions: a retraction is remembered for its
// proposal id, the last one per id, also after the payment is observed
// again in another block (re-mined); Retractions lists them in chain order.
func TestIndexRemembersRetractions(t *testing.T) {
	ix := NewIndex()
	a, b := common.HexToHash("0x0a"), common.HexToHash("0x0b")
	if _, ok := ix.Retracted(a); ok {
		t.Fatal("a retraction before any")
	}
	paidA := payment.ProposalPaid{ProposalID: a, BlockHash: common.HexToHash("0xa1"), BlockNumber: 9, LogIndex: 1}
	paidB := payment.ProposalPaid{ProposalID: b, BlockHash: common.HexToHash("0xb1"), BlockNumber: 5, LogIndex: 0}
	ix.Observe(paidA)
	ix.Observe(paidB)
	for _, p := range []payment.ProposalPaid{paidA, paidB} {
		p.Removed = true
		ix.Observe(p)
	}
	remined := paidA
	remined.BlockHash, remined.BlockNumber = common.HexToHash("0xa2"), 10
	ix.Observe(remined)

	if got, ok := ix.Lookup(a); !ok || got.BlockHash != remined.BlockHash {
		t.Fatalf("re-mined payment not indexed: %+v", got)
	}
	if got, ok := ix.Retracted(a); !ok || got.BlockHash != paidA.BlockHash || !got.Removed {
		t.Fatalf("retraction of a: %+v, %v", got, ok)
	}
	if _, ok := ix.Lookup(b); ok {
		t.Fatal("b is still paid")
	}
	list := ix.Retractions()
	if len(list) != 2 || list[0].ProposalID != b || list[1].ProposalID != a {
		t.Fatalf("Retractions %+v, want b's then a's", list)
	}
	if s := ix.Stats(); s.Retracted != 2 || s.Indexed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestFollowerDispatchesEpochs: an epoch message moves the epoch clock; a
// lower one is ignored, and messages that do not decode, contradict
// themselves or name another chain change nothing.
func TestFollowerDispatchesEpochs(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := epoch.NewChain(epoch.DefaultLength, 0, func() time.Time { return now })
	f := &Follower{ChainID: 1337, Index: NewIndex(), Epochs: clock, Log: zap.NewNop()}
	update := func(current, finalized uint64) []byte {
		b, err := payment.EpochUpdate{ChainID: 1337, Current: current, Finalized: finalized, Source: payment.EpochSourceBlockTime}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	f.dispatch("chain.1337.epochs", update(500, 497), 1)
	if clock.Current() != 500 || clock.Finalized() != 497 {
		t.Fatalf("after the first update: %d/%d", clock.Current(), clock.Finalized())
	}
	f.dispatch("chain.1337.epochs", update(499, 496), 2) // behind: ignored
	f.dispatch("chain.1337.epochs", []byte(`{"chainId":1337,"current":600,"finalized":601,"source":"beacon"}`), 3)
	f.dispatch("chain.1337.epochs", []byte(`{"chainId":1,"current":600,"finalized":598,"source":"beacon"}`), 4)
	f.dispatch("chain.1337.epochs", []byte{0xff}, 5)
	if clock.Current() != 500 || clock.Finalized() != 497 {
		t.Fatalf("after a lower and malformed updates: %d/%d", clock.Current(), clock.Finalized())
	}
	f.dispatch("chain.1337.epochs", update(501, 499), 6)
	if clock.Current() != 501 || clock.Finalized() != 499 {
		t.Fatalf("after a newer update: %d/%d", clock.Current(), clock.Finalized())
	}
	if st := clock.Chain(); st.Updates != 3 || st.Regressions != 1 {
		t.Fatalf("clock state %+v", st)
	}
	if s := f.Index.Stats(); s.Observed != 0 {
		t.Fatalf("epoch messages reached the payment index: %+v", s)
	}
}

// TestIndexWatch: a watch is closed by its own id's payment or retraction
// only, and is forgotten once its last holder stops.
func TestIndexWatch(t *testing.T) {
	ix := NewIndex()
	id, other := common.HexToHash("0x01"), common.HexToHash("0x02")
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	first, stopFirst := ix.Watch(id)
	second, stopSecond := ix.Watch(id)
	ix.Observe(payment.ProposalPaid{ProposalID: other, BlockHash: common.HexToHash("0xb1")})
	if closed(first) || closed(second) {
		t.Fatal("another id's payment woke the watch")
	}
	ix.Observe(payment.ProposalPaid{ProposalID: id, BlockHash: common.HexToHash("0xb1")})
	if !closed(first) || !closed(second) {
		t.Fatal("the id's payment did not wake its watches")
	}
	stopFirst()
	stopSecond()

	again, stop := ix.Watch(id)
	if closed(again) {
		t.Fatal("a watch taken after the change is already closed")
	}
	ix.Observe(payment.ProposalPaid{ProposalID: id, BlockHash: common.HexToHash("0xb1"), Removed: true})
	if !closed(again) {
		t.Fatal("the id's retraction did not wake its watch")
	}
	stop()

	_, stop = ix.Watch(other)
	stop()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(ix.watches) != 0 {
		t.Fatalf("%d watches left after every holder stopped", len(ix.watches))
	}
}
