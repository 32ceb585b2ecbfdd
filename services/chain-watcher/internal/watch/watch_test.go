package watch_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcpool"
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
	b, ok, err := w.Next(ctx, 0, common.Hash{})
	if err != nil || !ok {
		t.Fatalf("Next(0) = %v, %v", ok, err)
	}
	if b.To != paid-2 || len(b.Payments) != 0 {
		t.Fatalf("with head %d read up to %d with %d payments; want up to %d with none", b.Head, b.To, len(b.Payments), paid-2)
	}
	if _, ok, err := w.Next(ctx, paid-1, common.Hash{}); ok || err != nil {
		t.Fatalf("block %d with one confirmation was read (%v)", paid-1, err)
	}
	commit(t, chain, 1)
	if _, ok, _ := w.Next(ctx, paid, common.Hash{}); ok {
		t.Fatal("payment block read with 1 confirmation")
	}
	commit(t, chain, 1)
	b, ok, err = w.Next(ctx, paid-1, common.Hash{})
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
	b, ok, err := w.Next(ctx, 0, common.Hash{})
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
	b, ok, err := w.Next(ctx, 0, common.Hash{})
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

// TestNextOrderAndRanges pays in several blocks, several payments and a debt
// payment per block, plus payments and a debt payment to a second
// PaymentLedger that must be ignored, and checks that Next, followed from
// batch to batch, hands over contiguous bounded ranges whose payments and
// debt payments are each in chain order and, merged, are every log of the
// contract in chain order.
func TestNextOrderAndRanges(t *testing.T) {
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
	var batches []watch.Batch
	next, parent := chain.DeployBlock, common.Hash{}
	for {
		b, ok, err := w.Next(ctx, next, parent)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		batches = append(batches, b)
		next, parent = b.To+1, b.Cursor.Hash
	}
	if len(batches) == 0 || batches[len(batches)-1].To != last {
		t.Fatalf("the watcher did not reach block %d", last)
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

func TestNewRejectsBadConfig(t *testing.T) {
	chain := testenv.Chain(t)
	if _, err := watch.New(chain.Client(), watch.Config{}); err == nil {
		t.Error("no contract: accepted")
	}
	if _, err := watch.New(nil, watch.Config{Contract: chain.PaymentLedger}); err == nil {
		t.Error("nil chain accepted")
	}
}

// header returns the canonical header at n.
func header(t *testing.T, ctx context.Context, chain *devchain.Chain, n uint64) *types.Header {
	t.Helper()
	h, err := chain.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(n))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestNextParentMismatchAfterFork: once a fork replaced the cursor block,
// a range read from the cursor fails with ErrParentMismatch, and the
// canonical hash of the cursor's number is the new block's.
func TestNextParentMismatchAfterFork(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	w := newWatcher(t, chain, watch.Config{})
	pay(t, ctx, chain, 1, "forked", payment.Standard)
	commit(t, chain, 1)
	b, ok, err := w.Next(ctx, chain.DeployBlock, common.Hash{})
	if err != nil || !ok || len(b.Payments) != 1 {
		t.Fatalf("Next = %+v, %v, %v", b, ok, err)
	}
	paid := b.Payments[0].BlockNumber
	if err := chain.Fork(header(t, ctx, chain, paid-1).Hash()); err != nil {
		t.Fatal(err)
	}
	commit(t, chain, 2) // the payment again, in another block, and one more
	if _, _, err := w.Next(ctx, b.To+1, b.Cursor.Hash); !errors.Is(err, watch.ErrParentMismatch) {
		t.Fatalf("Next after the fork: %v, want ErrParentMismatch", err)
	}
	hash, found, err := w.CanonicalHash(ctx, b.Cursor.Block)
	if err != nil || !found || hash == b.Cursor.Hash {
		t.Fatalf("CanonicalHash(%d) = %s, %v, %v; the old block's hash is %s", b.Cursor.Block, hash.Hex(), found, err, b.Cursor.Hash.Hex())
	}
	if _, found, err := w.CanonicalHash(ctx, head(t, ctx, chain)+5); found || err != nil {
		t.Fatalf("CanonicalHash above the head: found=%v err=%v", found, err)
	}
	again, ok, err := w.Next(ctx, paid, header(t, ctx, chain, paid-1).Hash())
	if err != nil || !ok || len(again.Payments) != 1 || again.Payments[0].TxHash != b.Payments[0].TxHash ||
		again.Payments[0].BlockHash == b.Payments[0].BlockHash {
		t.Fatalf("the re-mined payment: %+v, %v, %v", again.Payments, ok, err)
	}
}

// TestNextAnchors: a batch names its first block, the block AnchorDepth
// below its end and its end, with their canonical hashes.
func TestNextAnchors(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	commit(t, chain, 10)
	w := newWatcher(t, chain, watch.Config{AnchorDepth: 4})
	b, ok, err := w.Next(ctx, 1, header(t, ctx, chain, 0).Hash())
	if err != nil || !ok {
		t.Fatalf("Next = %v, %v", ok, err)
	}
	want := []uint64{1, b.To - 4, b.To}
	if len(b.Anchors) != 3 || b.Anchors[2] != b.Cursor {
		t.Fatalf("anchors %+v, want blocks %v ending with the cursor", b.Anchors, want)
	}
	for i, a := range b.Anchors {
		if a.Block != want[i] || a.Hash != header(t, ctx, chain, a.Block).Hash() {
			t.Errorf("anchor %d = %+v, want block %d with its canonical hash", i, a, want[i])
		}
	}
	// A one-block range has only its cursor.
	b, ok, err = w.Next(ctx, b.To, header(t, ctx, chain, b.To-1).Hash())
	if err != nil || !ok || len(b.Anchors) != 1 || b.Anchors[0] != b.Cursor {
		t.Fatalf("one-block batch: %+v, %v, %v", b.Anchors, ok, err)
	}
}

// TestNextFinalized: with Finalized, blocks at or below the chain's
// finalized block are read although they lack the confirmations; an
// endpoint that does not answer the tag falls back to confirmations.
func TestNextFinalized(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	commit(t, chain, 70) // the simulated beacon finalizes every 32 blocks
	fin, err := chain.Client().HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil || fin.Number.Uint64() == 0 {
		t.Fatalf("finalized block: %v, %v", fin, err)
	}
	w := newWatcher(t, chain, watch.Config{Confirmations: 1000, Finalized: true})
	b, ok, err := w.Next(ctx, 1, common.Hash{})
	if err != nil || !ok || b.To != fin.Number.Uint64() || b.Finalized != b.To || b.Safe != b.To {
		t.Fatalf("Next = %d-%d (finalized %d), %v, %v; want up to the finalized block %d", b.From, b.To, b.Finalized, ok, err, fin.Number)
	}
	if _, ok, err := w.Next(ctx, b.To+1, b.Cursor.Hash); ok || err != nil {
		t.Fatalf("a block above the finalized one without the confirmations was read (%v)", err)
	}

	noTag := newWatcherOn(t, chain, noFinalized{chain.Client()}, watch.Config{Confirmations: 3, Finalized: true})
	b, ok, err = noTag.Next(ctx, 1, common.Hash{})
	if err != nil || !ok || b.To != head(t, ctx, chain)-3 || b.Finalized != 0 {
		t.Fatalf("without the tag: %d-%d (finalized %d), %v, %v; want up to head-3", b.From, b.To, b.Finalized, ok, err)
	}
}

// noFinalized is an endpoint that does not know the finalized tag.
type noFinalized struct{ watch.Chain }

func (c noFinalized) HeaderByNumber(ctx context.Context, n *big.Int) (*types.Header, error) {
	if n != nil && n.Sign() < 0 {
		return nil, errors.New("invalid block number")
	}
	return c.Chain.HeaderByNumber(ctx, n)
}

// shifting answers another hash for the block `at` from its second
// question on, as a reorg between two reads would.
type shifting struct {
	watch.Chain
	at    uint64
	asked int
}

func (c *shifting) HeaderByNumber(ctx context.Context, n *big.Int) (*types.Header, error) {
	h, err := c.Chain.HeaderByNumber(ctx, n)
	if err == nil && n != nil && n.IsUint64() && n.Uint64() == c.at {
		if c.asked++; c.asked > 1 {
			h = types.CopyHeader(h)
			h.Extra = []byte("another branch")
		}
	}
	return h, err
}

// TestNextRefusesRangeChangedWhileRead: when the range's last block has
// another hash after the logs were read than before, the batch is refused
// as inconsistent: its logs and its cursor could be of different branches.
func TestNextRefusesRangeChangedWhileRead(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	pay(t, ctx, chain, 2, "shifting", payment.Standard)
	commit(t, chain, 1)
	w := newWatcherOn(t, chain, &shifting{Chain: chain.Client(), at: head(t, ctx, chain)}, watch.Config{})
	if _, _, err := w.Next(ctx, chain.DeployBlock, common.Hash{}); !errors.Is(err, watch.ErrInconsistentChain) {
		t.Fatalf("Next = %v, want ErrInconsistentChain", err)
	}
}

func newWatcherOn(t *testing.T, chain *devchain.Chain, c watch.Chain, cfg watch.Config) *watch.Watcher {
	t.Helper()
	cfg.ChainID, cfg.Contract = chain.ChainID, chain.PaymentLedger
	w, err := watch.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// limitErr is a provider's JSON-RPC answer to a query over its limit.
type limitErr struct{}

func (limitErr) Error() string  { return "query returned more than 10000 results" }
func (limitErr) ErrorCode() int { return -32005 }

// picky refuses eth_getLogs ranges over limit blocks, as providers do, and
// answers the others with every log twice and in reverse order; with
// conflicting set, the repeat of the first log carries other data.
type picky struct {
	watch.Chain
	limit       uint64
	conflicting bool
	asked       []uint64
}

func (c *picky) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	n := q.ToBlock.Uint64() - q.FromBlock.Uint64() + 1
	c.asked = append(c.asked, n)
	if n > c.limit {
		return nil, limitErr{}
	}
	logs, err := c.Chain.FilterLogs(ctx, q)
	if err != nil {
		return nil, err
	}
	out := append(slices.Clone(logs), logs...)
	if c.conflicting && len(logs) > 0 {
		out[len(logs)].Data = append([]byte{1}, out[len(logs)].Data...)
	}
	slices.Reverse(out)
	return out, nil
}

// TestNextShrinksRefusedRangesAndGrowsBack: a provider that refuses ranges
// over 3 blocks and repeats and reorders its logs: the watcher halves the
// range until it passes, grows it back after passes, and hands over every
// payment once, in chain order.
func TestNextShrinksRefusedRangesAndGrowsBack(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	var want []common.Hash
	for blk := range 12 {
		for i := range 2 {
			want = append(want, pay(t, ctx, chain, 1+i, fmt.Sprintf("span-%d-%d", blk, i), payment.Standard))
		}
		commit(t, chain, 1)
	}
	commit(t, chain, 20) // empty blocks where the range may grow

	p := &picky{Chain: chain.Client(), limit: 3}
	var sizes []uint64
	w := newWatcherOn(t, chain, p, watch.Config{MaxRange: 16, GrowAfter: 2, OnRangeSize: func(n uint64) { sizes = append(sizes, n) }})
	var got []common.Hash
	next, parent := chain.DeployBlock, common.Hash{}
	for range 200 {
		b, ok, err := w.Next(ctx, next, parent)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if n := b.To - b.From + 1; n > 3 {
			t.Fatalf("batch %d-%d larger than the provider allows", b.From, b.To)
		}
		for i, pm := range b.Payments {
			if i > 0 && !(pm.BlockNumber > b.Payments[i-1].BlockNumber || pm.BlockNumber == b.Payments[i-1].BlockNumber && pm.LogIndex > b.Payments[i-1].LogIndex) {
				t.Fatalf("payments out of order in batch %d-%d", b.From, b.To)
			}
			got = append(got, pm.TxHash)
		}
		next, parent = b.To+1, b.Cursor.Hash
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d payments, want %d once each in order", len(got), len(want))
	}
	// 16 and 8 and 4 refused, 2 passes twice, grows to 4 (refused again).
	if len(p.asked) < 4 || !slices.Equal(p.asked[:4], []uint64{16, 8, 4, 2}) {
		t.Fatalf("sizes asked %v, want 16, 8, 4, 2 first", p.asked)
	}
	if sizes[0] != 16 || !slices.Contains(sizes, 2) || !slices.Contains(sizes[slices.Index(sizes, 2):], 4) {
		t.Fatalf("range sizes reported %v: want 16, shrinking to 2, growing to 4", sizes)
	}
	if w.RangeSize() > 4 {
		t.Fatalf("range size %d after refusals of 4", w.RangeSize())
	}
}

// TestNextSingleBlockRefused: a provider that refuses even one block
// answers an error the caller retries, after halving down to one block.
func TestNextSingleBlockRefused(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	commit(t, chain, 20)
	p := &picky{Chain: chain.Client(), limit: 0}
	w := newWatcherOn(t, chain, p, watch.Config{MaxRange: 8})
	_, ok, err := w.Next(ctx, 1, common.Hash{})
	if ok || err == nil || !errors.As(err, new(limitErr)) {
		t.Fatalf("Next = %v, %v; want the provider's refusal", ok, err)
	}
	if !slices.Equal(p.asked, []uint64{8, 4, 2, 1}) {
		t.Fatalf("sizes asked %v", p.asked)
	}
}

// TestNextRefusesConflictingRepeats: the same log position answered with
// two different logs is an inconsistent answer, not a duplicate to drop.
func TestNextRefusesConflictingRepeats(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	pay(t, ctx, chain, 1, "conflict", payment.Standard)
	commit(t, chain, 1)
	w := newWatcherOn(t, chain, &picky{Chain: chain.Client(), limit: 100, conflicting: true}, watch.Config{})
	if _, _, err := w.Next(ctx, chain.DeployBlock, common.Hash{}); !errors.Is(err, watch.ErrInconsistentChain) {
		t.Fatalf("Next = %v, want ErrInconsistentChain", err)
	}
}

// The watcher's production chain offers agreed hashes.
var _ watch.Agreer = (*rpcpool.Pool)(nil)

// forked is an endpoint on another branch: every numbered header it
// answers has another hash.
type forked struct{ *ethclient.Client }

func (c forked) HeaderByNumber(ctx context.Context, n *big.Int) (*types.Header, error) {
	h, err := c.Client.HeaderByNumber(ctx, n)
	if err == nil && n != nil && n.Sign() >= 0 {
		h = types.CopyHeader(h)
		h.Extra = []byte("a minority fork")
	}
	return h, err
}

// TestCanonicalHashAgreedByEndpoints: over a pool, the canonical hash
// that decides a reorg is the one most endpoints answer, even when the
// endpoint in use is on another branch; one endpoint against one is no
// answer at all.
func TestCanonicalHashAgreedByEndpoints(t *testing.T) {
	ctx := testenv.Context(t)
	chain := testenv.Chain(t)
	commit(t, chain, 3)
	n := head(t, ctx, chain) - 1
	want := header(t, ctx, chain, n).Hash()
	dial := func() *ethclient.Client {
		c, err := ethclient.Dial(chain.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	on := func(clients ...rpcpool.Client) *watch.Watcher {
		var eps []rpcpool.Endpoint
		for i, c := range clients {
			eps = append(eps, rpcpool.Endpoint{Name: fmt.Sprint(i + 1), Client: c})
		}
		p, err := rpcpool.New(eps, rpcpool.Config{Attempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		return newWatcherOn(t, chain, p, watch.Config{})
	}

	if got, found, err := newWatcherOn(t, chain, forked{dial()}, watch.Config{}).CanonicalHash(ctx, n); err != nil || !found || got == want {
		t.Fatalf("the forked endpoint alone: %s %v %v", got.Hex(), found, err)
	}
	if got, found, err := on(forked{dial()}, dial(), dial()).CanonicalHash(ctx, n); err != nil || !found || got != want {
		t.Fatalf("two of three: %s %v %v, want %s", got.Hex(), found, err, want.Hex())
	}
	if _, _, err := on(forked{dial()}, dial()).CanonicalHash(ctx, n); !errors.Is(err, rpcpool.ErrNoAgreement) {
		t.Fatalf("one against one: %v", err)
	}
	if _, found, err := on(forked{dial()}, dial(), dial()).CanonicalHash(ctx, n+100); err != nil || found {
		t.Fatalf("a block no endpoint has: %v %v", found, err)
	}
}
