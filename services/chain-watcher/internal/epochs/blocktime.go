package epochs

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"go.uber.org/zap"

	"github.com/contentledger/contentledger/pkg/payment"
)

// Chain is what the block-time source reads; *rpcpool.Pool satisfies it,
// so the reads fail over between endpoints like the watcher's own.
type Chain interface {
	BlockNumber(ctx context.Context) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
}

// BlockTime derives the epochs from block timestamps: the current epoch is
// the head block's timestamp / length, the same numbering as the
// validators' wall-clock estimate (unix time / length).
//
// The finalized epoch is the newest epoch no block after the chain's
// finalized block can fall in: a block's children are later than it, so
// with finalized block time t that is (t+1)/length - 1. The epoch holding
// a block that may still change is not final. An endpoint that answers no
// finalized block (pre-merge chains, some providers) gets current - 2
// (payment.EpochSourceBlockTimeLag). Once the tag was answered in this
// run, a reading without it keeps the last finalized epoch instead: current
// - 2 is usually ahead of the tag, and a figure once published stays.
//
// It is not safe for concurrent use.
type BlockTime struct {
	chain  Chain
	length uint64 // seconds
	log    *zap.Logger

	tagSeen   bool   // the finalized block was answered in this run
	noTag     bool   // the last reading had no finalized block (logged once)
	finalized uint64 // finalized epoch of the last reading that had the tag
}

// NewBlockTime returns a block-time source; length must be a whole number
// of seconds (block timestamps are).
func NewBlockTime(chain Chain, length time.Duration, log *zap.Logger) (*BlockTime, error) {
	if chain == nil {
		return nil, errors.New("epochs: no chain client")
	}
	if length < time.Second || length%time.Second != 0 {
		return nil, fmt.Errorf("epochs: epoch length %s is not a whole number of seconds", length)
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &BlockTime{chain: chain, length: uint64(length / time.Second), log: log}, nil
}

// Read reads the head block and the finalized block.
func (s *BlockTime) Read(ctx context.Context) (payment.EpochUpdate, error) {
	n, err := s.chain.BlockNumber(ctx)
	if err != nil {
		return payment.EpochUpdate{}, fmt.Errorf("epochs: head block number: %w", err)
	}
	// By number, not the "latest" tag: a numbered header is asked of every
	// endpoint before it counts as missing, and failures are retried.
	head, err := s.chain.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
	if err != nil {
		return payment.EpochUpdate{}, fmt.Errorf("epochs: header of head block %d: %w", n, err)
	}
	if head == nil || head.Number == nil || head.Number.Uint64() != n {
		return payment.EpochUpdate{}, fmt.Errorf("epochs: header for head block %d is another block", n)
	}
	u := payment.EpochUpdate{Current: head.Time / s.length, Source: payment.EpochSourceBlockTime, BlockNumber: n}
	fin, err := s.chain.HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	switch {
	case err == nil && fin != nil && fin.Number != nil:
		if s.noTag {
			s.log.Info("the endpoint answers the finalized block again")
		}
		s.tagSeen, s.noTag = true, false
		t := fin.Time
		if fin.Number.Cmp(head.Number) > 0 {
			t = head.Time // an inconsistent node: never beyond the head
		}
		s.finalized = min(finalEpoch(t, s.length), u.Current)
		u.Finalized = s.finalized
	case err == nil || noTag(err):
		if !s.noTag {
			s.log.Warn("the endpoint answers no finalized block", zap.Bool("keeping_last", s.tagSeen), zap.Error(err))
		}
		s.noTag = true
		if s.tagSeen {
			u.Finalized = min(s.finalized, u.Current)
		} else {
			u.Finalized = u.Current - min(u.Current, payment.EpochFinalityLag)
			u.Source = payment.EpochSourceBlockTimeLag
		}
	default:
		// No answer at all (transport, timeout): the whole reading fails
		// rather than guess at finality.
		return payment.EpochUpdate{}, fmt.Errorf("epochs: finalized block: %w", err)
	}
	return u, nil
}

// noTag reports whether err is an answer that the endpoint has no
// finalized block: "not found", or a JSON-RPC error object (an unknown
// tag, "finalized block not found").
func noTag(err error) bool {
	var re rpc.Error
	return errors.Is(err, ethereum.NotFound) || errors.As(err, &re)
}

// finalEpoch is the newest epoch entirely at or before second t: (t+1) /
// length - 1, or 0 when no epoch has ended by then.
func finalEpoch(t, length uint64) uint64 {
	if t == ^uint64(0) {
		return t / length
	}
	e := (t + 1) / length
	if e == 0 {
		return 0
	}
	return e - 1
}
