// Package chainstatus publishes the chain as the watcher sees it, for the
// operators: the head (number, hash, time), the finalized and safe blocks,
// the relay's cursor, and the payments of the blocks not published yet
// (OBSERVED, ADR 0007). It is one value per chain, status-<chainId> in
// the watcher's key-value bucket, replaced when it changes: validators read
// the latest at once after a restart, and the bucket's history bounds what
// is kept. It is not put on the payments stream, which keeps everything.
//
// The loop reads through the same RPC pool as the relay, on its own: a
// slow or failing status read never delays a payment, and the relay's
// reads stay one consistent view each.
package chainstatus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/watch"
)

// Chain is what the loop reads: the watcher's reading interface, which
// *rpcpool.Pool satisfies.
type Chain = watch.Chain

// Store keeps the latest status; jetstream.KeyValue satisfies it.
type Store interface {
	Put(ctx context.Context, key string, value []byte) (uint64, error)
}

// Defaults of Config.
const (
	// DefaultRefresh: an unchanged status is written again after this
	// long, so that its age tells a running watcher on a stalled chain
	// from a watcher that stopped.
	DefaultRefresh = 30 * time.Second
	// DefaultMaxBlocks bounds the blocks read for pending payments (one
	// eth_getLogs call): above the confirmations of any sane setting, and
	// far below providers' range limits.
	DefaultMaxBlocks = 256
)

// Config configures a Loop.
type Config struct {
	ChainID  uint64
	Contract common.Address
	// Confirmations and Finalized are the watcher's (watch.Config): they
	// decide the safe block as the relay does.
	Confirmations uint64
	Finalized     bool
	// Interval is the poll interval (POLL_INTERVAL): at most one write per
	// interval.
	Interval time.Duration
	// Refresh: see DefaultRefresh; 0 takes it.
	Refresh time.Duration
	// MaxBlocks: see DefaultMaxBlocks; 0 takes it.
	MaxBlocks uint64
	// Cursor returns the relay's cursor; ok is false before it has one.
	Cursor func() (c watch.Cursor, ok bool)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnStep, if set, is called after every step with the status read
	// (zero on error), whether it was written, and the error.
	OnStep func(s payment.WatcherStatus, written bool, err error)
	Logger *zap.Logger
}

// Loop reads the chain's status every Interval and writes it when it
// changed. Not safe for concurrent use: one Run.
type Loop struct {
	chain   Chain
	store   Store
	cfg     Config
	decoder paycontract.Decoder
	log     *zap.Logger

	// window is what the last reads found of the pending payments; the
	// next read asks only for the blocks above it (pendingWindow).
	window    *pendingWindow
	last      payment.WatcherStatus
	written   bool
	writtenAt time.Time
	// malformed is set once a log that does not decode was logged, so
	// that one bad log is not logged at every step (the relay stops on it
	// once it is confirmed).
	malformed map[string]bool
}

// New returns a loop reading chain and writing to store.
func New(chain Chain, store Store, cfg Config) (*Loop, error) {
	switch {
	case chain == nil || store == nil:
		return nil, errors.New("chainstatus: no chain or no store")
	case cfg.ChainID == 0 || cfg.Contract == (common.Address{}):
		return nil, errors.New("chainstatus: no chain id or no contract")
	case cfg.Interval <= 0:
		return nil, errors.New("chainstatus: no interval")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.MaxBlocks == 0 {
		cfg.MaxBlocks = DefaultMaxBlocks
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Cursor == nil {
		cfg.Cursor = func() (watch.Cursor, bool) { return watch.Cursor{}, false }
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Loop{chain: chain, store: store, cfg: cfg, log: log, malformed: map[string]bool{},
		decoder: paycontract.Decoder{ChainID: cfg.ChainID, Contract: cfg.Contract}}, nil
}

// Run steps every Interval until ctx ends. Errors are reported (OnStep,
// the log) and the next interval tries again: the status is never worth
// stopping the watcher for.
func (l *Loop) Run(ctx context.Context) {
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	failing := false
	for {
		_, err := l.Step(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			l.log.Warn("chain status not read or written; retrying every poll interval", zap.Error(err))
		case err == nil && failing:
			l.log.Info("chain status written again")
		}
		failing = err != nil
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// Step reads the status and writes it when it differs from the last one
// written, or when the last write is Refresh old.
func (l *Loop) Step(ctx context.Context) (written bool, err error) {
	s, err := l.Read(ctx)
	if err == nil && (!l.written || !s.Same(l.last) || l.cfg.Now().Sub(l.writtenAt) >= l.cfg.Refresh) {
		err = l.write(ctx, s)
		written = err == nil
	}
	if l.cfg.OnStep != nil {
		if err != nil {
			s = payment.WatcherStatus{}
		}
		l.cfg.OnStep(s, written, err)
	}
	return written, err
}

func (l *Loop) write(ctx context.Context, s payment.WatcherStatus) error {
	b, err := s.Encode()
	if err != nil {
		return fmt.Errorf("chainstatus: %w", err)
	}
	key := payment.StatusKey(l.cfg.ChainID)
	if _, err := l.store.Put(ctx, key, b); err != nil {
		return fmt.Errorf("chainstatus: write %s: %w", key, err)
	}
	l.last, l.written, l.writtenAt = s, true, l.cfg.Now()
	return nil
}

// Read reads the chain's status: the head block, the finalized block when
// the endpoint answers the tag, the safe block as the relay computes it,
// and the ProposalPaid logs of the blocks above the cursor (or the safe
// block, whichever is lower), at most MaxBlocks of the newest.
func (l *Loop) Read(ctx context.Context) (payment.WatcherStatus, error) {
	now := l.cfg.Now()
	number, err := l.chain.BlockNumber(ctx)
	if err != nil {
		return payment.WatcherStatus{}, fmt.Errorf("chainstatus: head block number: %w", err)
	}
	head, err := l.chain.HeaderByNumber(ctx, new(big.Int).SetUint64(number))
	if err != nil {
		return payment.WatcherStatus{}, fmt.Errorf("chainstatus: header of head block %d: %w", number, err)
	}
	if head == nil || head.Number == nil || head.Number.Uint64() != number {
		return payment.WatcherStatus{}, fmt.Errorf("chainstatus: header for block %d is not block %d", number, number)
	}
	s := payment.WatcherStatus{ChainID: l.cfg.ChainID, Contract: l.cfg.Contract,
		Head: payment.StatusBlock{Number: number, Hash: head.Hash()}, HeadTimeS: head.Time,
		Confirmations: l.cfg.Confirmations, ObservedAtMs: now.UnixMilli()}
	if number >= l.cfg.Confirmations {
		s.Safe = number - l.cfg.Confirmations
	}
	if fin, ok := l.finalized(ctx, number); ok {
		s.Finalized = &fin
		if l.cfg.Finalized && fin > s.Safe {
			s.Safe = fin
		}
	}
	from := s.Safe + 1
	if c, ok := l.cfg.Cursor(); ok {
		s.Cursor = &payment.StatusBlock{Number: c.Block, Hash: c.Hash}
		// Blocks between the cursor and the safe block have their
		// confirmations and are not published yet: their payments are
		// on chain and validators do not have them either.
		from = min(from, c.Block+1)
	}
	if number+1-from > l.cfg.MaxBlocks {
		from = number + 1 - l.cfg.MaxBlocks
	}
	s.PendingFrom = from
	w, err := l.pendingOf(ctx, from, head, now)
	if err != nil {
		return payment.WatcherStatus{}, err
	}
	s.Pending = make([]payment.PendingPayment, 0, len(w.paid))
	for _, p := range w.paid {
		s.Pending = append(s.Pending, payment.PendingFromPaid(p, number))
	}
	s.PendingTruncated = w.truncated()
	return s, nil
}

// pendingWindow is the pending payments read up to a head: the newest
// MaxPendingPayments of blocks from..head, in chain order. While that
// head stays canonical, a read at a later head asks eth_getLogs only for
// the blocks above it, so a watcher polling a busy chain, or one far
// behind it, reads each block's logs once, not MaxBlocks of them per poll.
// A reorg between two reads leaves the old head off the chain, and the
// window is read anew; a full read every Refresh also bounds what a reorg
// during one eth_getLogs call could leave behind.
type pendingWindow struct {
	from   uint64
	head   payment.StatusBlock
	paid   []payment.ProposalPaid
	fullAt time.Time
	// dropped is one above the newest block a payment was left out of
	// (beyond MaxPendingPayments): while from is below it, the list is
	// truncated.
	dropped uint64
}

func (w *pendingWindow) truncated() bool { return w.from < w.dropped }

// add appends the payments of the blocks above w.head, keeping the newest
// MaxPendingPayments.
func (w *pendingWindow) add(paid []payment.ProposalPaid) {
	w.paid = append(w.paid, paid...)
	if n := len(w.paid) - payment.MaxPendingPayments; n > 0 {
		w.dropped = max(w.dropped, w.paid[n-1].BlockNumber+1)
		w.paid = slices.Delete(w.paid, 0, n)
	}
}

// advance moves the window's first block up to from.
func (w *pendingWindow) advance(from uint64) {
	w.from = from
	i, _ := slices.BinarySearchFunc(w.paid, from, func(p payment.ProposalPaid, n uint64) int { return cmp.Compare(p.BlockNumber, n) })
	w.paid = slices.Delete(w.paid, 0, i)
}

// pendingOf returns the window of blocks from..head: the last one moved on
// when its head is an ancestor of head (or head itself) and from has not
// moved back, else read anew.
func (l *Loop) pendingOf(ctx context.Context, from uint64, head *types.Header, now time.Time) (*pendingWindow, error) {
	number := head.Number.Uint64()
	at := payment.StatusBlock{Number: number, Hash: head.Hash()}
	if w := l.window; w != nil && from >= w.from && number >= w.head.Number && now.Sub(w.fullAt) < l.cfg.Refresh {
		continues, err := l.continues(ctx, w.head, head)
		if err != nil {
			return nil, err
		}
		if continues {
			var paid []payment.ProposalPaid
			if next := max(from, w.head.Number+1); next <= number {
				if paid, err = l.pending(ctx, next, at); err != nil {
					return nil, err
				}
			}
			if from > w.head.Number {
				w.paid, w.dropped = nil, 0 // nothing read before is pending now
			}
			w.add(paid)
			w.advance(from)
			w.head = at
			return w, nil
		}
	}
	paid, err := l.pending(ctx, from, at)
	if err != nil {
		return nil, err
	}
	w := &pendingWindow{from: from, head: at, fullAt: now}
	w.add(paid)
	l.window = w
	return w, nil
}

// continues reports whether head is prev or one of its descendants: prev
// is still canonical.
func (l *Loop) continues(ctx context.Context, prev payment.StatusBlock, head *types.Header) (bool, error) {
	number := head.Number.Uint64()
	switch number {
	case prev.Number:
		return head.Hash() == prev.Hash, nil
	case prev.Number + 1:
		return head.ParentHash == prev.Hash, nil
	}
	h, err := l.chain.HeaderByNumber(ctx, new(big.Int).SetUint64(prev.Number))
	if err != nil {
		return false, fmt.Errorf("chainstatus: header of block %d: %w", prev.Number, err)
	}
	return h.Hash() == prev.Hash, nil
}

// finalized is the chain's finalized block, capped at the head; ok is false
// when the endpoint does not answer the tag (pre-merge chains, some
// providers): a figure left out, not an error.
func (l *Loop) finalized(ctx context.Context, head uint64) (uint64, bool) {
	h, err := l.chain.HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil || h == nil || h.Number == nil || !h.Number.IsUint64() {
		return 0, false
	}
	return min(h.Number.Uint64(), head), true
}

// pending reads the ProposalPaid logs of blocks from..head, in chain order.
// A log of the head block must carry the head's hash: otherwise the head
// moved between the reads, and the next step reads again rather than mix
// two branches.
func (l *Loop) pending(ctx context.Context, from uint64, head payment.StatusBlock) ([]payment.ProposalPaid, error) {
	if from > head.Number {
		return nil, nil
	}
	logs, err := l.chain.FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: new(big.Int).SetUint64(from),
		ToBlock:   new(big.Int).SetUint64(head.Number),
		Addresses: []common.Address{l.cfg.Contract},
		Topics:    [][]common.Hash{{paycontract.ProposalPaidTopic()}},
	})
	if err != nil {
		return nil, fmt.Errorf("chainstatus: logs of blocks %d-%d: %w", from, head.Number, err)
	}
	slices.SortStableFunc(logs, func(a, b types.Log) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.Index, b.Index))
	})
	var out []payment.ProposalPaid
	for i, lg := range logs {
		switch {
		case lg.Removed:
			continue
		case lg.BlockNumber < from || lg.BlockNumber > head.Number:
			return nil, fmt.Errorf("chainstatus: log of block %d in a query for %d-%d", lg.BlockNumber, from, head.Number)
		case lg.BlockNumber == head.Number && lg.BlockHash != head.Hash:
			return nil, fmt.Errorf("chainstatus: the head moved from %s while its logs were read", head.Hash.Hex())
		case i > 0 && lg.BlockNumber == logs[i-1].BlockNumber && lg.BlockHash != logs[i-1].BlockHash:
			return nil, fmt.Errorf("chainstatus: block %d answered under two hashes", lg.BlockNumber)
		case i > 0 && lg.BlockNumber == logs[i-1].BlockNumber && lg.Index == logs[i-1].Index:
			continue // a log answered twice
		}
		p, err := l.decoder.ProposalPaid(lg)
		if err != nil {
			// The relay stops on it once it is confirmed; here it is
			// only not shown.
			if len(l.malformed) > 1024 {
				clear(l.malformed)
			}
			if id := fmt.Sprintf("%s:%d", lg.BlockHash.Hex(), lg.Index); !l.malformed[id] {
				l.malformed[id] = true
				l.log.Error("a payment contract log does not decode; not shown in the status", zap.Uint64("block", lg.BlockNumber),
					zap.Uint("log_index", lg.Index), zap.Error(err))
			}
			continue
		}
		out = append(out, p)
	}
	return out, nil
}
