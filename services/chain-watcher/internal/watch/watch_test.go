package watch_test

import (
	"cmp"
	"context"
	"errors"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
	"github.com/contentledger/contentledger/tools/devchain"
)

func pay(t *testing.T, ctx context.Context, chain *devchain.Chain, account int, id string, class payment.Class) common.Hash {
	t.Helper()
	h, err := chain.PayForProposal(ctx, devchain.DevAccounts[account].MustKey(), common.BytesToHash([]byte(id)), class)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// payDebt pays wei towards wallet's debt from a dev account; it does not commit.
func payDebt(t *testing.T, ctx context.Context, chain *devchain.Chain, account int, wallet common.Address, wei int64) common.Hash {
	t.Helper()
	h, err := chain.PayDebt(ctx, devchain.DevAccounts[account].MustKey(), wallet, big.NewInt(wei))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func commit(t *testing.T, chain *devchain.Chain, n int) {
	t.Helper()
	for range n {
		if _, err := chain.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

func head(t *testing.T, ctx context.Context, chain *devchain.Chain) uint64 {
	t.Helper()
	n, err := chain.Client().BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newWatcher(t *testing.T, chain *devchain.Chain, cfg watch.Config) *watch.Watcher {
	t.Helper()
	cfg.ChainID = chain.ChainID
	if cfg.Contract == (common.Address{}) {
		cfg.Contract = chain.PaymentLedger
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	w, err := watch.New(chain.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestNextWaitsForConfirmations(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	w := newWatcher(t, chain, watch.Config{Confirmations: 2})

	tx := pay(t, ctx, chain, 1, "p1", payment.Express)
	commit(t, chain, 1)
	r, err := chain.WaitMined(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	paid := r.BlockNumber.Uint64()

	// Head = paid: blocks up to paid-2 are readable, without the payment.
	b, ok, err := w.Next(ctx, 0)
	if err != nil || !ok {
		t.Fatalf("Next(0) = %v, %v", ok, err)
	}
	if b.To != paid-2 || len(b.Payments) != 0 {
		t.Fatalf("with head %d read up to %d with %d payments; want up to %d with none", b.Head, b.To, len(b.Payments), paid-2)
	}
	if _, ok, err := w.Next(ctx, paid-1); ok || err != nil {
		t.Fatalf("block %d with one confirmation was read (%v)", paid-1, err)
	}
	commit(t, chain, 1)
	if _, ok, _ := w.Next(ctx, paid); ok {
		t.Fatal("payment block read with 1 confirmation")
	}
	commit(t, chain, 1)
	b, ok, err = w.Next(ctx, paid-1)
	if err != nil || !ok {
		t.Fatalf("Next after 2 confirmations = %v, %v", ok, err)
	}
	if b.From != paid-1 || b.To != paid || len(b.Payments) != 1 {
		t.Fatalf("batch %d-%d with %d payments, want %d-%d with 1", b.From, b.To, len(b.Payments), paid-1, paid)
	}
	p := b.Payments[0]
	if p.TxHash != tx || p.BlockNumber != paid || p.Confirmations != 2 || p.Class != payment.Express ||
		p.ChainID != devchain.ChainID || p.Contract != chain.PaymentLedger || p.Payer != devchain.DevAccounts[1].Address {
		t.Errorf("payment %+v", p)
	}
	hdr, err := chain.Client().HeaderByNumber(ctx, r.BlockNumber)
	if err != nil {
		t.Fatal(err)
	}
	if b.Cursor != (watch.Cursor{Block: paid, Hash: hdr.Hash()}) {
		t.Errorf("cursor %+v, want block %d hash %s", b.Cursor, paid, hdr.Hash().Hex())
	}
}

func TestNextZeroConfirmationsReadsHead(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	w := newWatcher(t, chain, watch.Config{})
	tx := pay(t, ctx, chain, 2, "p0", payment.Standard)
	commit(t, chain, 1)
	b, ok, err := w.Next(ctx, 0)
	if err != nil || !ok || b.To != head(t, ctx, chain) || len(b.Payments) != 1 || b.Payments[0].TxHash != tx {
		t.Fatalf("Next = %+v, %v, %v", b, ok, err)
	}
}

// TestNextReadsDebtPaid: a DebtPaid log is read by the same query as the
// payments of its block, with its fields and confirmations.
func TestNextReadsDebtPaid(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	w := newWatcher(t, chain, watch.Config{Confirmations: 1})
	wallet := devchain.DevAccounts[7].Address
	payTx := pay(t, ctx, chain, 2, "with a debt", payment.Standard)
	debtTx := payDebt(t, ctx, chain, 3, wallet, 3_000_000_000_000_000)
	commit(t, chain, 2)
	r, err := chain.WaitMined(ctx, debtTx)
	if err != nil {
		t.Fatal(err)
	}
	b, ok, err := w.Next(ctx, 0)
	if err != nil || !ok || len(b.Payments) != 1 || b.Payments[0].TxHash != payTx || len(b.Debts) != 1 {
		t.Fatalf("Next = %+v, %v, %v", b, ok, err)
	}
	d := b.Debts[0]
	if d.TxHash != debtTx || d.Wallet != wallet || d.Payer != devchain.DevAccounts[3].Address || d.Amount.Int64() != 3_000_000_000_000_000 ||
		d.ChainID != devchain.ChainID || d.Contract != chain.PaymentLedger || d.BlockNumber != r.BlockNumber.Uint64() ||
		d.BlockHash != r.BlockHash || d.LogIndex != r.Logs[0].Index || d.Confirmations != 1 || d.Removed {
		t.Errorf("debt payment %+v", d)
	}
}

// TestRunOrderAndRanges pays in several blocks, several payments and a debt
// payment per block, plus payments and a debt payment to a second
// PaymentLedger that must be ignored, and checks that Run hands over
// contiguous bounded ranges whose payments and debt payments are each in
// chain order and, merged, are every log of the contract in chain order.
func TestRunOrderAndRanges(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)

	// A second deployment of the same contract: same event, other address.
	opts := chain.Transactor(ctx, devchain.DevAccounts[9].MustKey())
	ledger := paycontract.NewPaymentLedger()
	otherAddr, deployTx, err := bind.DeployContract(opts, common.FromHex(paycontract.PaymentLedgerMetaData.Bin), chain.Client(), ledger.PackConstructor(chain.DevUSDC))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, chain, 1)
	if _, err := chain.WaitMined(ctx, deployTx.Hash()); err != nil {
		t.Fatal(err)
	}

	var want []common.Hash // every log of the contract, payments and debts, in send order
	debtor := devchain.DevAccounts[6].Address
	for blk := range 5 {
		for i := range 3 {
			id := string(rune('a'+blk)) + string(rune('0'+i))
			want = append(want, pay(t, ctx, chain, i+1, id, payment.Classes[i]))
			if i == 0 { // a debt payment between two payments
				want = append(want, payDebt(t, ctx, chain, 5, debtor, int64(1000+blk)))
			}
		}
		// Foreign payment and debt payment in the same block, from another account.
		_, err := chain.SendTx(ctx, devchain.DevAccounts[9].MustKey(), otherAddr, payment.Standard.Price(payment.ETH),
			ledger.PackPayForProposal(common.BytesToHash([]byte("x"+string(rune('a'+blk)))), uint8(payment.Standard)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chain.SendTx(ctx, devchain.DevAccounts[9].MustKey(), otherAddr, big.NewInt(1), ledger.PackPayDebt(debtor)); err != nil {
			t.Fatal(err)
		}
		commit(t, chain, 1)
	}
	commit(t, chain, 1) // one confirmation for the last block
	last := head(t, ctx, chain) - 1

	w := newWatcher(t, chain, watch.Config{Confirmations: 1, MaxRange: 2})
	var (
		mu      sync.Mutex
		batches []watch.Batch
	)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- w.Run(runCtx, chain.DeployBlock, watch.HandlerFunc(func(_ context.Context, b watch.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, b)
			return nil
		}))
	}()
	testenv.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(batches) > 0 && batches[len(batches)-1].To == last
	}, "watcher did not reach block %d", last)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel, want nil", err)
	}

	// A log as the batches report it, payment or debt payment.
	type seen struct {
		block, confirmations uint64
		index                uint
		contract             common.Address
		tx                   common.Hash
	}
	var got []seen
	nextFrom := chain.DeployBlock
	for i, b := range batches {
		if b.From != nextFrom || b.To < b.From || b.To-b.From+1 > 2 {
			t.Fatalf("batch %d covers %d-%d, want from %d and at most 2 blocks", i, b.From, b.To, nextFrom)
		}
		nextFrom = b.To + 1
		var payments, debts []seen
		for _, p := range b.Payments {
			payments = append(payments, seen{p.BlockNumber, p.Confirmations, p.LogIndex, p.Contract, p.TxHash})
		}
		for _, d := range b.Debts {
			if d.Wallet != debtor || d.Payer != devchain.DevAccounts[5].Address {
				t.Fatalf("debt payment %+v", d)
			}
			debts = append(debts, seen{d.BlockNumber, d.Confirmations, d.LogIndex, d.Contract, d.TxHash})
		}
		for _, list := range [][]seen{payments, debts} {
			for j, l := range list {
				if l.contract != chain.PaymentLedger {
					t.Fatalf("log of contract %s", l.contract.Hex())
				}
				if l.block < b.From || l.block > b.To || l.confirmations != b.Head-l.block {
					t.Fatalf("log of block %d with %d confirmations in batch %d-%d, head %d", l.block, l.confirmations, b.From, b.To, b.Head)
				}
				if j > 0 && (l.block < list[j-1].block || l.block == list[j-1].block && l.index <= list[j-1].index) {
					t.Fatalf("log %d:%d after %d:%d", l.block, l.index, list[j-1].block, list[j-1].index)
				}
			}
		}
		merged := append(payments, debts...)
		slices.SortFunc(merged, func(a, b seen) int { return cmp.Or(cmp.Compare(a.block, b.block), cmp.Compare(a.index, b.index)) })
		got = append(got, merged...)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d logs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].tx != want[i] {
			t.Errorf("log %d: tx %s, want %s", i, got[i].tx.Hex(), want[i].Hex())
		}
	}
}

// TestRunRetriesFailedHandler checks that a range the handler refused is
// handed over again, with the same payments, and that the watcher then goes on.
func TestRunRetriesFailedHandler(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	tx := pay(t, ctx, chain, 4, "retry", payment.Priority)
	commit(t, chain, 1)

	var (
		mu       sync.Mutex
		calls    []watch.Batch
		errsSeen []error
	)
	failure := errors.New("stream unavailable")
	w := newWatcher(t, chain, watch.Config{OnStep: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errsSeen = append(errsSeen, err)
	}})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- w.Run(runCtx, 0, watch.HandlerFunc(func(_ context.Context, b watch.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, b)
			if len(calls) == 1 {
				return failure
			}
			return nil
		}))
	}()
	testenv.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 2
	}, "handler not called again")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls[0].From != calls[1].From || calls[0].To != calls[1].To || len(calls[1].Payments) != 1 || calls[1].Payments[0].TxHash != tx {
		t.Errorf("retry got %d-%d %v, first try %d-%d", calls[1].From, calls[1].To, calls[1].Payments, calls[0].From, calls[0].To)
	}
	if len(errsSeen) < 2 || !errors.Is(errsSeen[0], failure) || errsSeen[1] != nil {
		t.Errorf("OnStep saw %v, want the failure then success", errsSeen)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	chain := testenv.Chain(t)
	for name, cfg := range map[string]watch.Config{
		"no contract":   {PollInterval: time.Second},
		"no poll":       {Contract: chain.PaymentLedger},
		"negative poll": {Contract: chain.PaymentLedger, PollInterval: -time.Second},
	} {
		if _, err := watch.New(chain.Client(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := watch.New(nil, watch.Config{Contract: chain.PaymentLedger, PollInterval: time.Second}); err == nil {
		t.Error("nil chain accepted")
	}
}
