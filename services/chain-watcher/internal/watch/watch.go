// Package watch follows the payment contract's ProposalPaid and DebtPaid
// logs on an Ethereum chain through JSON-RPC, behind a number of
// confirmations, and hands them on in chain order, one bounded block range
// at a time.
//
// The watcher keeps no state but the next block to read: what is durable
// (the published payments, the checkpoint) belongs to the Handler, and the
// watcher advances only after the Handler accepted a range. A Handler that
// fails gets the same range again, re-read from the chain.
package watch

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
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/paycontract"
	"github.com/contentledger/contentledger/pkg/payment"
)

// Chain is what the watcher reads from an Ethereum JSON-RPC endpoint.
// *ethclient.Client and the simulated backend's client satisfy it.
type Chain interface {
	// BlockNumber returns the number of the head block.
	BlockNumber(ctx context.Context) (uint64, error)
	// HeaderByNumber returns the canonical header at number.
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	// FilterLogs runs an eth_getLogs query.
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
}

// DefaultMaxRange is the default number of blocks per eth_getLogs call.
// Providers cap ranges (often at 2,000 to 10,000 blocks) or the size of the
// answer; a bounded range also bounds the work redone after a failure.
const DefaultMaxRange = 2000

// maxBackoff caps the wait between attempts after errors.
const maxBackoff = 30 * time.Second

var (
	// ErrMalformedLog is returned by Run when the chain returns a log of the
	// contract with the ProposalPaid or DebtPaid signature that does not
	// decode. The watcher stops rather than skip it: a skipped log is a lost
	// payment.
	ErrMalformedLog = errors.New("watch: undecodable payment contract log")
	// ErrInconsistentChain is returned for answers that contradict the
	// query (a log outside the requested range, a missing header). It is
	// retried: it is what a node behind a load balancer, or a reorg between
	// two calls, looks like.
	ErrInconsistentChain = errors.New("watch: inconsistent answer from the chain")
)

// Cursor is a block the watcher has fully handled: every payment at or
// below it was accepted by the Handler.
type Cursor struct {
	Block uint64
	Hash  common.Hash
}

// Batch is one confirmed block range with its payments in chain order.
type Batch struct {
	// From and To are the range read, both inclusive.
	From, To uint64
	// Head is the chain head when the range was read.
	Head uint64
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
}

// Handler takes batches in order. When it returns an error, the watcher
// waits and reads the same range again, so Handle must be idempotent for
// the payments it already accepted (publication deduplicates by message id).
type Handler interface {
	Handle(ctx context.Context, b Batch) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, b Batch) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, b Batch) error { return f(ctx, b) }

// Config configures a Watcher.
type Config struct {
	// ChainID is the chain's id, stamped on every payment.
	ChainID uint64
	// Contract is the payment contract; logs of other emitters are ignored.
	Contract common.Address
	// Confirmations: a block is read once head - block >= Confirmations.
	// 0 reads the head itself.
	Confirmations uint64
	// PollInterval is the wait between looks at the head when caught up,
	// and the first wait after an error.
	PollInterval time.Duration
	// MaxRange is the most blocks per FilterLogs call; 0 means
	// DefaultMaxRange.
	MaxRange uint64
	// Logger; nil means no logging.
	Logger *zap.Logger
	// OnStep, if set, is called after every step (one look at the head,
	// maybe one range handled) with its error, nil when it succeeded, also
	// when there was nothing new: health reporting.
	OnStep func(error)
}

// Watcher reads confirmed ProposalPaid and DebtPaid logs. It is not safe for
// concurrent use: one Run at a time.
type Watcher struct {
	chain   Chain
	cfg     Config
	decoder paycontract.Decoder
	log     *zap.Logger
}

// New returns a Watcher reading from chain.
func New(chain Chain, cfg Config) (*Watcher, error) {
	if chain == nil {
		return nil, errors.New("watch: no chain client")
	}
	if cfg.Contract == (common.Address{}) {
		return nil, errors.New("watch: no contract address")
	}
	if cfg.PollInterval <= 0 {
		return nil, fmt.Errorf("watch: poll interval %s must be positive", cfg.PollInterval)
	}
	if cfg.MaxRange == 0 {
		cfg.MaxRange = DefaultMaxRange
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Watcher{
		chain:   chain,
		cfg:     cfg,
		decoder: paycontract.Decoder{ChainID: cfg.ChainID, Contract: cfg.Contract},
		log:     log,
	}, nil
}

// Next reads the next confirmed range starting at block next. ok is false
// when block next has fewer than the configured confirmations yet.
func (w *Watcher) Next(ctx context.Context, next uint64) (b Batch, ok bool, err error) {
	head, err := w.chain.BlockNumber(ctx)
	if err != nil {
		return Batch{}, false, fmt.Errorf("watch: head block number: %w", err)
	}
	if head < w.cfg.Confirmations {
		return Batch{}, false, nil
	}
	safe := head - w.cfg.Confirmations
	if next > safe {
		return Batch{}, false, nil
	}
	to := safe
	if safe-next >= w.cfg.MaxRange {
		to = next + w.cfg.MaxRange - 1
	}
	// One query for both events (topic0 either signature): one round trip,
	// and a range is handed on whole or not at all.
	logs, err := w.chain.FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: new(big.Int).SetUint64(next),
		ToBlock:   new(big.Int).SetUint64(to),
		Addresses: []common.Address{w.cfg.Contract},
		Topics:    [][]common.Hash{{paycontract.ProposalPaidTopic(), paycontract.DebtPaidTopic()}},
	})
	if err != nil {
		return Batch{}, false, fmt.Errorf("watch: logs of blocks %d-%d: %w", next, to, err)
	}
	// eth_getLogs returns chain order, but nothing in the API contract
	// promises it; consumers rely on it, so make it so.
	slices.SortFunc(logs, func(a, b types.Log) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.Index, b.Index))
	})
	var (
		payments []payment.ProposalPaid
		debts    []payment.DebtPaid
	)
	for _, l := range logs {
		if l.BlockNumber < next || l.BlockNumber > to {
			return Batch{}, false, fmt.Errorf("%w: log of block %d in a query for %d-%d", ErrInconsistentChain, l.BlockNumber, next, to)
		}
		if l.Removed {
			// eth_getLogs never returns removed logs; a subscription
			// would. Retractions are the reorg handling's job.
			continue
		}
		var err error
		switch {
		case len(l.Topics) > 0 && l.Topics[0] == paycontract.ProposalPaidTopic():
			var p payment.ProposalPaid
			if p, err = w.decoder.ProposalPaid(l); err == nil {
				p.Confirmations = head - p.BlockNumber
				payments = append(payments, p)
			}
		case len(l.Topics) > 0 && l.Topics[0] == paycontract.DebtPaidTopic():
			var d payment.DebtPaid
			if d, err = w.decoder.DebtPaid(l); err == nil {
				d.Confirmations = head - d.BlockNumber
				debts = append(debts, d)
			}
		default:
			return Batch{}, false, fmt.Errorf("%w: block %d tx %s log %d is neither event asked for", ErrInconsistentChain, l.BlockNumber, l.TxHash.Hex(), l.Index)
		}
		if err != nil {
			return Batch{}, false, fmt.Errorf("%w: block %d tx %s log %d: %w", ErrMalformedLog, l.BlockNumber, l.TxHash.Hex(), l.Index, err)
		}
	}
	header, err := w.chain.HeaderByNumber(ctx, new(big.Int).SetUint64(to))
	if err != nil {
		return Batch{}, false, fmt.Errorf("watch: header of block %d: %w", to, err)
	}
	if header == nil || header.Number == nil || header.Number.Uint64() != to {
		return Batch{}, false, fmt.Errorf("%w: header for block %d is not block %d", ErrInconsistentChain, to, to)
	}
	return Batch{
		From: next, To: to, Head: head, Payments: payments, Debts: debts,
		Cursor: Cursor{Block: to, Hash: header.Hash()},
	}, true, nil
}

// Run reads ranges from block next on and hands each to h, until ctx is
// done (then it returns nil). Errors of the chain and of h are logged and
// retried with exponential backoff; Run returns early only for
// ErrMalformedLog.
func (w *Watcher) Run(ctx context.Context, next uint64, h Handler) error {
	backoff := w.cfg.PollInterval
	for ctx.Err() == nil {
		b, ok, err := w.Next(ctx, next)
		if err == nil && ok {
			err = h.Handle(ctx, b)
		}
		if ctx.Err() != nil {
			return nil
		}
		if w.cfg.OnStep != nil {
			w.cfg.OnStep(err)
		}
		switch {
		case errors.Is(err, ErrMalformedLog):
			return err
		case err != nil:
			w.log.Warn("chain watch step failed; retrying", zap.Uint64("next_block", next), zap.Duration("backoff", backoff), zap.Error(err))
			sleep(ctx, backoff)
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = w.cfg.PollInterval
		if !ok {
			sleep(ctx, w.cfg.PollInterval)
			continue
		}
		w.log.Debug("handled block range", zap.Uint64("from", b.From), zap.Uint64("to", b.To),
			zap.Uint64("head", b.Head), zap.Int("payments", len(b.Payments)), zap.Int("debts", len(b.Debts)))
		next = b.To + 1
		if b.To+w.cfg.Confirmations >= b.Head {
			// Caught up: the next block needs a new head first.
			sleep(ctx, w.cfg.PollInterval)
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
