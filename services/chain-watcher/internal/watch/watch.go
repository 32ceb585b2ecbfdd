// Package watch reads the payment contract's ProposalPaid and DebtPaid logs
// on an Ethereum chain through JSON-RPC, behind a number of confirmations (or
// the chain's finalized block), one bounded block range at a time, in chain
// order.
//
// The watcher keeps no durable state: the caller (internal/relay) says which
// block to read next and which hash its parent must have, and records what
// it handled. What the watcher guarantees is that one Batch is a consistent
// view of one chain: the range continues the caller's cursor (parent hash),
// and the range's last block had the same hash before and after its logs
// were read, so the logs cannot come from a branch the batch's cursor is not
// on (see Next).
package watch

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/services/chain-watcher/internal/rpcerr"
)

// Chain is what the watcher reads from an Ethereum JSON-RPC endpoint.
// *ethclient.Client and the simulated backend's client satisfy it.
type Chain interface {
	// BlockNumber returns the number of the head block.
	BlockNumber(ctx context.Context) (uint64, error)
	// HeaderByNumber returns the canonical header at number, or for the
	// negative rpc tags (rpc.FinalizedBlockNumber) the tagged block. A
	// number above the head answers ethereum.NotFound.
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	// FilterLogs runs an eth_getLogs query.
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
}

// Agreer is what a Chain of several endpoints may offer (*rpcpool.Pool
// does): the hash of the canonical block at number as the endpoints agree
// on it, found false when none of them has the block. CanonicalHash uses
// it, since its answers decide reorgs: one endpoint on a stale fork must
// not make the caller retract payments that are still canonical.
type Agreer interface {
	AgreedHash(ctx context.Context, number uint64) (hash common.Hash, found bool, err error)
}

// DefaultMaxRange is the default number of blocks per eth_getLogs call.
// Providers cap ranges (often at 2,000 to 10,000 blocks) or the size of the
// answer; a bounded range also bounds the work redone after a failure.
const DefaultMaxRange = 2000

var (
	// ErrMalformedLog is returned by Next when the chain returns a log of
	// the contract with the ProposalPaid or DebtPaid signature that does
	// not decode. The caller must stop rather than skip it: a skipped log
	// is a lost payment.
	ErrMalformedLog = errors.New("watch: undecodable payment contract log")
	// ErrInconsistentChain is returned for answers that contradict the
	// query or each other (a log outside the requested range, a missing
	// header, the range's last block changing while it was read). It is
	// retried: it is what a node behind a load balancer, or a reorg
	// between two calls, looks like.
	ErrInconsistentChain = errors.New("watch: inconsistent answer from the chain")
	// ErrParentMismatch is returned by Next when the first block of the
	// range does not have the given parent: the caller's cursor block is
	// no longer canonical, a reorg replaced it.
	ErrParentMismatch = errors.New("watch: the chain no longer continues the cursor")
)

// Cursor is a block the watcher has read, by number and hash.
type Cursor struct {
	Block uint64
	Hash  common.Hash
}

// Batch is one confirmed block range with its payments in chain order.
type Batch struct {
	// From and To are the range read, both inclusive.
	From, To uint64
	// Head is the chain head when the range was read, and Safe the newest
	// block that could be read then: To < Safe means there is more.
	Head, Safe uint64
	// Finalized is the chain's finalized block when Config.Finalized is set
	// and the endpoint answered it, else 0.
	Finalized uint64
	// Payments are the ProposalPaid logs of the contract in (block, log
	// index) order, with Confirmations = Head - block.
	Payments []payment.ProposalPaid
	// Debts are the DebtPaid logs of the contract, in the same order and
	// with the same confirmations. Both lists come from one query, so
	// together they are every log of the two events in the range.
	Debts []payment.DebtPaid
	// Cursor is block To with its hash: record it once every payment and
	// debt payment is durable.
	Cursor Cursor
	// Anchors are blocks of the range whose hashes were read with the
	// range, in ascending order, Cursor last: the first block, the block
	// Config.AnchorDepth below To when the range reaches that far, and To.
	// A reorg is walked back through recorded blocks; an anchor AnchorDepth
	// below To keeps that walk short after a long range.
	Anchors []Cursor
}

// Config configures a Watcher.
type Config struct {
	// ChainID is the chain's id, stamped on every payment.
	ChainID uint64
	// Contract is the payment contract; logs of other emitters are ignored.
	Contract common.Address
	// Confirmations: a block is read once head - block >= Confirmations.
	// 0 reads the head itself.
	Confirmations uint64
	// Finalized also reads every block at or below the chain's finalized
	// block (the "finalized" tag), whatever its confirmations. An endpoint
	// that does not answer the tag falls back to Confirmations alone.
	Finalized bool
	// MaxRange is the most blocks per FilterLogs call; 0 means
	// DefaultMaxRange. Ranges start there, halve when the provider
	// refuses one as too large (rpcerr.IsRangeError) and grow back after
	// GrowAfter full ranges passed (Span).
	MaxRange uint64
	// GrowAfter is how many full ranges in a row must pass before the
	// range doubles again; 0 means DefaultGrowAfter.
	GrowAfter int
	// OnRangeSize, if set, is called with the range size at start and
	// whenever it changes (metrics).
	OnRangeSize func(blocks uint64)
	// AnchorDepth places an anchor this many blocks below the end of a
	// range that reaches so far (Batch.Anchors); 0 places none.
	AnchorDepth uint64
	// Logger; nil means no logging.
	Logger *zap.Logger
}

// Watcher reads confirmed ProposalPaid and DebtPaid logs. It is not safe for
// concurrent use: one caller at a time.
type Watcher struct {
	chain   Chain
	cfg     Config
	decoder paycontract.Decoder
	log     *zap.Logger
	span    *Span
	// noFinalized is set once the endpoint failed to answer the finalized
	// tag, so that the fallback is logged once, not at every step.
	noFinalized bool
}

// New returns a Watcher reading from chain.
func New(chain Chain, cfg Config) (*Watcher, error) {
	if chain == nil {
		return nil, errors.New("watch: no chain client")
	}
	if cfg.Contract == (common.Address{}) {
		return nil, errors.New("watch: no contract address")
	}
	if cfg.MaxRange == 0 {
		cfg.MaxRange = DefaultMaxRange
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.GrowAfter <= 0 {
		cfg.GrowAfter = DefaultGrowAfter
	}
	w := &Watcher{
		chain:   chain,
		cfg:     cfg,
		decoder: paycontract.Decoder{ChainID: cfg.ChainID, Contract: cfg.Contract},
		log:     log,
		span:    NewSpan(cfg.MaxRange, cfg.GrowAfter),
	}
	w.rangeSizeChanged()
	return w, nil
}

// RangeSize is the number of blocks the next eth_getLogs query asks for
// at most.
func (w *Watcher) RangeSize() uint64 { return w.span.Size() }

func (w *Watcher) rangeSizeChanged() {
	if w.cfg.OnRangeSize != nil {
		w.cfg.OnRangeSize(w.span.Size())
	}
}

// CanonicalHash returns the hash of the canonical block at number; found is
// false when the chain has no block there (a reorg made it shorter). The
// caller decides reorgs by it, so when the Chain is an Agreer the hash is
// the one its endpoints agree on.
func (w *Watcher) CanonicalHash(ctx context.Context, number uint64) (hash common.Hash, found bool, err error) {
	if a, ok := w.chain.(Agreer); ok {
		hash, found, err := a.AgreedHash(ctx, number)
		if err != nil {
			return common.Hash{}, false, fmt.Errorf("watch: agreed hash of block %d: %w", number, err)
		}
		return hash, found, nil
	}
	return w.hashOf(ctx, number)
}

// hashOf returns the hash of block number as the chain's endpoint in use
// sees it: the reads of one batch stay on one node's view, which is what
// their consistency checks compare.
func (w *Watcher) hashOf(ctx context.Context, number uint64) (hash common.Hash, found bool, err error) {
	h, err := w.chain.HeaderByNumber(ctx, new(big.Int).SetUint64(number))
	if errors.Is(err, ethereum.NotFound) {
		return common.Hash{}, false, nil
	}
	if err != nil {
		return common.Hash{}, false, fmt.Errorf("watch: header of block %d: %w", number, err)
	}
	if h == nil || h.Number == nil || h.Number.Uint64() != number {
		return common.Hash{}, false, fmt.Errorf("%w: header for block %d is not block %d", ErrInconsistentChain, number, number)
	}
	return h.Hash(), true, nil
}

// Head returns the head block number and the newest block that may be read
// (the safe block): head - Confirmations, or the finalized block when
// Config.Finalized is set and it is higher. ok is false when no block is
// safe yet. finalized is 0 when not asked or not answered.
func (w *Watcher) Head(ctx context.Context) (head, safe, finalized uint64, ok bool, err error) {
	head, err = w.chain.BlockNumber(ctx)
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("watch: head block number: %w", err)
	}
	if head >= w.cfg.Confirmations {
		safe, ok = head-w.cfg.Confirmations, true
	}
	if w.cfg.Finalized {
		finalized = w.finalized(ctx, head)
		if finalized > safe || !ok && finalized > 0 {
			safe, ok = finalized, true
		}
	}
	return head, safe, finalized, ok, nil
}

// finalized returns the chain's finalized block number, 0 when the endpoint
// does not answer it: pre-merge chains and some providers do not know the
// tag (an error, or no block). Any failure falls back to confirmations for
// this step, and the next step asks again, so a provider that was merely
// failing does not turn the option off for good.
func (w *Watcher) finalized(ctx context.Context, head uint64) uint64 {
	h, err := w.chain.HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err == nil && (h == nil || h.Number == nil || !h.Number.IsUint64()) {
		err = errors.New("no finalized block")
	}
	if err != nil {
		if !w.noFinalized {
			w.log.Warn("the endpoint does not answer the finalized block; using confirmations only", zap.Error(err))
			w.noFinalized = true
		}
		return 0
	}
	if w.noFinalized {
		w.log.Info("the endpoint answers the finalized block again")
		w.noFinalized = false
	}
	// A finalized block above the head is an inconsistent answer (a node
	// behind a load balancer): never read beyond the head.
	return min(h.Number.Uint64(), head)
}

// Next reads the next confirmed range starting at block next. parent is the
// hash block next must have as its parent (the caller's cursor); the zero
// hash skips the check (a first start, or a cursor set by hand). ok is false
// when block next is not safe yet (Head).
//
// Consistency: the range's last block is read before and after the logs,
// and the first block's parent is checked in between. A reorg that touches
// the range while it is read changes the last block's hash, so the batch is
// refused (ErrInconsistentChain) rather than pairing logs of one branch with
// the cursor of another, which would lose the other branch's logs. A reorg
// that replaced the caller's cursor block answers ErrParentMismatch.
//
// Range: at most RangeSize blocks. When the provider refuses the query as
// too large, the range is halved and the whole read is done again for the
// shorter range (its last block is another block), down to one block; a
// single block the provider still refuses is returned as the error.
func (w *Watcher) Next(ctx context.Context, next uint64, parent common.Hash) (b Batch, ok bool, err error) {
	head, safe, finalized, ok, err := w.Head(ctx)
	if err != nil || !ok || next > safe {
		return Batch{}, false, err
	}
	for {
		to := safe
		if safe-next >= w.span.Size() {
			to = next + w.span.Size() - 1
		}
		b, err := w.read(ctx, next, to, parent)
		asked := to - next + 1
		var refused *rangeRefused
		if errors.As(err, &refused) {
			shrunk := w.span.Refused(asked)
			w.rangeSizeChanged()
			if !shrunk {
				return Batch{}, false, fmt.Errorf("watch: the provider refuses the logs of block %d alone: %w", next, refused.err)
			}
			w.log.Info("eth_getLogs range refused as too large; halving it",
				zap.Uint64("from", next), zap.Uint64("blocks", asked), zap.Uint64("next_blocks", w.span.Size()), zap.Error(refused.err))
			if ctx.Err() != nil {
				return Batch{}, false, ctx.Err()
			}
			continue
		}
		if err != nil {
			return Batch{}, false, err
		}
		if w.span.Passed(asked) {
			w.rangeSizeChanged()
		}
		b.Head, b.Safe, b.Finalized = head, safe, finalized
		for i := range b.Payments {
			b.Payments[i].Confirmations = head - b.Payments[i].BlockNumber
		}
		for i := range b.Debts {
			b.Debts[i].Confirmations = head - b.Debts[i].BlockNumber
		}
		return b, true, nil
	}
}

// rangeRefused wraps a provider's refusal of an eth_getLogs range as too
// large, so that Next shrinks the range instead of failing.
type rangeRefused struct{ err error }

func (r *rangeRefused) Error() string { return r.err.Error() }
func (r *rangeRefused) Unwrap() error { return r.err }

// read reads blocks next..to as one consistent batch (see Next), without
// the head figures and confirmations.
func (w *Watcher) read(ctx context.Context, next, to uint64, parent common.Hash) (Batch, error) {
	last, found, err := w.hashOf(ctx, to)
	if err != nil {
		return Batch{}, err
	}
	if !found {
		return Batch{}, fmt.Errorf("%w: block %d below the safe block is missing", ErrInconsistentChain, to)
	}
	anchors, err := w.anchors(ctx, next, to, parent)
	if err != nil {
		return Batch{}, err
	}
	known := map[uint64]common.Hash{to: last}
	for _, a := range anchors {
		known[a.Block] = a.Hash
	}
	payments, debts, err := w.logs(ctx, next, to, known)
	if err != nil {
		return Batch{}, err
	}
	again, found, err := w.hashOf(ctx, to)
	if err != nil {
		return Batch{}, err
	}
	if !found || again != last {
		return Batch{}, fmt.Errorf("%w: block %d changed from %s to %s while its range was read", ErrInconsistentChain, to, last.Hex(), again.Hex())
	}
	cursor := Cursor{Block: to, Hash: last}
	return Batch{
		From: next, To: to, Payments: payments, Debts: debts,
		Cursor: cursor, Anchors: append(anchors, cursor),
	}, nil
}

// anchors reads the first block of the range (checking its parent) and the
// anchor AnchorDepth below its end, both strictly below to.
func (w *Watcher) anchors(ctx context.Context, next, to uint64, parent common.Hash) ([]Cursor, error) {
	var out []Cursor
	first, err := w.chain.HeaderByNumber(ctx, new(big.Int).SetUint64(next))
	if err != nil {
		return nil, fmt.Errorf("watch: header of block %d: %w", next, err)
	}
	if first == nil || first.Number == nil || first.Number.Uint64() != next {
		return nil, fmt.Errorf("%w: header for block %d is not block %d", ErrInconsistentChain, next, next)
	}
	if parent != (common.Hash{}) && first.ParentHash != parent {
		return nil, fmt.Errorf("%w: block %d has parent %s, the cursor is %s", ErrParentMismatch, next, first.ParentHash.Hex(), parent.Hex())
	}
	if next < to {
		out = append(out, Cursor{Block: next, Hash: first.Hash()})
	}
	if d := w.cfg.AnchorDepth; d > 0 && to >= d && to-d > next {
		hash, found, err := w.hashOf(ctx, to-d)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%w: block %d is missing", ErrInconsistentChain, to-d)
		}
		out = append(out, Cursor{Block: to - d, Hash: hash})
	}
	return out, nil
}

// logs reads and decodes the contract's logs of blocks next..to. known
// holds the hashes of blocks of the range read with it: a log of one of
// those blocks must carry the same hash.
func (w *Watcher) logs(ctx context.Context, next, to uint64, known map[uint64]common.Hash) ([]payment.ProposalPaid, []payment.DebtPaid, error) {
	// One query for both events (topic0 either signature): one round trip,
	// and a range is handed on whole or not at all.
	logs, err := w.chain.FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: new(big.Int).SetUint64(next),
		ToBlock:   new(big.Int).SetUint64(to),
		Addresses: []common.Address{w.cfg.Contract},
		Topics:    [][]common.Hash{{paycontract.ProposalPaidTopic(), paycontract.DebtPaidTopic()}},
	})
	if err != nil {
		if rpcerr.IsRangeError(err) && ctx.Err() == nil {
			return nil, nil, &rangeRefused{err: fmt.Errorf("watch: logs of blocks %d-%d: %w", next, to, err)}
		}
		return nil, nil, fmt.Errorf("watch: logs of blocks %d-%d: %w", next, to, err)
	}
	logs, err = chainOrder(logs)
	if err != nil {
		return nil, nil, err
	}
	var (
		payments []payment.ProposalPaid
		debts    []payment.DebtPaid
	)
	for _, l := range logs {
		if l.BlockNumber < next || l.BlockNumber > to {
			return nil, nil, fmt.Errorf("%w: log of block %d in a query for %d-%d", ErrInconsistentChain, l.BlockNumber, next, to)
		}
		if h, ok := known[l.BlockNumber]; ok && l.BlockHash != h {
			return nil, nil, fmt.Errorf("%w: log of block %d has block hash %s, the block is %s", ErrInconsistentChain, l.BlockNumber, l.BlockHash.Hex(), h.Hex())
		}
		if l.Removed {
			// eth_getLogs never returns removed logs; a subscription
			// would. Retractions are the relay's job (internal/relay).
			continue
		}
		var err error
		switch {
		case len(l.Topics) > 0 && l.Topics[0] == paycontract.ProposalPaidTopic():
			var p payment.ProposalPaid
			if p, err = w.decoder.ProposalPaid(l); err == nil {
				payments = append(payments, p)
			}
		case len(l.Topics) > 0 && l.Topics[0] == paycontract.DebtPaidTopic():
			var d payment.DebtPaid
			if d, err = w.decoder.DebtPaid(l); err == nil {
				debts = append(debts, d)
			}
		default:
			return nil, nil, fmt.Errorf("%w: block %d tx %s log %d is neither event asked for", ErrInconsistentChain, l.BlockNumber, l.TxHash.Hex(), l.Index)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: block %d tx %s log %d: %w", ErrMalformedLog, l.BlockNumber, l.TxHash.Hex(), l.Index, err)
		}
	}
	return payments, debts, nil
}

// chainOrder sorts logs by (block, log index) and drops repeats of the same
// log. eth_getLogs returns chain order once each, but nothing in the API
// contract promises it and providers behind load balancers or caches have
// answered otherwise; consumers rely on the order and on each log once, so
// make it so. Two different logs at the same position, or one block under
// two hashes, are logs of different branches in one answer: refused.
func chainOrder(logs []types.Log) ([]types.Log, error) {
	slices.SortStableFunc(logs, func(a, b types.Log) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.Index, b.Index))
	})
	out := logs[:0]
	for i, l := range logs {
		if i > 0 {
			prev := out[len(out)-1]
			if l.BlockNumber == prev.BlockNumber && l.BlockHash != prev.BlockHash {
				return nil, fmt.Errorf("%w: block %d answered under hashes %s and %s", ErrInconsistentChain, l.BlockNumber, prev.BlockHash.Hex(), l.BlockHash.Hex())
			}
			if l.BlockNumber == prev.BlockNumber && l.Index == prev.Index {
				if !sameLog(l, prev) {
					return nil, fmt.Errorf("%w: two different logs at block %d index %d", ErrInconsistentChain, l.BlockNumber, l.Index)
				}
				continue
			}
		}
		out = append(out, l)
	}
	return out, nil
}

func sameLog(a, b types.Log) bool {
	return a.Address == b.Address && a.TxHash == b.TxHash && a.TxIndex == b.TxIndex && a.Removed == b.Removed &&
		slices.Equal(a.Topics, b.Topics) && bytes.Equal(a.Data, b.Data)
}
