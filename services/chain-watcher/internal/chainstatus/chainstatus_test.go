package chainstatus_test

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/chainstatus"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/testenv"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
	"github.com/contentledger/contentledger/tools/devchain"
)

// cursor is the relay's cursor as a test sets it.
type cursor struct {
	mu sync.Mutex
	c  *watch.Cursor
}

func (c *cursor) set(block uint64, hash common.Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c = &watch.Cursor{Block: block, Hash: hash}
}

func (c *cursor) get() (watch.Cursor, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return watch.Cursor{}, false
	}
	return *c.c, true
}

type env struct {
	ctx   context.Context
	chain *devchain.Chain
	kv    jetstream.KeyValue
}

func newEnv(t *testing.T) env {
	t.Helper()
	ctx := testenv.Context(t)
	js := testenv.JetStream(t, testenv.NATS(t))
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "CHAIN_WATCHER", History: 8})
	if err != nil {
		t.Fatal(err)
	}
	return env{ctx: ctx, chain: testenv.Chain(t), kv: kv}
}

func (e env) header(t *testing.T, n *big.Int) *types.Header {
	t.Helper()
	h, err := e.chain.Client().HeaderByNumber(e.ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (e env) commit(t *testing.T, n int) *types.Header {
	t.Helper()
	for range n {
		if _, err := e.chain.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return e.header(t, nil)
}

func (e env) pay(t *testing.T, id common.Hash) common.Hash {
	t.Helper()
	tx, err := e.chain.PayForProposal(e.ctx, devchain.DevAccounts[1].MustKey(), id, payment.Express)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// stored is the status the bucket holds, decoded as a validator decodes it.
func (e env) stored(t *testing.T) (payment.WatcherStatus, uint64) {
	t.Helper()
	entry, err := e.kv.Get(e.ctx, payment.StatusKey(e.chain.ChainID))
	if err != nil {
		t.Fatal(err)
	}
	s, err := payment.DecodeWatcherStatus(entry.Value())
	if err != nil {
		t.Fatal(err)
	}
	return s, entry.Revision()
}

func (e env) loop(t *testing.T, cfg chainstatus.Config) *chainstatus.Loop {
	t.Helper()
	cfg.ChainID, cfg.Contract = e.chain.ChainID, e.chain.PaymentLedger
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	l, err := chainstatus.New(e.chain.Client(), e.kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestStatusFollowsTheChain: a payment is listed with its confirmations
// while it is above the safe block or the cursor, and leaves the list once
// the cursor passes it; an unchanged status is written again only after
// Refresh.
func TestStatusFollowsTheChain(t *testing.T) {
	e := newEnv(t)
	var cur cursor
	now := time.Unix(1_800_000_000, 0)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	l := e.loop(t, chainstatus.Config{Confirmations: 3, Cursor: cur.get, Now: clock, Refresh: time.Minute})

	id := common.HexToHash("0x1d")
	tx := e.pay(t, id)
	head := e.commit(t, 1)
	if written, err := l.Step(e.ctx); err != nil || !written {
		t.Fatalf("first step: written %v, %v", written, err)
	}
	s, rev := e.stored(t)
	if s.ChainID != e.chain.ChainID || s.Contract != e.chain.PaymentLedger || s.Head.Number != head.Number.Uint64() ||
		s.Head.Hash != head.Hash() || s.HeadTimeS != head.Time || s.Confirmations != 3 || s.Safe != head.Number.Uint64()-3 ||
		s.Cursor != nil || s.PendingFrom != s.Safe+1 || s.ObservedAtMs != now.UnixMilli() {
		t.Fatalf("status %+v, head %d %s", s, head.Number, head.Hash())
	}
	fin := e.header(t, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if s.Finalized == nil || *s.Finalized != fin.Number.Uint64() {
		t.Fatalf("finalized %v, the chain's %d", s.Finalized, fin.Number)
	}
	if len(s.Pending) != 1 {
		t.Fatalf("pending %+v", s.Pending)
	}
	p := s.Pending[0]
	if p.TxHash != tx || p.ProposalID != id || p.BlockNumber != head.Number.Uint64() || p.BlockHash != head.Hash() ||
		p.Confirmations != 0 || p.Class != payment.Express || p.Amount.Cmp(payment.Express.Price(payment.ETH)) != 0 ||
		p.Payer != devchain.DevAccounts[1].Address {
		t.Fatalf("pending payment %+v", p)
	}

	// Nothing changed: nothing written, until Refresh has passed.
	if written, err := l.Step(e.ctx); err != nil || written {
		t.Fatalf("unchanged step: written %v, %v", written, err)
	}
	clockMu.Lock()
	now = now.Add(time.Minute)
	clockMu.Unlock()
	if written, err := l.Step(e.ctx); err != nil || !written {
		t.Fatalf("refresh: written %v, %v", written, err)
	}
	if again, rev2 := e.stored(t); rev2 == rev || again.ObservedAtMs != now.UnixMilli() || !again.Same(s) {
		t.Fatalf("refreshed status %+v revision %d", again, rev2)
	}

	// Confirmed, but the relay has not published it: still listed, with
	// its confirmations.
	paidIn := head
	cur.set(paidIn.Number.Uint64()-1, paidIn.ParentHash)
	head = e.commit(t, 4)
	if _, err := l.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	s, _ = e.stored(t)
	if s.Cursor == nil || s.Cursor.Number != paidIn.Number.Uint64()-1 || s.PendingFrom != paidIn.Number.Uint64() ||
		len(s.Pending) != 1 || s.Pending[0].Confirmations != 4 || *s.LagBlocks() != 2 {
		t.Fatalf("status with the cursor below the payment %+v", s)
	}
	// Published: it leaves the list.
	cur.set(head.Number.Uint64()-3, common.Hash{1})
	if _, err := l.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	if s, _ = e.stored(t); len(s.Pending) != 0 || *s.LagBlocks() != 0 || s.PendingFrom != head.Number.Uint64()-2 {
		t.Fatalf("status once published %+v", s)
	}
}

// TestStatusBounds: MaxBlocks bounds the blocks read, and the safe block
// follows the finalized block when the watcher does.
func TestStatusBounds(t *testing.T) {
	e := newEnv(t)
	var cur cursor
	cur.set(0, common.Hash{})
	e.pay(t, common.HexToHash("0x01"))
	e.commit(t, 1)
	e.pay(t, common.HexToHash("0x02"))
	head := e.commit(t, 40)
	l := e.loop(t, chainstatus.Config{Confirmations: 100, Finalized: true, MaxBlocks: 40, Cursor: cur.get})
	if _, err := l.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := e.stored(t)
	fin := e.header(t, big.NewInt(int64(rpc.FinalizedBlockNumber))).Number.Uint64()
	if fin == 0 || s.Finalized == nil || *s.Finalized != fin || s.Safe != fin {
		t.Fatalf("safe %d finalized %v, the chain's finalized block %d", s.Safe, s.Finalized, fin)
	}
	if s.PendingFrom != head.Number.Uint64()-39 || len(s.Pending) != 1 || s.Pending[0].ProposalID != common.HexToHash("0x02") {
		t.Fatalf("pending from %d: %+v", s.PendingFrom, s.Pending)
	}
}

// TestRunWritesChanges: Run keeps the stored status at the chain's head,
// and a failing store is retried.
func TestRunWritesChanges(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var errs int
	fail := true
	store := storeFunc(func(ctx context.Context, key string, value []byte) (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			errs++
			return 0, errors.New("nats down")
		}
		return e.kv.Put(ctx, key, value)
	})
	l, err := chainstatus.New(e.chain.Client(), store, chainstatus.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger,
		Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for range 3 {
		head := e.commit(t, 1)
		testenv.Eventually(t, 10*time.Second, func() bool {
			entry, err := e.kv.Get(e.ctx, payment.StatusKey(e.chain.ChainID))
			if err != nil {
				return false
			}
			s, err := payment.DecodeWatcherStatus(entry.Value())
			return err == nil && s.Head.Hash == head.Hash()
		}, "the stored status does not reach head %d", head.Number)
	}
	mu.Lock()
	defer mu.Unlock()
	if errs != 1 {
		t.Fatalf("%d failed writes", errs)
	}
}

type storeFunc func(ctx context.Context, key string, value []byte) (uint64, error)

func (f storeFunc) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return f(ctx, key, value)
}

// countingChain records the block ranges of the eth_getLogs calls.
type countingChain struct {
	chainstatus.Chain
	mu     sync.Mutex
	ranges [][2]uint64
}

func (c *countingChain) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	c.mu.Lock()
	c.ranges = append(c.ranges, [2]uint64{q.FromBlock.Uint64(), q.ToBlock.Uint64()})
	c.mu.Unlock()
	return c.Chain.FilterLogs(ctx, q)
}

func (c *countingChain) read() [][2]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ranges)
}

// TestLogsReadOncePerBlock: polls that find the same head and cursor reuse
// the payments read, so a fast poll on a slow chain costs no eth_getLogs,
// and a new head costs the logs of the new blocks only.
func TestLogsReadOncePerBlock(t *testing.T) {
	e := newEnv(t)
	e.pay(t, common.HexToHash("0x0a"))
	e.commit(t, 1)
	chain := &countingChain{Chain: e.chain.Client()}
	l, err := chainstatus.New(chain, e.kv, chainstatus.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger,
		Confirmations: 2, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if s, err := l.Read(e.ctx); err != nil || len(s.Pending) != 1 {
			t.Fatalf("read %+v, %v", s, err)
		}
	}
	head := e.commit(t, 1).Number.Uint64()
	if s, err := l.Read(e.ctx); err != nil || len(s.Pending) != 1 || s.Pending[0].Confirmations != 1 {
		t.Fatalf("read after a block %+v, %v", s, err)
	}
	// Confirmed now: the blocks below the new pending range are not read.
	head3 := e.commit(t, 3).Number.Uint64()
	if s, err := l.Read(e.ctx); err != nil || len(s.Pending) != 0 || s.PendingFrom != head3-1 {
		t.Fatalf("read once the payment is confirmed %+v, %v", s, err)
	}
	got := chain.read()
	if len(got) != 3 || got[1] != [2]uint64{head, head} || got[2] != [2]uint64{head3 - 1, head3} {
		t.Fatalf("eth_getLogs ranges %v for heads %d, %d and %d", got, head-1, head, head3)
	}
}

// TestReorgReadsAgain: a payment whose block a reorg dropped leaves the
// list at the next read, although the new head is higher: the blocks read
// before are read again when the head they were read at is no longer
// canonical.
func TestReorgReadsAgain(t *testing.T) {
	e := newEnv(t)
	chain := &countingChain{Chain: e.chain.Client()}
	l, err := chainstatus.New(chain, e.kv, chainstatus.Config{ChainID: e.chain.ChainID, Contract: e.chain.PaymentLedger,
		Confirmations: 10, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.commit(t, 12)
	e.pay(t, common.HexToHash("0x0b"))
	paidIn := e.commit(t, 1)
	if s, err := l.Read(e.ctx); err != nil || len(s.Pending) != 1 {
		t.Fatalf("read %+v, %v", s, err)
	}
	if err := e.chain.ForkDropping(paidIn.ParentHash); err != nil {
		t.Fatal(err)
	}
	head := e.commit(t, 3)
	s, err := l.Read(e.ctx)
	if err != nil || len(s.Pending) != 0 || s.Head.Hash != head.Hash() {
		t.Fatalf("read after the reorg %+v, %v", s, err)
	}
	if got := chain.read(); len(got) != 2 || got[1] != [2]uint64{s.PendingFrom, head.Number.Uint64()} {
		t.Fatalf("eth_getLogs ranges %v, want the whole window again", got)
	}
}
